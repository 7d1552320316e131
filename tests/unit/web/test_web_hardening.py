"""Issue 15, web items 2, 3, 4, 9, 10: the worker's web server cannot be used against the worker.

Real HTTP (and raw sockets) to 127.0.0.1 against whole apps run by AppHarness on the memory
transport. Waits are bounded; nothing asserts a wall-clock duration.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import agentstream
from agentstream.testing import AppHarness
from agentstream.transport.partitioner import default_partition

from .test_web import TEXTS, expected_counts, get, hand_partition_to, url


async def _harness(**settings: Any) -> AppHarness:
    from apps.wordcount import app

    return AppHarness(app, **settings)


@pytest.fixture
async def guarded() -> AsyncIterator[AppHarness]:
    async with await _harness(web_header_timeout=0.5, web_body_timeout=1.0, web_max_connections=20) as h:
        for t in TEXTS:
            await h.send("sentences", {"text": t})
        await h.wait_idle()
        yield h


async def _closed_by_server(reader: asyncio.StreamReader, limit: float) -> bool:
    """True when the server closes the connection within ``limit`` seconds (a bounded wait)."""
    try:
        data = await asyncio.wait_for(reader.read(65536), limit)
    except TimeoutError:
        return False
    except (ConnectionError, OSError):
        return True
    while data:  # an error answer may come first, then the close
        try:
            data = await asyncio.wait_for(reader.read(65536), limit)
        except TimeoutError:
            return False
        except (ConnectionError, OSError):
            return True
    return True


# -- item 2: partial headers, trickling clients, connection cap ------------------------------------


async def test_partial_header_client_is_dropped(guarded: AppHarness) -> None:
    port = guarded.web.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /tables HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    await writer.drain()
    assert await _closed_by_server(reader, 15.0)
    writer.close()


async def test_trickling_header_client_is_dropped(guarded: AppHarness) -> None:
    port = guarded.web.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /tables HTTP/1.1\r\n")
    closed = False
    for i in range(100):  # one header line every 0.2 s; the head deadline is 0.5 s
        try:
            writer.write(f"X-Slow-{i}: a\r\n".encode())
            await writer.drain()
        except (ConnectionError, OSError):
            closed = True
            break
        if reader.at_eof():
            closed = True
            break
        await asyncio.sleep(0.2)
    assert closed or await _closed_by_server(reader, 5.0)
    writer.close()


async def test_slow_body_is_dropped_but_complete_requests_are_served(guarded: AppHarness) -> None:
    port = guarded.web.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /tables HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
    await writer.drain()
    assert await _closed_by_server(reader, 15.0)
    writer.close()
    # a keep-alive connection that answered a request is not cut by the head deadline while idle
    async with aiohttp.ClientSession() as s:
        for _ in range(3):
            async with s.get(url(guarded, "/livez")) as r:
                assert r.status == 200
            await asyncio.sleep(0.7)


async def test_many_idle_connections_are_capped(guarded: AppHarness) -> None:
    web_ = guarded.web
    conns = [await asyncio.open_connection("127.0.0.1", web_.port) for _ in range(60)]
    await asyncio.sleep(0.2)
    assert web_.limits.open <= 20
    refused = 0
    for reader, _ in conns:
        if await _closed_by_server(reader, 0.05):
            refused += 1
    assert refused >= 40
    # the idle ones hit the head deadline; then the server answers again
    for _, writer in conns:
        writer.close()
    for _ in range(100):
        if web_.limits.open == 0:
            break
        await asyncio.sleep(0.1)
    status, body, _ = await get(url(guarded, "/livez"))
    assert status == 200 and body == {"status": "alive"}


# -- item 10: bearer token ----------------------------------------------------------------------------


async def test_bearer_token_guards_every_endpoint_but_livez() -> None:
    async with await _harness(web_token="s3cret-token") as h:
        for path in (
            "/",
            "/tables",
            "/tables/word_counts",
            "/tables/word_counts/hello",
            "/metadata",
            "/status",
            "/status.html",
            "/metrics",
            "/readyz",
            "/no/such/path",
        ):
            status, body, headers = await get(url(h, path))
            assert status == 401 and "bearer token" in body["error"], path
            assert headers["WWW-Authenticate"].startswith("Bearer")
            status, _, _ = await get(url(h, path), headers={"Authorization": "Bearer wrong"})
            assert status == 401, path
            status, _, _ = await get(url(h, path), headers={"Authorization": "s3cret-token"})
            assert status == 401, path
        ok = {"Authorization": "Bearer s3cret-token"}
        status, body, _ = await get(url(h, "/tables"), headers=ok)
        assert status == 200 and body["tables"][0]["name"] == "word_counts"
        status, _, _ = await get(url(h, "/livez"))
        assert status == 200


# -- /livez and /readyz -------------------------------------------------------------------------------


async def test_livez_and_readyz(guarded: AppHarness) -> None:
    status, body, _ = await get(url(guarded, "/livez"))
    assert (status, body) == (200, {"status": "alive"})
    status, body, _ = await get(url(guarded, "/readyz"))
    assert status == 200 and body["ready"] is True
    guarded.worker.assigned.clear()  # as during a rebalance
    try:
        status, body, headers = await get(url(guarded, "/readyz"))
        assert status == 503 and body["ready"] is False and "assigned" in body["problems"][0]
        assert headers["Retry-After"] == "1"
    finally:
        guarded.worker.assigned.set()


# -- item 3: SSRF and spoofing through group metadata ----------------------------------------------


class EvilOwner:
    """A server a hostile group member points at: records requests, answers HTML."""

    def __init__(self, *, content_type: str = "text/html", body: str = "<script>alert(1)</script>") -> None:
        self.requests: list[str] = []
        self.content_type, self.body = content_type, body
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(str(request.rel_url))
        return web.Response(text=self.body, content_type=self.content_type)

    async def __aenter__(self) -> EvilOwner:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.port = self.runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def test_owner_with_a_path_in_its_address_is_never_contacted(guarded: AppHarness) -> None:
    p = default_partition(b"hello", 4)
    async with EvilOwner() as evil:
        for bad in (
            f"127.0.0.1:{evil.port}/steal?x=",
            f"127.0.0.1:{evil.port}#",
            f"user@127.0.0.1:{evil.port}",
            f"http://127.0.0.1:{evil.port}",
            f"127.0.0.1:{evil.port}?a=b",
            "127.0.0.1:0",
            f"127.0.0.1:{evil.port} ",
        ):
            hand_partition_to(guarded, p, bad)
            for query in (f"?partition={p}", f"?partition={p}&redirect=1"):
                status, body, headers = await get(url(guarded, f"/tables/word_counts/hello{query}"))
                assert status == 503, (bad, status, body)
                assert isinstance(body, dict) and "Location" not in headers
        assert evil.requests == []


async def test_owner_answering_html_is_not_served_from_our_origin(guarded: AppHarness) -> None:
    p = default_partition(b"hello", 4)
    async with EvilOwner() as evil:
        hand_partition_to(guarded, p, f"127.0.0.1:{evil.port}")
        status, body, headers = await get(url(guarded, f"/tables/word_counts/hello?partition={p}"))
        assert len(evil.requests) == 1
        assert status == 502 and isinstance(body, dict) and "<script>" not in str(body)
        assert headers["Content-Type"].startswith("application/json")
        assert headers["X-Content-Type-Options"] == "nosniff"
    async with EvilOwner(content_type="application/json", body="<html>not json") as evil:
        hand_partition_to(guarded, p, f"127.0.0.1:{evil.port}")
        status, body, _ = await get(url(guarded, f"/tables/word_counts/hello?partition={p}"))
        assert status == 502 and "not JSON" in body["error"]


async def test_forwarding_carries_a_signature_not_the_token() -> None:
    """Issue 45 finding 4: the owner's address is what a group member advertised; it gets a
    signature bound to that address (see test_forward.py), never the token."""
    seen: list[str | None] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        seen.append(request.headers.get("X-Agentstream-Forward-Auth", "")[:3])
        return web.json_response({"value": 1})

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        async with await _harness(web_token="tok") as h:
            p = default_partition(b"hello", 4)
            hand_partition_to(h, p, f"127.0.0.1:{runner.addresses[0][1]}")
            status, _, _ = await get(
                url(h, f"/tables/word_counts/hello?partition={p}"), headers={"Authorization": "Bearer tok"}
            )
            assert status == 200 and seen == [None, "v1:"]
    finally:
        await runner.cleanup()


# -- item 4: key listings and counts never stall the loop -----------------------------------------


async def test_deep_key_listing_yields_to_the_loop(tmp_path: Any) -> None:
    app = agentstream.App(
        f"big-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, store="rocksdb://", data_dir=tmp_path
    )
    src = app.topic("src", key_type=str, value_type=int)
    table = app.Table("t", default=int, key_type=str)

    @app.agent(src)
    async def fill(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    async with AppHarness(app, store="rocksdb://", data_dir=tmp_path) as h:
        part = table.parts[0]
        assert type(part.store).__name__ == "RocksDBStore"
        part.store.write_batch((f"key-{i:07d}".encode(), b"1") for i in range(200_000))
        part.store.flush()
        gaps: list[float] = []
        stop = asyncio.Event()

        # This thread's CPU time, not the wall clock: on a loaded machine the process may be
        # descheduled for a large part of the request, which is no stall of the loop's making.
        clock = time.thread_time

        async def ticker() -> None:
            last = clock()
            while not stop.is_set():
                await asyncio.sleep(0)
                now = clock()
                gaps.append(now - last)
                last = now

        gc.disable()  # nor is a collection of the test process's heap
        try:
            t = asyncio.ensure_future(ticker())
            began = clock()
            status, body, _ = await get(url(h, "/tables/t?offset=199000&limit=1000"))
            took = clock() - began
            stop.set()
            await t
        finally:
            gc.enable()
        assert status == 200 and len(body["items"]) == 1000 and body["items"][0]["key"] == "key-0199000"
        assert body["next_offset"] is None
        # relative, not absolute: the scan gave the loop back all along, so no single stall is a
        # large part of the request (a synchronous scan is one stall of nearly all of it)
        assert max(gaps) < took / 4, (max(gaps), took, len(gaps))
        # the status sampler takes RocksDB's key estimate: it never scans the 200,000 keys
        scans_before = len(part.store._scans)  # type: ignore[attr-defined]
        part.store.items = lambda *a, **k: (_ for _ in ()).throw(AssertionError("the sampler scanned"))  # type: ignore[method-assign]
        await h.web.stats.sample()
        assert len(part.store._scans) == scans_before  # type: ignore[attr-defined]


# -- item 9: window values, malformed requests ---------------------------------------------------------


async def test_huge_and_negative_windows_are_4xx() -> None:
    app = agentstream.App(f"win-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int, key_type=str).tumbling(10.0, expires=1e9)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    async with AppHarness(app) as h:
        await h.send("events", {}, key="k", timestamp=-50.0)
        await h.wait_idle()
        for window in ("1e20", "1e308", "-1e308", "9e15", "1e19", "current", "253402300800"):
            status, body, _ = await get(url(h, f"/tables/counts/k?window={window}"))
            assert 400 <= status < 500, (window, status, body)
            assert isinstance(body, dict) and "error" in body


async def test_malformed_requests_log_one_line_not_tracebacks(
    guarded: AppHarness, caplog: pytest.LogCaptureFixture
) -> None:
    port = guarded.web.port
    with caplog.at_level(logging.DEBUG):
        for junk in (
            b"GARBAGE\r\n\r\n",
            b"GET / HTTP/9.9\r\n\r\n",
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
            b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n",
            b"G\x00T / HTTP/1.1\r\n\r\n",
        ) * 4:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(junk)
            await writer.drain()
            await _closed_by_server(reader, 3.0)
            writer.close()
    server_records = [r for r in caplog.records if r.name.startswith("aiohttp")]
    assert all(r.exc_info is None and "Traceback" not in r.getMessage() for r in server_records)
    assert len(server_records) <= 2, [r.getMessage() for r in server_records]
    assert "Traceback" not in caplog.text


# -- fuzz: random paths, query strings and headers -----------------------------------------------------

PATHS = [
    "/",
    "/tables",
    "/tables/",
    "/tables/word_counts",
    "/tables/word_counts/",
    "/metadata",
    "/status",
    "/status.json",
    "/status.html",
    "/metrics",
    "/livez",
    "/readyz",
    "/tables/nope",
    "/x/../tables",
]
TEXT_ENDPOINTS = {"/status.html": "text/html", "/metrics": "text/plain", "/status": "text/html"}
PARAMS = ["window", "offset", "limit", "partition", "hops", "redirect", "format", "history"]
VALUES = [
    "",
    "0",
    "-1",
    "1e20",
    "1e308",
    "nan",
    "inf",
    "-inf",
    "current",
    "now",
    "1,2,3",
    "99999999999999999999",
    "%00",
    "%ff",
    "\u00e9",
    "<script>",
    "'\"",
    "true",
    "html",
    "json",
    "0x10",
    " ",
    "1.5",
    "-0",
]


def _random_key(rnd: random.Random) -> str:
    alphabet = "abc019%/-_.~\"'{}[]:,\\ \u00e9\u4e2d"
    return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12)))


def _random_request(rnd: random.Random) -> tuple[str, dict[str, str]]:
    path = rnd.choice(PATHS)
    if rnd.random() < 0.4:
        path = "/tables/word_counts/" + _random_key(rnd)
    query = "&".join(f"{rnd.choice(PARAMS)}={rnd.choice(VALUES)}" for _ in range(rnd.randint(0, 4)))
    headers = {}
    if rnd.random() < 0.3:
        headers["Accept"] = rnd.choice(["text/html", "*/*", "application/json", "\u00e9"])
    if rnd.random() < 0.2:
        headers["X-Agentstream-Forwarded-By"] = rnd.choice(["127.0.0.1:1", "x", ""])
    if rnd.random() < 0.1:
        headers["Authorization"] = rnd.choice(["Bearer x", "Basic abc", ""])
    return path + ("?" + query if query else ""), headers


async def test_fuzzed_requests_get_json_4xx_never_500_and_processing_goes_on(guarded: AppHarness) -> None:
    rnd = random.Random(15)
    base = guarded.web.url
    async with aiohttp.ClientSession() as s:
        for _ in range(400):
            target, headers = _random_request(rnd)
            try:
                async with s.get(yarl_url(base + target), allow_redirects=False, headers=headers) as r:
                    body = await r.read()
                    status, ctype = r.status, r.content_type
            except aiohttp.ClientError as exc:
                pytest.fail(f"{target!r}: {exc!r}")
            assert status < 500, (target, headers, status, body[:300])
            path = target.split("?")[0]
            if status >= 400 or path not in TEXT_ENDPOINTS:
                assert ctype == "application/json", (target, status, ctype, body[:200])
    # the worker kept processing
    more = ["fuzz survivors fuzz"]
    for t in more:
        await guarded.send("sentences", {"text": t})
    await guarded.wait_idle()
    status, body, _ = await get(url(guarded, "/tables/word_counts/fuzz"))
    assert status == 200 and body["value"] == expected_counts(more)["fuzz"]


def yarl_url(raw: str) -> Any:
    from yarl import URL

    return URL(raw.replace(" ", "%20"), encoded=True) if "%" in raw else URL(raw)


async def test_a_host_this_machine_cannot_bind_is_reported_as_web_host() -> None:
    from agentstream.exceptions import ConfigError
    from agentstream.worker.worker import Worker

    app = agentstream.App(
        f"host-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, web_host="192.0.2.1"
    )  # TEST-NET-1: a valid address no local interface has
    app.topic("src")
    from agentstream.web import run_worker

    worker = Worker(app, web_port=0)
    with pytest.raises(ConfigError) as info:
        await run_worker(worker)
    assert info.value.setting == "web_host"


def test_guarded_server_on_uvloop() -> None:
    """Workers run on uvloop, whose transports are not asyncio.Transport subclasses."""
    uvloop = pytest.importorskip("uvloop")

    async def main() -> None:
        async with await _harness(web_header_timeout=0.5, web_max_connections=5) as h:
            status, body, _ = await get(url(h, "/livez"))
            assert (status, body) == (200, {"status": "alive"})
            reader, writer = await asyncio.open_connection("127.0.0.1", h.web.port)
            writer.write(b"GET / HTTP/1.1\r\n")
            await writer.drain()
            assert await _closed_by_server(reader, 15.0)
            writer.close()
            status, _, _ = await get(url(h, "/tables"))
            assert status == 200

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(asyncio.wait_for(main(), 60))  # bounded: a broken protocol hangs the request


# -- issue 45 finding 9: Host header, open binds, slow readers --------------------------------------------

EVIL_HOST = "rebind.attacker.example:6066"


async def _status_for_host(h: AppHarness, host: str, path: str = "/tables", **headers: str) -> int:
    status, _, _ = await get(url(h, path), headers={"Host": host, **headers})
    return status


async def test_a_loopback_server_without_a_token_answers_only_its_own_host_names() -> None:
    """DNS rebinding: a page on attacker.example, its name pointed at 127.0.0.1, would otherwise read
    every table of a worker on the default bind through the visitor's browser."""
    async with await _harness() as h:
        assert await _status_for_host(h, EVIL_HOST) == 421
        assert await _status_for_host(h, "rebind.attacker.example") == 421
        assert await _status_for_host(h, EVIL_HOST, "/status") == 421
        for own in (f"127.0.0.1:{h.web.port}", "localhost", "LOCALHOST.:1", "[::1]:6066", "127.0.0.2", "a.localhost"):
            assert await _status_for_host(h, own) == 200, own
        assert await _status_for_host(h, EVIL_HOST, "/livez") == 200  # probes
        assert h.web.misdirected == 3


async def test_web_allowed_hosts_names_more_hosts_or_turns_the_check_off() -> None:
    async with await _harness(web_allowed_hosts="dash.example.com, Other.example") as h:
        assert await _status_for_host(h, "dash.example.com:80") == 200
        assert await _status_for_host(h, "other.example") == 200
        assert await _status_for_host(h, EVIL_HOST) == 421
    async with await _harness(web_allowed_hosts="*") as h:
        assert await _status_for_host(h, EVIL_HOST) == 200
    bearer = {"Authorization": "Bearer tok"}
    async with await _harness(web_token="tok") as h:  # the token is the defence: no Host check by default
        assert await _status_for_host(h, EVIL_HOST, **bearer) == 200
    async with await _harness(web_token="tok", web_allowed_hosts="dash.example.com") as h:  # a list always applies
        assert await _status_for_host(h, EVIL_HOST, **bearer) == 421
        assert await _status_for_host(h, "dash.example.com", **bearer) == 200


def test_a_bad_allowed_host_is_refused_naming_the_setting() -> None:
    from agentstream.exceptions import ConfigError

    with pytest.raises(ConfigError) as info:
        agentstream.App("hosts", broker="memory://", web_allowed_hosts="ok.example, http://bad/")
    assert info.value.setting == "web_allowed_hosts"


async def test_listening_beyond_loopback_without_a_token_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentstream.web"):
        async with await _harness(web_bind="0.0.0.0"):
            pass
        assert "without web_token" in caplog.text and "0.0.0.0" in caplog.text
        caplog.clear()
        async with await _harness(web_bind="0.0.0.0", web_token="tok"), await _harness(web_bind="127.0.0.1"):
            pass
        assert "without web_token" not in caplog.text


async def test_a_client_that_never_reads_a_large_answer_is_dropped() -> None:
    app = agentstream.App(f"slow-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    app.topic("src")
    big = b"x" * (32 * 1024 * 1024)

    @app.page("/big")
    async def page(web_: Any, request: web.Request) -> web.Response:
        return web.Response(body=big, content_type="application/octet-stream")

    async with AppHarness(app, web_body_timeout=0.5) as h:
        limits = h.web.limits
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, ("127.0.0.1", h.web.port))
        await loop.sock_sendall(sock, b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        try:
            for _ in range(400):  # bounded waits: the server takes the connection...
                if limits.open == 1:
                    break
                await asyncio.sleep(0.01)
            for _ in range(400):  # ...and lets go of it, its answer never read
                if limits.open == 0:
                    break
                await asyncio.sleep(0.05)
            assert limits.open == 0 and limits.stalled_readers == 1
            status, _, _ = await get(url(h, "/livez"))  # and goes on serving
            assert status == 200
        finally:
            sock.close()
