"""The worker's web server on the memory transport: real HTTP requests to 127.0.0.1 against a
whole app run by AppHarness (which binds the web server on a free port)."""

from __future__ import annotations

import asyncio
import collections
import re
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.testing import AppHarness
from agentstream.transport.partitioner import default_partition
from agentstream.web import View, run_worker

pytestmark = pytest.mark.asyncio

TEXTS = ["Hello world hello", "the quick brown fox", "World of the fox!", "a b c a b a", "route 66 and 42"]


def expected_counts(texts: list[str]) -> dict[str, int]:
    c: collections.Counter[str] = collections.Counter()
    for t in texts:
        c.update(w for w in re.split(r"\W+", t.lower()) if w)
    return dict(c)


async def get(url: str, **kwargs: Any) -> tuple[int, Any, Any]:
    """(status, JSON or text body, headers) of one GET, redirects not followed."""
    async with aiohttp.ClientSession() as s:
        async with s.get(url, allow_redirects=False, **kwargs) as r:
            body: Any = await r.json() if r.content_type == "application/json" else await r.text()
            return r.status, body, r.headers


@pytest.fixture
async def wordcount() -> AsyncIterator[AppHarness]:
    from apps.wordcount import app

    async with AppHarness(app) as h:
        for t in TEXTS * 3:
            await h.send("sentences", {"text": t})
        await h.wait_idle()
        yield h


def url(h: AppHarness, path: str) -> str:
    return h.web.url + path  # type: ignore[no-any-return]


# -- lookups ---------------------------------------------------------------------------------------


async def test_harness_binds_a_free_port_and_advertises_it(wordcount: AppHarness) -> None:
    web_ = wordcount.web
    assert web_ is not None and web_.port != 0
    assert wordcount.worker.assignor.host == f"127.0.0.1:{web_.port}"
    status, body, _ = await get(url(wordcount, "/metadata"))
    assert status == 200
    assert body["partitions"] == {str(p): web_.address for p in range(4)}
    assert body["active"] == [0, 1, 2, 3]


async def test_every_word_is_readable_with_its_count(wordcount: AppHarness) -> None:
    expected = expected_counts(TEXTS * 3)
    for word, count in expected.items():
        # digits parse as JSON numbers: quote them to ask for the string
        key = f'"{word}"' if word.isdigit() else word
        status, body, _ = await get(url(wordcount, f"/tables/word_counts/{key}"))
        assert status == 200, (word, body)
        assert body["value"] == count and body["key"] == word
    # an untyped table's keys are Faust's raw bytes: 66 and "66" are the same key (b"66")
    status, body, _ = await get(url(wordcount, "/tables/word_counts/66"))
    assert status == 200 and body["value"] == expected["66"]


async def test_not_found_errors_are_json_with_hints(wordcount: AppHarness) -> None:
    status, body, _ = await get(url(wordcount, "/tables/nope/x"))
    assert status == 404 and body["tables"] == ["word_counts"] and body["hint"]
    status, body, _ = await get(url(wordcount, "/tables/nope"))
    assert status == 404 and body["tables"] == ["word_counts"]
    status, body, _ = await get(url(wordcount, "/tables/word_counts/never-seen"))
    assert status == 404 and body["error"].startswith("key 'never-seen' not found")
    status, body, _ = await get(url(wordcount, "/no/such/endpoint"))
    assert status == 404 and "/metrics" in body["endpoints"]
    async with aiohttp.ClientSession() as s:
        async with s.post(url(wordcount, "/tables")) as r:
            assert r.status == 405 and (await r.json())["error"].startswith("POST is not allowed")


async def test_bad_requests_are_4xx_json(wordcount: AppHarness) -> None:
    cases = {
        "/tables/word_counts/" + "k" * 1025: (400, "longer than 1024 bytes"),
        "/tables/word_counts/" + "k" * 1024: (404, "not found"),  # exactly 1 KiB is allowed
        "/" + "p" * 5000: (414, "longer than 4096 bytes"),
        "/tables/word_counts/null": (400, "cannot be encoded"),
        "/tables/word_counts/hello?window=now": (400, "not windowed"),
        "/tables/word_counts?limit=0": (400, "bad page"),
        "/tables/word_counts?offset=x": (400, "must be integers"),
        "/tables/word_counts/hello?partition=9": (400, "bad partition list"),
    }
    for path, (code, fragment) in cases.items():
        status, body, _ = await get(url(wordcount, path))
        assert status == code, (path[:60], body)
        assert fragment in body["error"] and "hint" in body, (path[:60], body)


async def test_503_with_retry_after_while_the_partition_restores(wordcount: AppHarness) -> None:
    table = wordcount.app.tables["word_counts"]
    part = table.parts[default_partition(b"hello", 4)]  # the words topic's key encoding
    part.restoring()  # what the table manager does until the changelog is replayed
    try:
        status, body, headers = await get(url(wordcount, "/tables/word_counts/hello"))
        assert status == 503 and headers["Retry-After"] == "1"
        assert "restoring" in body["error"]
        status, body, _ = await get(url(wordcount, "/tables/word_counts"))
        assert body["restoring"] == [part.partition]
    finally:
        part.activate()
    status, body, _ = await get(url(wordcount, "/tables/word_counts/hello"))
    assert status == 200 and body["value"] == 6


async def test_paged_listing_covers_every_key_once(wordcount: AppHarness) -> None:
    expected = expected_counts(TEXTS * 3)
    seen: dict[str, int] = {}
    offset: int | None = 0
    pages = 0
    while offset is not None:
        status, body, _ = await get(url(wordcount, f"/tables/word_counts?offset={offset}&limit=4"))
        assert status == 200 and len(body["items"]) <= 4
        assert body["total"] == len(expected)
        for item in body["items"]:
            assert item["key"] not in seen
            seen[item["key"]] = item["value"]
        offset = body["next_offset"]
        pages += 1
    assert seen == expected
    assert pages == -(-len(expected) // 4)
    status, body, _ = await get(url(wordcount, "/tables"))
    [info] = body["tables"]
    assert info["name"] == "word_counts" and info["local_keys"] == len(expected)
    assert info["changelog"] == "wordcount-word_counts-changelog" and info["local_partitions"] == [0, 1, 2, 3]


# -- metrics and status ---------------------------------------------------------------------------

METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]\w*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+]+)$')


def parse_metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Strict enough parse of the Prometheus text format: every line must be valid."""
    types: dict[str, str] = {}
    out: dict[str, list[tuple[dict[str, str], float]]] = collections.defaultdict(list)
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge"), line
            types[name] = kind
            continue
        if line.startswith("# HELP "):
            continue
        m = METRIC_LINE.match(line)
        assert m, f"not a metric line: {line!r}"
        name = m.group(1)
        assert name in types, f"{name} has no TYPE line before its samples"
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[name].append((labels, float(m.group(4))))
    return out


async def test_metrics_in_prometheus_text_format(wordcount: AppHarness) -> None:
    status, text, headers = await get(url(wordcount, "/metrics"))
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    metrics = parse_metrics(text)
    processed = {labels["agent"]: v for labels, v in metrics["agentstream_records_processed_total"]}
    words = sum(expected_counts(TEXTS * 3).values())
    assert processed == {"split_sentences": len(TEXTS) * 3, "count_words": words}
    lag = {(lb["topic"], lb["partition"]): v for lb, v in metrics["agentstream_consumer_lag"]}
    assert {t for t, _ in lag} == {"sentences", "wordcount-words"} and len(lag) == 8
    assert all(v == 0 for v in lag.values()), lag  # wait_idle: everything handled
    keys = sum(v for lb, v in metrics["agentstream_table_keys"] if lb["table"] == "word_counts")
    assert keys == len(expected_counts(TEXTS * 3))
    assert metrics["agentstream_commits_total"][0][1] >= 1
    for name in (
        "agentstream_decode_errors_total",
        "agentstream_agent_errors_total",
        "agentstream_table_restored_records_total",
    ):
        assert metrics[name] == [({}, 0.0)], name


async def test_status_json_history_and_html(wordcount: AppHarness) -> None:
    stats = wordcount.web.stats
    await stats.sample()
    await stats.sample()
    status, body, _ = await get(url(wordcount, "/status?history=1"))
    assert status == 200
    assert body["agents"]["split_sentences"]["processed"] == len(TEXTS) * 3
    assert body["restore"]["parts_ready"] == body["restore"]["parts_active"] == 4
    hist = body["history"]
    assert len(hist["t"]) >= 2
    assert set(hist["records_per_s"]) == {"split_sentences", "count_words"}
    assert all(len(v) == len(hist["t"]) for v in hist["lag"].values()) and len(hist["lag"]) == 8
    status, body, _ = await get(url(wordcount, "/status"))
    assert "history" not in body
    status, page, headers = await get(url(wordcount, "/status"), headers={"Accept": "text/html,*/*"})
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    for plot in ("records", "lag", "restore", "tables"):
        assert f'id="points-{plot}"' in page and f'id="c-{plot}"' in page
    assert "http://" not in page.replace("http://127.0.0.1", "")  # nothing fetched from elsewhere
    status, page2, _ = await get(url(wordcount, "/status.html"))
    assert page2 == page


# -- routing to other workers (the owner is a stub server) -----------------------------------------


class StubOwner:
    """A fake owner worker: records what it was asked and answers with a fixed value."""

    def __init__(self) -> None:
        self.requests: list[web.Request] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(request)
        return web.json_response({"value": 99, "served_by": "stub"})

    async def __aenter__(self) -> StubOwner:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def hand_partition_to(h: AppHarness, partition: int, owner: str | None) -> None:
    """Pretend the last rebalance gave ``partition`` to ``owner``."""
    a = h.worker.assignor.assignment
    a.active = [p for p in a.active if p != partition]
    if owner is None:
        a.owners.pop(partition, None)
    else:
        a.owners[partition] = owner


async def test_remote_keys_are_forwarded_or_redirected(wordcount: AppHarness) -> None:
    p = default_partition(b"hello", 4)
    async with StubOwner() as stub:
        owner = f"127.0.0.1:{stub.port}"
        hand_partition_to(wordcount, p, owner)
        # the table codec's partition (JSON) is still local: checked here first, then the owner
        status, body, headers = await get(url(wordcount, "/tables/word_counts/hello"))
        assert status == 200 and body == {"value": 99, "served_by": "stub"}
        assert headers["X-Agentstream-Served-By"] == owner
        [req] = stub.requests
        assert req.query["partition"] == str(p)
        assert req.headers["X-Agentstream-Forwarded-By"] == wordcount.web.address

        status, _, headers = await get(url(wordcount, "/tables/word_counts/hello?redirect=1"))
        assert status == 307
        assert headers["Location"].startswith(f"http://{owner}/tables/word_counts/hello?")
        assert f"partition={p}" in headers["Location"]
        assert len(stub.requests) == 1  # a redirect does not call the owner

        # a forwarded request for a partition we do not own is never forwarded again
        status, body, _ = await get(
            url(wordcount, f"/tables/word_counts/hello?partition={p}"),
            headers={"X-Agentstream-Forwarded-By": "127.0.0.1:1"},
        )
        assert status == 503 and "rebalancing" in body["error"]
        assert len(stub.requests) == 1


async def test_unknown_or_unreachable_owner_is_503(wordcount: AppHarness) -> None:
    p = default_partition(b"hello", 4)
    hand_partition_to(wordcount, p, None)
    status, body, headers = await get(url(wordcount, f"/tables/word_counts/hello?partition={p}"))
    assert status == 503 and "unknown" in body["error"] and headers["Retry-After"] == "1"

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    hand_partition_to(wordcount, p, dead)
    status, body, _ = await get(url(wordcount, f"/tables/word_counts/hello?partition={p}"))
    assert status == 503 and "not reachable" in body["error"] and body["owner"] == dead


# -- app pages and robustness ------------------------------------------------------------------------


async def test_app_pages_function_and_view_class() -> None:
    app = agentstream.App(f"pages-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2)
    counts = app.Table("counts", default=int)
    src = app.topic("src", key_type=str, value_type=int)

    @app.agent(src)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            counts[event.key] += event.value

    @app.page("/hello/{name}")
    async def hello(web_: Any, request: web.Request, name: str) -> Any:
        return web_.json({"hello": name, "app": web_.app.id})

    @app.page("/plain")
    async def plain(web_: Any, request: web.Request) -> Any:
        return {"converted": True}

    @app.page("/boom")
    async def boom(web_: Any, request: web.Request) -> Any:
        raise RuntimeError("handler bug")

    @app.page("/echo")
    class Echo(View):
        async def get(self, request: web.Request) -> web.Response:
            return self.json({"method": "get", "tables": sorted(self.app.tables)})

        async def post(self, request: web.Request) -> web.Response:
            return self.json({"method": "post", "body": await request.json()}, status=201)

    with pytest.raises(agentstream.TopologyError):
        app.page("no-slash")

    async with AppHarness(app) as h:
        await h.send("src", 5, key="k")
        await h.wait_idle()
        status, body, _ = await get(url(h, "/hello/ada"))
        assert (status, body) == (200, {"hello": "ada", "app": app.id})
        status, body, _ = await get(url(h, "/plain"))
        assert (status, body) == (200, {"converted": True})
        status, body, _ = await get(url(h, "/echo"))
        assert body == {"method": "get", "tables": ["counts"]}
        async with aiohttp.ClientSession() as s:
            async with s.post(url(h, "/echo"), json={"x": 1}) as r:
                assert r.status == 201 and await r.json() == {"method": "post", "body": {"x": 1}}
            async with s.delete(url(h, "/echo")) as r:
                assert r.status == 405 and r.headers["Allow"] == "GET, POST"
        status, body, _ = await get(url(h, "/boom"))
        assert status == 500 and "RuntimeError: handler bug" in body["error"] and body["hint"]
        # the worker and its server are unharmed
        assert h.worker.crashed is None
        status, body, _ = await get(url(h, '/tables/counts/"k"'))
        assert (status, body["value"]) == (200, 5)


async def test_app_pages_take_built_in_paths_which_stay_under_the_builtin_prefix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 44: Faust apps serve their own ``/`` and ``/status``; the app's page wins there, the
    built-in stays at ``/agentstream/<path>``, and the worker logs once which built-in it shadows."""
    app = agentstream.App(f"pages-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)

    @app.page("/")
    async def home(web_: Any, request: web.Request) -> Any:
        return web_.html("<h1>mine</h1>")

    @app.page("/status/")
    async def status(web_: Any, request: web.Request) -> Any:
        return {"mine": True}

    @app.page("/metrics")
    async def metrics(web_: Any, request: web.Request) -> Any:
        return {"metrics": "mine"}

    @app.page("/tables/mine")
    async def under_tables(web_: Any, request: web.Request) -> Any:
        return {"tables": "mine"}

    with caplog.at_level("INFO", logger="agentstream.web"):
        async with AppHarness(app) as h:
            assert (await get(url(h, "/")))[:2] == (200, "<h1>mine</h1>")
            assert (await get(url(h, "/status/")))[:2] == (200, {"mine": True})
            assert (await get(url(h, "/status")))[0] == 404  # taken by /status/ (as Faust: no such route)
            assert (await get(url(h, "/metrics")))[:2] == (200, {"metrics": "mine"})
            assert (await get(url(h, "/tables/mine")))[:2] == (200, {"tables": "mine"})
            assert (await get(url(h, "/tables")))[0] == 200  # the built-in table list is not taken
            status, body, _ = await get(url(h, "/agentstream/status"))
            assert status == 200 and body["app"] == app.id
            status, body, headers = await get(url(h, "/agentstream/metrics"))
            assert status == 200 and headers["Content-Type"].startswith("text/plain")
            status, body, _ = await get(url(h, "/agentstream/"))
            assert status == 200 and {"/agentstream/status", "/agentstream/metrics", "/status.html"} <= set(
                body["endpoints"]
            )
            status, page, _ = await get(url(h, "/agentstream/status.html"))
            assert status == 200 and 'fetch("/agentstream/status?history=1"' in page
            status, page, _ = await get(url(h, "/status.html"))  # not taken: still at its path
            assert status == 200 and 'fetch("/agentstream/status?history=1"' in page
            assert (await get(url(h, "/livez")))[0] == 200
    assert any(
        "app page '/tables/mine' is served before the built-in table endpoints" in r.getMessage()
        for r in caplog.records
    )
    shadowing = [r.getMessage() for r in caplog.records if "takes the path of the built-in" in r.getMessage()]
    assert sorted(shadowing) == [
        "app page '/' takes the path of the built-in / endpoint; the built-in stays at /agentstream/",
        "app page '/metrics' takes the path of the built-in /metrics endpoint; the built-in stays at "
        "/agentstream/metrics",
        "app page '/status/' takes the path of the built-in /status endpoint; the built-in stays at "
        "/agentstream/status",
    ]


@pytest.mark.parametrize("path", ["/livez", "/readyz/", "/agentstream/status"])
async def test_a_page_at_a_probe_or_under_the_builtin_prefix_is_refused(path: str) -> None:
    app = agentstream.App(f"clash-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)

    @app.page(path)
    async def mine(web_: Any, request: web.Request) -> Any:
        return {}

    with pytest.raises(ConfigError, match="collides"):
        async with AppHarness(app):
            pass


async def test_without_web_no_server_is_started() -> None:
    from apps.wordcount import app

    async with AppHarness(app, web_enabled=False) as h:
        assert h.web is None
        assert h.worker.assignor.host.endswith(":0")  # what settings said; nothing listens


async def test_a_taken_explicit_port_fails_with_a_config_error() -> None:
    from agentstream.worker.worker import Worker

    app = agentstream.App(
        f"taken-{uuid.uuid4().hex[:6]}", broker=f"memory://taken-{uuid.uuid4().hex[:6]}", topic_partitions=1
    )
    app.topic("src")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        worker = Worker(app, web_port=port)
        with pytest.raises(ConfigError, match="cannot listen") as info:
            await run_worker(worker)  # the runner the CLI and faust.Worker use
        assert info.value.setting == "web_port"
        assert worker.consumer is None  # bound before joining: a failed bind never joins the group
        assert worker.state.value == "dead"


async def test_the_web_server_starts_after_the_producer_and_before_tables_and_the_group() -> None:
    """Start order producer -> web -> tables -> consumer; stop in reverse (the web server stops
    after the consumer left the group and the tables closed, before the producer)."""
    from agentstream.web import serve
    from agentstream.worker.worker import Worker

    app = agentstream.App(
        f"order-{uuid.uuid4().hex[:6]}",
        broker=f"memory://order-{uuid.uuid4().hex[:6]}",
        topic_partitions=1,
        web_port=0,
        store="memory://",
    )
    src = app.topic("src")
    app.Table("t")

    @app.agent(src)
    async def read(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    worker = Worker(app)
    web_ = serve(worker)
    assert web_ is not None
    seen: list[str] = []

    def spy(obj: Any, name: str, label: str) -> None:
        original = getattr(obj, name)

        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            seen.append(label)
            return await original(*args, **kwargs)

        setattr(obj, name, wrapped)

    spy(app, "start_producer", "producer")
    spy(app, "stop_clients", "producer stop")
    spy(web_, "start", "web")
    spy(web_, "stop", "web stop")
    original_consumer = app.transport.consumer

    def consumer(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("group_id"):  # the group's consumer (restore consumers join no group)
            seen.append("consumer")
            assert worker.assignor.host == web_.address  # the group learns the bound address
        return original_consumer(*args, **kwargs)

    app.transport.consumer = consumer  # type: ignore[method-assign]
    import agentstream.tables.manager as m

    class Manager(m.TableManager):
        async def start(self) -> None:
            seen.append("tables")
            await super().start()

        async def stop(self) -> None:
            seen.append("tables stop")
            await super().stop()

    saved, m.TableManager = m.TableManager, Manager
    try:
        await worker.start()
        await asyncio.wait_for(worker.assigned.wait(), 30)
        await worker.stop()
    finally:
        m.TableManager = saved
    assert seen == ["producer", "web", "tables", "consumer", "tables stop", "web stop", "producer stop"], seen


async def test_a_hand_built_worker_without_a_web_server_says_how_to_get_one(caplog: pytest.LogCaptureFixture) -> None:
    from agentstream.worker.worker import Worker

    app = agentstream.App(
        f"bare-{uuid.uuid4().hex[:6]}", broker=f"memory://bare-{uuid.uuid4().hex[:6]}", topic_partitions=1
    )
    app.topic("src")
    worker = Worker(app)
    try:
        await worker.start()
    finally:
        await worker.stop()
    assert any("run_worker" in r.getMessage() and "web_enabled=False" in r.getMessage() for r in caplog.records)


# -- windowed tables ---------------------------------------------------------------------------------


async def test_windowed_lookup_by_window() -> None:
    app = agentstream.App(f"win-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2)
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int, key_type=str).tumbling(10.0, expires=1000.0)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    async with AppHarness(app) as h:
        for ts in (1.0, 2.0, 11.0, 12.0, 13.0):
            await h.send("events", {}, key="k", timestamp=ts)
        await h.wait_idle()
        status, body, _ = await get(url(h, "/tables/counts/k?window=5"))
        assert (status, body["value"], body["window"]) == (200, 2, [0.0, 10.0])
        status, body, _ = await get(url(h, "/tables/counts/k?window=current"))  # stream time 13
        assert (status, body["value"], body["window"]) == (200, 3, [10.0, 20.0])
        status, body, _ = await get(url(h, "/tables/counts/k"))  # current is the default
        assert body["value"] == 3
        status, body, _ = await get(url(h, "/tables/counts/k?window=now"))  # no window of today
        assert status == 404
        for bad in ("yesterday", "-5", "nan", "inf"):
            status, body, _ = await get(url(h, f"/tables/counts/k?window={bad}"))
            assert status == 400 and "bad window" in body["error"], bad
        status, body, _ = await get(url(h, "/tables/counts"))
        assert sorted((i["key"], tuple(i["window"]), i["value"]) for i in body["items"]) == [
            ("k", (0.0, 10.0), 2),
            ("k", (10.0, 20.0), 3),
        ]
        assert body["total"] == 2
        status, body, _ = await get(url(h, "/tables"))
        assert body["tables"][0]["windowed"]["kind"] == "tumbling"


# -- key counts -------------------------------------------------------------------------------------


async def test_key_count_of_a_rocksdb_partition_is_rocksdbs_estimate_and_never_a_scan(tmp_path: Any) -> None:
    """The status page's key count costs nothing per record and never scans: RocksDB's estimate (it
    counts overwrites again until a compaction, as Kafka Streams' approximateNumEntries), with the
    partition's unflushed writes laid over it."""
    from agentstream.tables import query as web_tables
    from agentstream.tables.partition import TablePartition
    from agentstream.tables.store import store_for

    app = agentstream.App(f"count-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    table = app.Table("t", default=int)
    store = store_for("rocksdb://", tmp_path / "t0")
    part = TablePartition(table, 0, store, None, 100)
    part.activate()

    def no_scan(*_: Any, **__: Any) -> Any:
        raise AssertionError("the key count scanned the store")

    try:
        store.write_batch((f"k{i}".encode(), b"0") for i in range(50))
        store.items = no_scan  # type: ignore[method-assign]
        store.keys = no_scan  # type: ignore[method-assign]
        assert web_tables.key_count(part) == 50
        # Overwrites stay in the memtable (no flush), where no compaction merges them: the estimate
        # counts each copy (1000 for 20 rounds of the same 50 keys), deterministically.
        for round_ in range(1, 20):
            store.write_batch((f"k{i}".encode(), str(round_).encode()) for i in range(50))
        assert web_tables.key_count(part) == 1000
        part.set(b"new", 1)  # unwritten: in the cache only, counted
        part.set(b"k0", None)  # a delete in the cache, subtracted
        assert web_tables.key_count(part) == 1000
        part.set(b"new2", 1)
        assert web_tables.key_count(part) == 1001
    finally:
        store.close()
