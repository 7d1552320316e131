"""Issue 16 (Faust compatibility, round two): the API Faust's examples and user guide use, on the
in-memory broker (the same apps run on the real broker in tests/integration/test_faust_examples.py)."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import agentstream as faust
from agentstream.exceptions import TopologyError
from agentstream.testing import AppHarness
from tests.support.waiting import until_async


async def _until(cond: Any, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


# -- import-time API --------------------------------------------------------------------------------------------
def test_faust_module_layout_and_generic_stream() -> None:
    import agentstream.faust as ffaust
    from agentstream.faust.models.fields import IntegerField
    from agentstream.faust.sensors import Monitor, Sensor
    from agentstream.faust.types import AppT, EventT, StreamT
    from agentstream.faust.web import Request, Response, View

    assert ffaust.App is faust.App and ffaust.Record is faust.Record and ffaust.web.View is View
    assert StreamT[float] is faust.Stream and faust.Stream["Request"] is faust.Stream
    assert AppT is faust.App and EventT is faust.Event and issubclass(Monitor, Sensor)
    assert Request is not None and Response is not None
    assert len(faust.uuid()) == 36 and faust.uuid() != faust.uuid()

    class Point(faust.Record):
        x: int = IntegerField(default=3)

    assert Point().x == 3 and Point(x=4).x == 4


def test_signals_connect_as_decorator_and_receive_sender() -> None:
    app = faust.App("f-sig", broker="memory://")
    got: list[Any] = []

    @app.on_configured.connect
    def configured(sender: Any, conf: Any, **kwargs: Any) -> None:
        got.append(("configured", sender, conf.id))

    @app.on_produce_message.connect()
    def produced(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("a receiver that fails is logged, not fatal")

    app.on_configured.send(app, app.conf)
    app.on_produce_message.send(app, key=None)
    assert got == [("configured", app, "f-sig")]
    app.on_configured.disconnect(configured)
    app.on_configured.send(app, app.conf)
    assert len(got) == 1


def test_isolated_partitions_needs_concurrency_one() -> None:
    app = faust.App("f-iso", broker="memory://")

    @app.agent(app.topic("t"), isolated_partitions=True)
    async def ok(stream: faust.Stream) -> None:
        async for _ in stream:
            pass

    with pytest.raises(TopologyError, match="concurrency=1"):
        app.agent(app.topic("t2"), isolated_partitions=True, concurrency=2)


# -- a worker's signals, sensors, monitor -------------------------------------------------------------------------
async def test_worker_sends_signals_and_feeds_sensors() -> None:
    app = faust.App("f-signals", broker="memory://", topic_partitions=2)
    calls: list[str] = []
    assigned: list[Any] = []

    class Recorder(faust.Sensor):
        def on_commit_completed(self, consumer: Any, state: Any) -> None:
            calls.append("commit")

    app.sensors.add(Recorder())

    @app.on_worker_init.connect
    def init(sender: Any, **kwargs: Any) -> None:
        calls.append("worker_init")

    @app.on_partitions_assigned.connect
    async def on_assigned(sender: Any, tps: Any, **kwargs: Any) -> None:
        assigned.append(sorted(tp.partition for tp in tps))

    @app.on_rebalance_complete.connect
    async def complete(sender: Any, **kwargs: Any) -> None:
        calls.append("rebalance_complete")

    @app.agent(app.topic("numbers", value_type=int))
    async def numbers(stream: faust.Stream) -> None:
        async for event in stream.events():
            assert event.message.tp == event.tp  # Faust's event.message.tp
            assert stream.active_partitions == {event.tp}

    async with AppHarness(app) as h:
        assert not app.rebalancing and not app.should_stop
        for i in range(10):
            await h.send("numbers", i, key=str(i))
        await h.wait_idle()
        await _until(lambda: app.monitor.messages_received_total == 10 or True)
        await h.wait_idle()
    assert calls[0] == "worker_init" and "rebalance_complete" in calls and "commit" in calls
    assert assigned == [[0, 1]]
    assert app.should_stop is False  # no worker any more


async def test_monitor_counts_messages_by_topic() -> None:
    app = faust.App("f-monitor", broker="memory://", topic_partitions=2)
    monitor = app.monitor

    @app.agent(app.topic("a", value_type=int))
    async def a(stream: faust.Stream) -> None:
        async for value in stream:
            await out.send(value=value)

    out = app.topic("b", value_type=int)

    async with AppHarness(app) as h:
        for i in range(7):
            await h.send("a", i, key=str(i))
        await h.wait_idle()
    assert monitor.messages_received_total == 7
    assert monitor.messages_received_by_topic["a"] == 7
    assert monitor.commit_count >= 1 and monitor.asdict()["messages_received_total"] == 7


async def test_app_sleep_returns_early_when_the_worker_stops() -> None:
    app = faust.App("f-sleep", broker="memory://")
    woke: list[bool] = []

    @app.agent(app.topic("t"))
    async def idle(stream: faust.Stream) -> None:
        async for _ in stream:
            pass

    @app.task
    async def sleeper() -> None:
        await app.sleep(3600)
        woke.append(app.should_stop)

    async with AppHarness(app) as h:
        await asyncio.sleep(0.05)
        assert not app.should_stop
        h.worker.request_stop()  # what SIGTERM does: the sleeper wakes before the worker stops
        await _until(lambda: bool(woke))
    assert woke == [True]


# -- stream operators ---------------------------------------------------------------------------------------------
async def test_take_events_noack_enumerate() -> None:
    app = faust.App("f-ops", broker="memory://", topic_partitions=1)
    batches: list[list[int]] = []
    numbered: list[tuple[int, int]] = []

    @app.agent(app.topic("batch", value_type=int))
    async def batch(stream: faust.Stream) -> None:
        async for events in stream.take_events(3, within=0.2):
            batches.append([e.value for e in events])

    @app.agent(app.topic("count", value_type=int))
    async def count(stream: faust.Stream) -> None:
        async for i, value in stream.enumerate():
            numbered.append((i, value))

    async with AppHarness(app) as h:
        for i in range(7):
            await h.send("batch", i)
            await h.send("count", i * 10)
        await h.wait_idle()
    assert [v for b in batches for v in b] == list(range(7)) and all(len(b) <= 3 for b in batches)
    assert numbered == [(i, i * 10) for i in range(7)]


async def test_noack_commits_only_past_acknowledged_records() -> None:
    app = faust.App("f-noack", broker="memory://", topic_partitions=1)

    @app.agent(app.topic("t", value_type=int))
    async def agent(stream: faust.Stream) -> None:
        manual = stream.noack()
        async for event in manual.events():
            if event.value < 3:
                manual.ack(event)

    async with AppHarness(app) as h:
        for i in range(6):
            await h.send("t", i)
        consumer = h.worker.consumer
        tp = next(iter(h._source_partitions()))

        async def committed_3() -> bool:
            return await consumer.committed(tp) == 3

        await until_async(committed_3, "records 0..2 committed")  # however slow the machine ...
        with pytest.raises(TimeoutError):
            await h.wait_idle(timeout=1.0)  # ... records 3..5 are never acknowledged
        assert await consumer.committed(tp) == 3


async def test_tee_gives_every_copy_every_value() -> None:
    app = faust.App("f-tee", broker="memory://", topic_partitions=1)
    left: list[int] = []
    right: list[int] = []

    @app.agent(app.topic("t", value_type=int))
    async def teed(stream: faust.Stream) -> None:
        a, b = stream.tee(2)

        async def drain(s: faust.Stream, into: list[int]) -> None:
            async for v in s:
                into.append(v)

        await asyncio.gather(drain(a, left), drain(b, right))

    async with AppHarness(app) as h:
        for i in range(5):
            await h.send("t", i)
        await _until(lambda: len(left) == 5 and len(right) == 5)
        await h.wait_idle()
    assert left == right == list(range(5))


async def test_combine_merges_streams_and_acks_each() -> None:
    app = faust.App("f-combine", broker="memory://")
    a = app.channel(value_type=int)
    b = app.channel(value_type=int)
    merged: list[int] = []

    async def run() -> None:
        async for v in a.stream().combine(b.stream()):
            merged.append(v)

    task = asyncio.ensure_future(run())
    await a.send(value=1)
    await b.send(value=2)
    await a.send(value=3)
    await _until(lambda: len(merged) == 3)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert sorted(merged) == [1, 2, 3]


async def test_group_by_into_a_given_topic() -> None:
    app = faust.App("f-gbt", broker="memory://", topic_partitions=2)
    by_name = app.topic("by-name", key_type=str, value_type=dict, partitions=2)
    seen: list[tuple[Any, Any]] = []

    @app.agent(app.topic("people", value_type=dict))
    async def people(stream: faust.Stream) -> None:
        async for key, value in stream.group_by(lambda v: v["name"], topic=by_name).items():
            seen.append((key, value["n"]))

    async with AppHarness(app) as h:
        for i in range(4):
            await h.send("people", {"name": "ab"[i % 2], "n": i}, key=str(i))
        await _until(lambda: len(seen) == 4)
        assert len(h.read("by-name")) == 4
    assert sorted(seen, key=lambda kv: kv[1]) == [("a", 0), ("b", 1), ("a", 2), ("b", 3)]
    assert "f-gbt-by-name-repartition" not in app.topics  # the given topic is the repartition topic


# -- agents: map / kvmap / join -----------------------------------------------------------------------------------
async def test_agent_map_kvmap_join() -> None:
    app = faust.App("f-map", broker="memory://", topic_partitions=2)

    @app.agent(app.topic("square", value_type=int))
    async def square(stream: faust.Stream) -> Any:
        async for v in stream:
            yield v * v

    async with AppHarness(app):
        assert await square.join([1, 2, 3]) == [1, 4, 9]
        assert sorted([r async for r in square.map([4, 5])]) == [16, 25]
        assert sorted([r async for r in square.kvmap({"a": 6, "b": 7})]) == [36, 49]


# -- topics -------------------------------------------------------------------------------------------------------
async def test_several_names_and_pattern_topics() -> None:
    app = faust.App("f-pattern", broker="memory://", topic_partitions=1)
    both: list[int] = []
    matched: list[str] = []

    @app.agent(app.topic("n1", "n2", value_type=int))
    async def names(stream: faust.Stream) -> None:
        async for v in stream:
            both.append(v)

    @app.agent(app.topic(pattern=r"orders-\w+", value_type=int))
    async def orders(stream: faust.Stream) -> None:
        async for event in stream.events():
            matched.append(event.topic)

    with pytest.raises(TopologyError, match="several topics"):
        await app.topic("n1", "n2").send(value=1)
    # Topics that exist before the worker starts are matched (Faust resolves patterns at subscribe).
    from agentstream.testing import use_memory
    from agentstream.worker.worker import Worker

    use_memory(app, "pattern-broker")
    from agentstream.transport.base import TopicSpec

    await app.topic("other", partitions=1).maybe_declare()
    await app.transport.ensure_topics([TopicSpec("orders-eu", 1), TopicSpec("orders-us", 1)])
    worker = Worker(app)
    await worker.start()
    try:
        await asyncio.wait_for(worker.assigned.wait(), 30)
        for name, v in (("n1", 1), ("n2", 2), ("orders-eu", 3), ("orders-us", 4), ("other", 5)):
            await app.topic(name).send(value=v)
        await _until(lambda: len(both) == 2 and len(matched) == 2)
    finally:
        await worker.stop()
    assert sorted(both) == [1, 2] and sorted(matched) == ["orders-eu", "orders-us"]


# -- channel-only apps, existing partition counts -----------------------------------------------------------------
async def test_app_of_channel_agents_only_joins_no_group() -> None:
    app = faust.App("f-chan-only", broker="memory://")
    channel = app.channel(value_type=int)

    @app.agent(channel)
    async def double(stream: faust.Stream) -> Any:
        async for v in stream:
            yield v * 2

    async with AppHarness(app) as h:
        assert h.worker.consumer is None
        assert await double.ask(21) == 42
    assert h.worker.crashed is None


async def test_existing_source_topic_keeps_its_partition_count() -> None:
    app = faust.App("f-counts", broker="memory://", topic_partitions=4)
    seen: list[int] = []

    @app.agent(app.topic("src", value_type=int))
    async def agent(stream: faust.Stream) -> None:
        async for v in stream:
            seen.append(v)

    from agentstream.testing import use_memory

    saved = use_memory(app, "counts-broker")
    try:
        transport = app.transport
        from agentstream.transport.base import TopicSpec

        await transport.ensure_topics([TopicSpec("src", 2)])  # made by someone else, with 2 partitions
        from agentstream.worker.worker import Worker

        worker = Worker(app)
        await worker.start()
        try:
            await asyncio.wait_for(worker.assigned.wait(), 30)
            assert app.topics["src"].partitions == 2
            await app.topics["src"].send(value=1, key="k")
            await _until(lambda: seen == [1])
        finally:
            await worker.stop()
    finally:
        app.transport  # noqa: B018
        del saved


async def test_existing_topic_count_must_match_the_tables() -> None:
    app = faust.App("f-counts-t", broker="memory://", topic_partitions=4)
    counts = app.Table("counts", default=int)

    @app.agent(app.topic("src", value_type=int))
    async def agent(stream: faust.Stream) -> None:
        async for v in stream:
            counts[str(v)] += 1

    from agentstream.testing import use_memory
    from agentstream.transport.base import TopicSpec
    from agentstream.worker.worker import Worker

    use_memory(app, "counts-broker-t")
    await app.transport.ensure_topics([TopicSpec("src", 2)])
    worker = Worker(app)
    with pytest.raises(TopologyError, match=r"'src' exists with 2 partitions.*'counts' have 4.*partitions=2"):
        await worker.start()
    await worker.stop()


# -- autodiscover, tables, services --------------------------------------------------------------------------------
async def test_autodiscover_imports_listed_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "discoverpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "agents.py").write_text(
        textwrap.dedent("""
        from tests.unit.faust.test_faust_round_two import DISCOVER_APP as app

        @app.agent(app.topic("discovered"))
        async def found(stream):
            async for _ in stream:
                pass
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    async with AppHarness(DISCOVER_APP) as h:
        assert "discoverpkg.sub.agents" in sys.modules
        assert list(DISCOVER_APP.agents) == ["found"]
        assert "discovered" in h.worker.topology.source_topics


DISCOVER_APP = faust.App("f-discover", broker="memory://", autodiscover=["discoverpkg"])


async def test_table_as_ansitable_and_service_log(caplog: pytest.LogCaptureFixture) -> None:
    app = faust.App("f-ansi", broker="memory://", topic_partitions=1)
    table = app.Table("t", default=int)

    @app.agent(app.topic("w", value_type=str))
    async def write(stream: faust.Stream) -> None:
        async for v in stream:
            table[v] += 1

    async with AppHarness(app) as h:
        for v in ("apple", "kiwi", "apple"):
            await h.send("w", v)
        await h.wait_idle()
        text = table.as_ansitable(title="Counts", sort=True)
    assert text.splitlines()[0] == "Counts"
    assert "| apple | 2 |" in text and "| kiwi  | 1 |" in text

    class Svc(faust.Service):
        pass

    import logging

    with caplog.at_level(logging.INFO):
        Svc().log.info("hello")
    assert any(r.getMessage() == "[Svc] hello" for r in caplog.records)


# -- CLI ------------------------------------------------------------------------------------------------------------
def test_cli_clean_versions_and_completion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentstream.cli import main

    app = faust.App("f-clean", broker="memory://", version=3, datadir=str(tmp_path))
    for d in ("f-clean-v1", "f-clean-v2", "f-clean-v3", "f-clean", "f-clean-data/v1", "f-clean-data/v3", "other-v1"):
        (tmp_path / d).mkdir(parents=True)
    assert main(["clean-versions"], app=app) == 0
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_dir())
    assert left == ["f-clean", "f-clean-data", "f-clean-data/v3", "f-clean-v3", "other-v1"]
    assert "removed" in capsys.readouterr().out
    assert main(["completion", "bash"], app=app) == 0
    assert "_AGENTSTREAM_COMPLETE" in capsys.readouterr().out


async def test_channel_as_an_agent_sink() -> None:
    """Faust's bound_agent example: ``sink=[channel]`` passes each yielded value to the channel."""
    app = faust.App("f-chan-sink", broker="memory://")
    first = app.channel(value_type=int)
    second = app.channel(value_type=int)
    got: list[int] = []

    @app.agent(first, sink=[second])
    async def stage1(stream: faust.Stream) -> Any:
        async for v in stream:
            yield v + 1

    @app.agent(second)
    async def stage2(stream: faust.Stream) -> None:
        async for v in stream:
            got.append(v)

    async with AppHarness(app) as h:
        await first.send(value=1)
        await _until(lambda: got == [2])
        assert h.worker.crashed is None


def test_record_field_with_none_default_accepts_none() -> None:
    """Faust's examples declare ``date: datetime = None`` and send records without a date."""
    from datetime import datetime

    class Withdrawal(faust.Record):
        user: str
        date: datetime = None  # type: ignore[assignment]

    assert Withdrawal.loads(b'{"user": "a", "date": null}').date is None
    assert Withdrawal.loads(b'{"user": "a", "date": "2020-01-01T00:00:00"}').date == datetime(2020, 1, 1)


async def test_sends_fire_on_produce_message_and_the_monitor() -> None:
    app = faust.App("f-produce", broker="memory://", topic_partitions=1)
    produced: list[tuple[Any, Any]] = []

    @app.on_produce_message.connect
    def on_produce(sender: Any, key: Any = None, value: Any = None, **kwargs: Any) -> None:
        produced.append((key, value))

    out = app.topic("out", value_type=int)

    @app.agent(app.topic("in", value_type=int))
    async def copy(stream: faust.Stream) -> None:
        async for v in stream:
            await out.send(key="k", value=v)

    monitor = app.monitor
    async with AppHarness(app) as h:
        await h.send("in", 5)
        await h.wait_idle()
    assert (b"k", b"5") in produced
    assert monitor.messages_sent_by_topic["out"] == 1


async def test_topic_route_serves_the_keys_partition_owner() -> None:
    import aiohttp

    app = faust.App("f-troute", broker="memory://", topic_partitions=2)
    orders = app.topic("orders", value_type=int)

    @app.agent(orders)
    async def handle(stream: faust.Stream) -> None:
        async for _ in stream:
            pass

    @app.page("/orders/{user}/")
    @app.topic_route(orders, match_info="user")
    async def view(web: Any, request: Any, user: str) -> Any:
        return web.json({"user": user})

    async with AppHarness(app) as h:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{h.web.address}/orders/ann/") as resp:
                assert resp.status == 200
                assert await resp.json() == {"user": "ann"}
