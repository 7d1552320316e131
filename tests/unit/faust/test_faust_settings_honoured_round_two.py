"""More Faust settings agentstream used to refuse and now honours (issue 40, item 7): each test
shows the setting's effect (or, for a value agentstream cannot do, the refusal naming it)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.cache import MemoryCacheBackend
from agentstream.testing import AppHarness


def _app(name: str, **options: Any) -> agentstream.App:
    return agentstream.App(f"{name}-{uuid.uuid4().hex[:6]}", store="memory://", web_enabled=False, **options)


async def _until(check: Any, rounds: int = 500) -> None:
    for _ in range(rounds):
        if check():
            return
        await asyncio.sleep(0.01)


def test_id_format_is_read_back_and_names_the_app_as_faust_does() -> None:
    """faust-streaming 0.15 formats the id given to App() before it reads id_format (checked:
    ``faust.App('x', version=3, id_format='{id}.ver{self.version}').conf.id == 'x-v3'``), so a Faust
    app taken over keeps its group and topic names: the same here, and the setting reads back."""
    app = agentstream.App("shop", version=3, id_format="{id}.ver{self.version}")
    assert app.conf.id == "shop-v3" and app.settings.id == "shop-v3"
    assert app.conf.id_format == "{id}.ver{self.version}"
    assert agentstream.App("shop", version=3).conf.id_format == "{id}-v{self.version}"  # Faust's default


async def test_agent_supervisor_crashing_supervisor_stops_the_worker_on_an_agent_error() -> None:
    app = _app("crashing", topic_partitions=1, agent_supervisor="mode.CrashingSupervisor")
    assert app.settings.on_agent_error == "stop"

    @app.agent(app.topic("src", value_type=int))
    async def boom(stream: Any) -> None:
        async for value in stream:
            if value == 1:
                raise RuntimeError("boom")

    async with AppHarness(app) as h:
        await h.send("src", 0)
        await h.send("src", 1)
        await _until(lambda: h.worker.crashed is not None)
        assert h.worker.crashed is not None
    # OneForOne (the default) restarts the instance: the policy's skip, the worker goes on
    assert _app("one-for-one", agent_supervisor="mode.OneForOneSupervisor").settings.on_agent_error == "skip"


def test_agent_supervisors_agentstream_cannot_do_are_refused_naming_why() -> None:
    for value in ("mode.OneForAllSupervisor", "mode.supervisors:ForfeitOneForOneSupervisor"):
        with pytest.raises(agentstream.ConfigError, match="never restarts all instances") as err:
            _app("one-for-all", agent_supervisor=value)
        assert err.value.setting == "agent_supervisor"


async def test_table_key_index_size_bounds_the_key_partition_cache() -> None:
    app = _app("key-index", topic_partitions=4, table_key_index_size=3)
    counts = app.Table("counts", default=int)

    @app.agent(app.topic("words", key_type=str, value_type=str))
    async def count(stream: Any) -> None:
        async for word in stream:
            counts[word] += 1

    words = [f"w{i}" for i in range(10)]
    async with AppHarness(app) as h:
        for word in words * 2:
            await h.send("words", word, key=word)
            await h.wait_idle()
            assert len(counts._homes) <= 3  # Faust's "key -> partition" cache, at most this many keys
        assert h.table("counts") == {w: 2 for w in words}
    assert len(_app("key-index-default").Table("t")._homes) == 0
    with pytest.raises(agentstream.ConfigError):
        _app("key-index-bad", table_key_index_size=0)


def test_cache_names_the_backend_of_app_cache() -> None:
    app = _app("cache", cache="memory://")
    assert isinstance(app.cache, MemoryCacheBackend)
    with pytest.raises(agentstream.ConfigError) as err:
        _app("cache-memcached", cache="memcached://localhost")
    assert err.value.setting == "cache" and "memcached" in str(err.value)


def test_cache_redis_is_the_redis_backend_or_names_the_package() -> None:
    try:
        import redis  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        with pytest.raises(agentstream.ConfigError, match="pip install redis") as err:
            _app("cache-redis", cache="redis://localhost:6379/0")
        assert err.value.setting == "cache"
        return
    app = _app("cache-redis", cache="redis://localhost:6379/0")
    assert app.cache.url == "redis://localhost:6379/0"  # type: ignore[attr-defined]


async def _get(url: str) -> tuple[int, str, str]:
    import aiohttp

    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, r.content_type, await r.text()


def _counting_app(name: str, **options: Any) -> agentstream.App:
    app = agentstream.App(f"{name}-{uuid.uuid4().hex[:6]}", store="memory://", topic_partitions=2, **options)
    out = app.topic("out", value_type=str)

    @app.agent(app.topic("src", value_type=str), sink=[out])
    async def upper(stream: Any) -> Any:
        async for value in stream:
            yield value.upper()

    return app


async def test_web_metrics_enabled_serves_fausts_performance_page() -> None:
    import json

    async with AppHarness(_counting_app("perf", web_metrics_enabled=True)) as h:
        for v in ("a", "b", "c"):
            await h.send("src", v)
        await h.wait_idle()
        status, kind, body = await _get(f"{h.web.url}/performance/")
        assert (status, kind) == (200, "application/json")
        got = json.loads(body)
        assert set(got) == {"app", "throughput", "latency", "consumer", "tables", "errors", "topic_buffer_full"}
        assert got["throughput"]["messages_received_total"] == 3
        assert got["throughput"]["messages_sent"] >= 3  # the agent's (and the test's, through the app)
        read = got["consumer"]["read_offsets"]["src"]
        assert sorted(read) == ["0", "1"] and got["consumer"]["committed_offsets"]["src"]
    async with AppHarness(_counting_app("no-perf")) as h:  # Faust's default: no such page
        assert (await _get(f"{h.web.url}/performance/"))[0] == 404


async def test_web_graph_enabled_serves_the_topology_as_a_graph() -> None:
    async with AppHarness(_counting_app("graph", web_graph_enabled=True)) as h:
        status, kind, body = await _get(f"{h.web.url}/graph/")
        assert (status, kind) == (200, "text/vnd.graphviz")
        assert body.startswith("digraph") and '"src" -> "upper (stage 0)"' in body
    async with AppHarness(_counting_app("graph-debug", debug=True)) as h:  # not given: follows debug
        assert (await _get(f"{h.web.url}/graph/"))[0] == 200
    async with AppHarness(_counting_app("no-graph")) as h:
        assert (await _get(f"{h.web.url}/graph/"))[0] == 404


async def test_stream_publish_on_commit_holds_an_agents_sends_until_the_commit() -> None:
    async def run(**options: Any) -> tuple[list[Any], list[Any]]:
        app = _app("publish-on-commit", topic_partitions=1, **options)
        out = app.topic("out", value_type=str)
        handled: list[str] = []

        @app.agent(app.topic("src", value_type=str))
        async def forward(stream: Any) -> None:
            async for value in stream:
                await out.send(value=value.upper())
                handled.append(value)

        async with AppHarness(app, commit_interval=3600.0) as h:
            await h.send("src", "a")
            await h.send("src", "b")
            await _until(lambda: handled == ["a", "b"])
            before = [v for _, v in h.read("out")]
            await h.worker.commit()
            return before, [v for _, v in h.read("out")]

    assert await run(stream_publish_on_commit=True) == ([], ["A", "B"])  # visible once the commit comes
    assert await run() == (["A", "B"], ["A", "B"])  # Faust's default: sent at once


async def test_producer_partitioner_places_records_sent_without_a_partition() -> None:
    calls: list[tuple[Any, list[int]]] = []

    def last(key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        calls.append((key, all_partitions))
        return all_partitions[-1]

    app = _app("partitioner", topic_partitions=3, producer_partitioner=last)
    out = app.topic("out", key_type=str, value_type=str)

    @app.agent(app.topic("src", key_type=str, value_type=str))
    async def forward(stream: Any) -> None:
        async for event in stream.events():
            await out.send(key=event.key, value=event.value)
            await out.send(key=event.key, value="pinned", partition=0)  # an explicit partition is kept

    async with AppHarness(app) as h:
        for k in ("a", "b", "c", "d"):
            await h.send("src", k, key=k, partition=1)
        await h.wait_idle()
        placed = [(m.value, m.partition) for m in h.transport.read_topic("out")]
    assert sorted(p for v, p in placed if v != b'"pinned"') == [2, 2, 2, 2]
    assert [p for v, p in placed if v == b'"pinned"'] == [0, 0, 0, 0]
    assert (b"a", [0, 1, 2]) in calls
    with pytest.raises(agentstream.ConfigError) as err:
        _app("partitioner-bad", producer_partitioner="murmur2")
    assert err.value.setting == "producer_partitioner"


@pytest.mark.filterwarnings("ignore:Inheritance class Session from ClientSession")
async def test_http_client_names_the_class_of_app_http_client() -> None:
    import aiohttp

    class Session(aiohttp.ClientSession):
        pass

    app = _app("http-client", HttpClient=Session)
    client = app.http_client
    assert type(client) is Session and app.http_client is client  # made once
    await app.stop_clients()
    assert client.closed
    default = _app("http-client-default")
    assert type(default.http_client) is aiohttp.ClientSession
    await default.stop_clients()
    with pytest.raises(agentstream.ConfigError) as err:
        _app("http-client-bad", HttpClient=dict)
    assert err.value.setting == "HttpClient"


async def test_broker_producer_sends_to_its_own_cluster_and_broker_consumer_is_the_groups() -> None:
    from agentstream.transport.memory import MemoryTransport

    elsewhere = f"memory://producer-side-{uuid.uuid4().hex[:6]}"
    app = _app("split-brokers", topic_partitions=1, broker_producer=elsewhere)
    out = app.topic("out", value_type=str)

    @app.agent(app.topic("src", value_type=str))
    async def forward(stream: Any) -> None:
        async for value in stream:
            await out.send(value=value.upper())

    async with AppHarness(app) as h:  # the harness's broker is the consumers' (broker=)
        feeder = h.transport.producer()
        await feeder.start()
        await feeder.send("src", None, b'"a"')
        await feeder.flush()
        producer_side = MemoryTransport(elsewhere)
        await _until(lambda: "out" in producer_side.broker.topics and bool(producer_side.read_topic("out")))
        assert [m.value for m in producer_side.read_topic("out")] == [b'"A"']
        assert h.read("out") == []  # nothing on the consumers' cluster
        await feeder.stop()
    consumer_side = _app("split-consumer", broker_consumer="memory://consumers", broker="memory://other")
    assert consumer_side.settings.broker == "memory://consumers"
    assert consumer_side.settings.extra["broker_producer"] == "memory://other"  # Faust: broker_producer is broker
    with pytest.raises(agentstream.ConfigError) as err:
        _app("split-eos", broker_producer=elsewhere, processing_guarantee="exactly_once")
    assert err.value.setting == "broker_producer"


async def test_web_transport_unix_serves_on_that_socket(tmp_path: Any) -> None:
    import aiohttp

    path = tmp_path / "web.sock"
    async with AppHarness(_counting_app("unix-web", web_transport=f"unix://{path}")) as h:
        assert path.exists()
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as s:
            async with s.get("http://localhost/livez") as r:
                assert r.status == 200
            async with s.get("http://localhost/tables") as r:
                assert r.status == 200 and "tables" in await r.json()
        assert h.web is not None
    with pytest.raises(agentstream.ConfigError) as err:
        _app("unix-bad", web_transport="udp://x")
    assert err.value.setting == "web_transport"
