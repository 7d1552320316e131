"""Whole apps on the memory transport: wordcount, group_by routing, error policies, test_context."""

from __future__ import annotations

import collections
import logging
import re

import pytest

import agentstream
from agentstream.testing import AppHarness
from agentstream.transport.memory import MemoryTransport
from agentstream.transport.partitioner import default_partition
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio

TEXTS = ["Hello world hello", "the quick brown fox", "World of the fox!", "a b c a b a"]


def expected_counts(texts: list[str]) -> dict[str, int]:
    c: collections.Counter[str] = collections.Counter()
    for t in texts:
        c.update(w for w in re.split(r"\W+", t.lower()) if w)
    return dict(c)


def last_values(pairs: list[tuple[object, object]]) -> dict[object, object]:
    out: dict[object, object] = {}
    for k, v in pairs:
        out[k] = v
    return out


async def test_wordcount_counts_equal_direct_count() -> None:
    from apps.wordcount import app

    texts = TEXTS * 25
    async with AppHarness(app) as h:
        for t in texts:
            await h.send("sentences", {"text": t})
        await h.wait_idle()
        final = last_values(h.read("word-counts"))
        assert final == expected_counts(texts)
        assert h.table("word_counts") == expected_counts(texts)


async def test_group_by_routes_by_new_key_and_keeps_value() -> None:
    app = agentstream.App("gb-test", broker="memory://", topic_partitions=4)
    orders = app.topic("orders", value_type=dict)
    seen: list[tuple[int, str, dict[str, object]]] = []

    @app.agent(orders)
    async def by_customer(stream: agentstream.Stream) -> None:
        async for event in stream.group_by(lambda v: v["customer"], name="by_customer").events():
            seen.append((event.partition, event.key, event.value))

    async with AppHarness(app) as h:
        for i in range(40):
            await h.send("orders", {"customer": f"c{i % 7}", "n": i}, key=f"o{i}")
        await h.wait_idle()
    assert len(seen) == 40
    codec = app.topics["gb-test-by_customer-repartition"].key_codec
    for partition, key, value in seen:
        assert key == value["customer"]
        assert partition == default_partition(codec.dumps(key), 4)
    assert sorted(v["n"] for _, _, v in seen) == list(range(40))


async def test_group_by_through_a_topic_whose_key_codec_gives_a_bytearray() -> None:
    """A custom key codec may give a bytearray: the repartition record's key goes out as bytes
    (the compiled build checks types) and the stream reads the new key back."""

    class Codec:
        def dumps(self, obj: object) -> bytearray:
            return bytearray(str(obj).encode())

        def loads(self, data: bytes) -> str:
            return bytes(data).decode()

    app = agentstream.App("gb-bytearray", broker="memory://", topic_partitions=2)
    orders = app.topic("orders", value_type=dict)
    by_customer_topic = app.topic("by-customer", key_serializer=Codec(), value_type=dict, internal=True)
    seen: list[tuple[object, object]] = []

    @app.agent(orders)
    async def by_customer(stream: agentstream.Stream) -> None:
        async for event in stream.group_by(lambda v: v["customer"], topic=by_customer_topic).events():
            seen.append((event.key, event.value["n"]))

    async with AppHarness(app) as h:
        for i in range(6):
            await h.send("orders", {"customer": f"c{i % 3}", "n": i}, key=f"o{i}")
        await h.wait_idle()
    assert sorted(seen, key=lambda kv: kv[1]) == [(f"c{i % 3}", i) for i in range(6)]


async def test_sink_output_produced_before_next_record_is_taken() -> None:
    app = agentstream.App("df-test", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    out = app.topic("out", value_type=int)
    log: list[str] = []

    async def record_sink(value: int) -> None:
        log.append(f"sink {value}")

    @app.agent(src, sink=[out, record_sink])
    async def double(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            log.append(f"take {value}")
            yield value * 2

    async with AppHarness(app) as h:
        for i in range(5):
            await h.send("src", i)
        await h.wait_idle()
        assert [v for _, v in h.read("out")] == [0, 2, 4, 6, 8]
    assert log == [x for i in range(5) for x in (f"take {i}", f"sink {i * 2}")]


async def test_decode_error_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    app = agentstream.App("dec-test", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    got: list[int] = []

    @app.agent(src)
    async def take(stream: agentstream.Stream) -> None:
        async for value in stream:
            got.append(value)

    async with AppHarness(app) as h:
        producer = await app.start_producer()
        await producer.send("src", None, b"1")
        await producer.send("src", None, b"not json")
        await producer.send("src", None, b"3")
        with caplog.at_level(logging.ERROR):
            await h.wait_idle()
    assert got == [1, 3]
    assert "src[0]@1" in caplog.text and "cannot decode" in caplog.text


async def test_agent_error_dead_letter_policy() -> None:
    app = agentstream.App("dlq-test", broker="memory://", topic_partitions=1, on_agent_error="dead-letter")
    src = app.topic("src", value_type=int)
    got: list[int] = []

    @app.agent(src)
    async def fragile(stream: agentstream.Stream) -> None:
        async for value in stream:
            if value == 2:
                raise RuntimeError("two is bad")
            got.append(value)

    async with AppHarness(app) as h:
        for i in range(5):
            await h.send("src", i)
        await h.wait_idle()
        dead = MemoryTransport.read_topic(app.transport, "dlq-test-dead-letters")  # type: ignore[arg-type]
    assert got == [0, 1, 3, 4]
    assert [m.value for m in dead] == [b"2"]
    headers = dict(dead[0].headers)
    assert b"two is bad" in headers["agentstream-error"]
    assert headers["agentstream-source"] == b"src[0]@2"


async def test_agent_error_stop_policy_stops_without_committing() -> None:
    app = agentstream.App("stop-test", broker="memory://", topic_partitions=1, on_agent_error="stop")
    src = app.topic("src", value_type=int)

    @app.agent(src)
    async def fragile(stream: agentstream.Stream) -> None:
        async for value in stream:
            if value == 2:
                raise RuntimeError("two is bad")

    h = AppHarness(app)
    async with h:
        for i in range(5):
            await h.send("src", i)
        with pytest.raises(Exception, match="two is bad|policy is 'stop'"):
            await h.wait_idle()
        committed = await h.worker.consumer.committed(agentstream.transport.base.TP("src", 0))
        assert committed is None or committed <= 2


async def test_take_batches_and_acks_after_batch() -> None:
    app = agentstream.App("take-test", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    batches: list[list[int]] = []

    @app.agent(src)
    async def batcher(stream: agentstream.Stream) -> None:
        async for batch in stream.take(4, within=0.2):
            batches.append(batch)

    async with AppHarness(app) as h:
        for i in range(10):
            await h.send("src", i)
        await h.wait_idle()
    assert [x for b in batches for x in b] == list(range(10))
    assert batches[0] == [0, 1, 2, 3] and batches[1] == [4, 5, 6, 7]
    assert batches[2] == [8, 9]  # the last batch left early: `within` expired


async def test_agent_test_context_depth_first_and_results() -> None:
    app = agentstream.App("ctx-test", broker="memory://", topic_partitions=2)
    src = app.topic("src", value_type=int)
    out = app.topic("out", value_type=int)
    order: list[str] = []

    @app.agent(src)
    async def triple(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            order.append(f"got {value}")
            await out.send(value=value * 3)
            order.append(f"sent {value}")
            yield value * 3

    async with triple.test_context() as ctx:
        await ctx.put(1)
        assert order == ["got 1", "sent 1"]
        await ctx.put(2)
        assert ctx.results == [3, 6]
        assert [v for _, v in ctx.sent("out")] == [3, 6]


async def test_ask_gets_the_value_the_agent_yields() -> None:
    app = agentstream.App("ask-test", broker="memory://", topic_partitions=2)
    requests = app.topic("requests", value_type=int)

    @app.agent(requests)
    async def square(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            yield value * value

    async with AppHarness(app):
        assert await square.ask(7, key="k") == 49
        assert await square.ask(value=3) == 9


async def test_through_continues_from_the_new_topic_in_a_new_sub_topology() -> None:
    app = agentstream.App("through-test", broker="memory://", topic_partitions=2)
    src = app.topic("src", value_type=int)
    mid = app.topic("mid", value_type=int, partitions=3)
    got: list[tuple[str, int]] = []

    @app.agent(src)
    async def via_mid(stream: agentstream.Stream) -> None:
        async for event in stream.filter(lambda v: v % 2 == 0).through(mid).events():
            got.append((event.topic, event.value))

    async with AppHarness(app) as h:
        subs = h.worker.topology.subtopologies
        assert [(s.source_topics, s.stage) for s in subs] == [(["src"], 0), (["mid"], 1)]
        for i in range(10):
            await h.send("src", i, key=str(i))
        await h.wait_idle()
        assert sorted(v for _, v in h.read("mid")) == [0, 2, 4, 6, 8]
    assert sorted(got) == [("mid", v) for v in (0, 2, 4, 6, 8)]


async def test_timer_and_startup_task_run() -> None:

    app = agentstream.App("timer-test", broker="memory://", topic_partitions=1)
    ticks = app.topic("ticks", value_type=int)
    started: list[bool] = []
    got: list[int] = []

    @app.task
    async def on_start() -> None:
        started.append(True)

    @app.timer(0.05)
    async def produce() -> None:
        await ticks.send(value=len(got))

    @app.agent(ticks)
    async def consume(stream: agentstream.Stream) -> None:
        async for value in stream:
            got.append(value)

    async with AppHarness(app):
        await until(lambda: len(got) >= 3, "three timer records consumed")
    assert started == [True]
    assert len(got) >= 3


async def test_records_as_values_and_field_group_by() -> None:
    class Order(agentstream.Record):
        id: str
        customer: str
        amount: float

    app = agentstream.App("rec-test", broker="memory://", topic_partitions=3)
    orders = app.topic("orders", value_type=Order)
    totals = app.Table("totals", default=float)

    @app.agent(orders)
    async def total(stream: agentstream.Stream) -> None:
        async for order in stream.group_by(lambda o: o.customer, name="by_customer"):
            totals[order.customer] += order.amount

    async with AppHarness(app) as h:
        for i in range(30):
            await h.send("orders", Order(id=str(i), customer=f"c{i % 4}", amount=1.5), key=str(i))
        await h.wait_idle()
        assert h.table("totals") == {f"c{j}": 1.5 * len([i for i in range(30) if i % 4 == j]) for j in range(4)}
