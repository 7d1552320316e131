"""The owner forwarder (agentstream/web/forward.py): answers arrive whole (up to the 4 MiB cap),
a HEAD on a remote table key works, routed pages get the client's end-to-end headers, and a
request forwarded by an older worker is never forwarded again."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import orjson
import pytest
from aiohttp import web

from agentstream.testing import AppHarness
from agentstream.transport.partitioner import default_partition
from agentstream.web.forward import MAX_FORWARDED_BYTES
from agentstream.web.forward_auth import FORWARD_AUTH_HEADER, sign, verify

from .test_web import hand_partition_to, url
from .test_web_hardening import _harness
from .test_web_routes import build, partition_of

pytestmark = pytest.mark.asyncio

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def owner(handle: Handler) -> AsyncIterator[str]:
    """A stand-in owner worker on loopback answering every request with ``handle``."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def streamed(body: bytes, content_type: str) -> Handler:
    """Answers ``body`` in 64 KiB writes: it arrives in many pieces."""

    async def handle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": content_type})
        await resp.prepare(request)
        for i in range(0, len(body), 65536):
            await resp.write(body[i : i + 65536])
        await resp.write_eof()
        return resp

    return handle


async def test_a_big_routed_page_answer_arrives_whole() -> None:
    big = b"x" * 1_000_000
    app, counts, _ = build()
    async with owner(streamed(big, "text/plain")) as address, AppHarness(app) as h:
        hand_partition_to(h, partition_of(counts, "pear"), address)
        async with aiohttp.ClientSession() as s, s.get(f"{h.web.url}/count/pear") as r:
            assert (r.status, await r.read()) == (200, big)


async def test_a_routed_page_answer_over_the_cap_is_502_naming_the_cap() -> None:
    app, counts, _ = build()
    async with owner(streamed(b"x" * (MAX_FORWARDED_BYTES + 70_000), "text/plain")) as address, AppHarness(app) as h:
        hand_partition_to(h, partition_of(counts, "pear"), address)
        async with aiohttp.ClientSession() as s, s.get(f"{h.web.url}/count/pear") as r:
            assert r.status == 502
            assert str(MAX_FORWARDED_BYTES) in (await r.json())["error"]


async def test_a_big_json_table_value_from_the_owner_arrives_whole() -> None:
    body = orjson.dumps({"table": "word_counts", "key": "hello", "value": "y" * 500_000})
    p = default_partition(b"hello", 4)
    async with owner(streamed(body, "application/json")) as address, await _harness() as h:
        hand_partition_to(h, p, address)
        async with aiohttp.ClientSession() as s, s.get(url(h, f"/tables/word_counts/hello?partition={p}")) as r:
            assert r.status == 200
            assert (await r.json())["value"] == "y" * 500_000


async def test_head_of_a_key_owned_by_another_worker_is_200() -> None:
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.method)
        return web.json_response({"value": 1})

    p = default_partition(b"hello", 4)
    async with owner(handle) as address, await _harness() as h:
        hand_partition_to(h, p, address)
        async with aiohttp.ClientSession() as s, s.head(url(h, f"/tables/word_counts/hello?partition={p}")) as r:
            assert r.status == 200, (r.status, seen)
    assert seen == ["GET"]


def echo_headers(seen: list[dict[str, str]]) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        seen.append({k.lower(): v for k, v in request.headers.items()} | {":path": request.raw_path})
        return web.json_response({"ok": True})

    return handle


CLIENT_HEADERS = {
    "Cookie": "session=abc",
    "X-Request-Id": "r-1",
    "Authorization": "Basic dXNlcjpwdw==",
    "Accept-Language": "fr",
    "X-Hop": "secret",
    "Connection": "keep-alive, X-Hop",
    "Keep-Alive": "timeout=5",
    "TE": "trailers",
    "Proxy-Authorization": "Basic cHJveHk=",
    "Upgrade": "h2c",
}


async def test_a_routed_page_gets_the_clients_end_to_end_headers_not_the_hop_by_hop_ones() -> None:
    seen: list[dict[str, str]] = []
    app, counts, _ = build()
    async with owner(echo_headers(seen)) as address, AppHarness(app, web_forward_credentials=True) as h:
        hand_partition_to(h, partition_of(counts, "pear"), address)
        async with aiohttp.ClientSession() as s, s.get(f"{h.web.url}/count/pear", headers=CLIENT_HEADERS) as r:
            assert r.status == 200, await r.text()
    (got,) = seen
    assert got["cookie"] == "session=abc"  # the operator opted in: web_forward_credentials
    assert got["x-request-id"] == "r-1"
    assert got["authorization"] == "Basic dXNlcjpwdw=="  # no web token: the client's own
    assert got["accept-language"] == "fr"
    assert got["x-agentstream-forwarded-by"] == h.web.address
    for hop in ("x-hop", "keep-alive", "te", "proxy-authorization", "upgrade"):
        assert hop not in got, hop
    assert got.get("connection", "").lower() != "keep-alive, x-hop"
    assert got["host"] == address


# -- issue 45 finding 4: the owner's address is a group member's word: no credentials go there ---------


async def test_by_default_the_owner_gets_neither_the_clients_cookies_nor_its_authorization() -> None:
    seen: list[dict[str, str]] = []
    app, counts, _ = build()
    async with owner(echo_headers(seen)) as address, AppHarness(app) as h:
        hand_partition_to(h, partition_of(counts, "pear"), address)
        headers = {**CLIENT_HEADERS, FORWARD_AUTH_HEADER: "v1:1:" + "0" * 64}
        async with aiohttp.ClientSession() as s, s.get(f"{h.web.url}/count/pear", headers=headers) as r:
            assert r.status == 200, await r.text()
    (got,) = seen
    for credential in ("cookie", "authorization", FORWARD_AUTH_HEADER.lower()):
        assert credential not in got, credential
    assert got["x-request-id"] == "r-1" and got["accept-language"] == "fr"  # the rest still goes


@pytest.mark.parametrize("opt_in", [False, True])
async def test_with_a_web_token_the_owner_gets_a_signature_for_its_address_never_the_token(opt_in: bool) -> None:
    seen: list[dict[str, str]] = []
    app, counts, _ = build()
    async with owner(echo_headers(seen)) as address:
        async with AppHarness(app, web_token="s3cret", web_forward_credentials=opt_in) as h:
            hand_partition_to(h, partition_of(counts, "pear"), address)
            headers = {"authorization": "Bearer s3cret", "Cookie": "c=1"}
            async with aiohttp.ClientSession() as s, s.get(f"{h.web.url}/count/pear?x=%2F1", headers=headers) as r:
                assert r.status == 200, await r.text()
    (got,) = seen
    assert "s3cret" not in str(got)
    assert "authorization" not in got
    assert ("cookie" in got) is opt_in
    signature = got[FORWARD_AUTH_HEADER.lower()]
    # valid for the owner it was sent to, and nowhere else
    path = got[":path"]
    assert path.startswith("/count/pear?x=")  # as sent (yarl may normalise the escaping)
    assert verify(b"s3cret", signature, "GET", address, path)
    assert not verify(b"s3cret", signature, "GET", "127.0.0.1:1", path)
    assert not verify(b"s3cret", signature, "GET", address, "/tables/counts")
    assert not verify(b"other", signature, "GET", address, path)


async def test_a_worker_accepts_a_signature_for_its_own_address_only() -> None:
    app, _, _ = build()
    async with AppHarness(app, web_token="s3cret") as h, aiohttp.ClientSession() as s:
        path = "/tables/counts"
        for address, expected in ((h.web.address, 200), ("127.0.0.1:1", 401)):
            signature = sign(b"s3cret", "GET", address, path)
            async with s.get(f"{h.web.url}{path}", headers={FORWARD_AUTH_HEADER: signature}) as r:
                assert r.status == expected, (address, await r.text())
        stale = sign(b"s3cret", "GET", h.web.address, path, now=time.time() - 3600)
        async with s.get(f"{h.web.url}{path}", headers={FORWARD_AUTH_HEADER: stale}) as r:
            assert r.status == 401


@pytest.mark.parametrize("header", ["X-Agentstream-Forwarded-By", "X-Agentstream-Routed-By"])
async def test_a_request_forwarded_by_a_worker_old_or_new_is_never_bounced_nor_answered_stale(header: str) -> None:
    seen: list[dict[str, str]] = []
    app, counts, ran = build()
    async with owner(echo_headers(seen)) as address, AppHarness(app) as h:
        hand_partition_to(h, partition_of(counts, "pear"), address)
        async with aiohttp.ClientSession() as s, s.get(f"{h.web.url}/count/pear", headers={header: address}) as r:
            assert r.status == 503  # not ours: the page would read the default; the sender retries
        p = 0
        hand_partition_to(h, p, address)
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{h.web.url}/tables/counts/hello?partition={p}", headers={header: address}) as r:
                assert r.status == 503  # not here, and never bounced back to the sender
    assert seen == [] and ran == []
