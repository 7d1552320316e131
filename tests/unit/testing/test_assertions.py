"""The harness's readings (issue 32): what agents yielded, what went to each topic (keys, values,
timestamps, partitions, offsets, headers), tables and windowed tables, dead letters, sensor counts."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import agentstream
from agentstream.clock import VIRTUAL_EPOCH
from agentstream.testing import AppHarness, DeadLetter, SentRecord, Yielded
from agentstream.transport.partitioner import default_partition

pytestmark = pytest.mark.asyncio

T0 = VIRTUAL_EPOCH


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _shop(**settings: Any) -> tuple[agentstream.App, agentstream.Agent]:
    app = agentstream.App(_name("shop"), broker="memory://", topic_partitions=3, **settings)
    orders = app.topic("orders", key_type=str, value_type=int)
    receipts = app.topic("receipts", key_type=str, value_type=str)
    totals = app.Table("totals", default=int)

    @app.agent(orders)
    async def book(stream: Any) -> Any:
        async for event in stream.events():
            if event.value < 0:
                raise ValueError(f"negative amount {event.value}")
            totals[event.key] += event.value
            await receipts.send(key=event.key, value=f"booked {event.value}", headers=[("via", b"book")])
            yield event.value * 2

    return app, book


async def test_yielded_values_and_the_records_they_came_from() -> None:
    app, book = _shop()
    async with AppHarness(app, virtual_time=True) as h:
        await h.send("orders", 5, key="ann", timestamp=T0 + 1)
        await h.send("orders", 7, key="bob", timestamp=T0 + 2)
        assert h.yielded("book") == [10, 14]
        assert h.yielded(book) == [10, 14]
        first = h.yields("book")[0]
        assert first == Yielded("book", 10, "ann", "orders", default_partition(b"ann", 3), 0, T0 + 1)
        with pytest.raises(KeyError, match="no agent 'nope'"):
            h.yielded("nope")
    assert h.yielded("book") == [10, 14]  # still readable after the run
    assert book.sinks == []  # the agent has its own sinks back


async def test_sent_records_carry_key_value_timestamp_partition_offset_and_headers() -> None:
    app, _ = _shop()
    async with AppHarness(app, virtual_time=True) as h:
        await h.send("orders", 5, key="ann", timestamp=T0 + 30)
        await h.send("orders", 6, key="ann", timestamp=T0 + 40)
        await h.send("orders", 7, key="bob")  # no timestamp: the app's now
        ann, bob = default_partition(b"ann", 3), default_partition(b"bob", 3)
        assert h.sent("receipts") == [
            SentRecord("receipts", ann, 0, "ann", "booked 5", T0 + 30, (("via", b"book"),)),
            SentRecord("receipts", ann, 1, "ann", "booked 6", T0 + 40, (("via", b"book"),)),
            SentRecord("receipts", bob, 0 if bob != ann else 2, "bob", "booked 7", T0, (("via", b"book"),)),
        ]
        assert h.sent("receipts")[0].header("via") == b"book" and h.sent("receipts")[0].header("x") is None
        # every topic, in append order: each order is followed by its receipt
        assert [(r.topic, r.value) for r in h.sent() if r.topic in ("orders", "receipts")] == [
            ("orders", 5),
            ("receipts", "booked 5"),
            ("orders", 6),
            ("receipts", "booked 6"),
            ("orders", 7),
            ("receipts", "booked 7"),
        ]
        changelog = app.tables["totals"].changelog_topic.name
        assert {(r.key, r.value) for r in h.sent(changelog)} >= {("ann", 11), ("bob", 7)}
        with pytest.raises(KeyError, match="no topic 'nope'"):
            h.sent("nope")


async def test_sent_committed_leaves_out_aborted_transactions() -> None:
    app, _ = _shop()
    async with AppHarness(app, virtual_time=True) as h:
        await h.send("receipts", "kept", key="a")
        producer = h.transport.producer(transactional_id="t1")
        await producer.start()
        await producer.begin_transaction()
        await producer.send("receipts", b'"a"', b'"aborted"', partition=0)
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.send("receipts", b'"a"', b'"open"', partition=0)
        assert [r.value for r in h.sent("receipts")] == ["kept", "aborted", "open"]
        assert [r.value for r in h.sent("receipts", committed=True)] == ["kept"]
        await producer.abort_transaction()


async def test_plain_and_windowed_table_contents() -> None:
    app = agentstream.App(_name("views"), broker="memory://", topic_partitions=1)
    views = app.topic("views", key_type=str, value_type=int)
    per_page = app.Table("per_page", default=int)
    windowed = app.Table("per_minute", default=int).tumbling(60, expires=600, grace=5)

    @app.agent(views)
    async def count(stream: Any) -> None:
        async for event in stream.events():
            per_page[event.key] += event.value
            windowed[event.key] += event.value

    async with AppHarness(app, virtual_time=True) as h:
        for offset, n in [(10, 1), (50, 2), (70, 4), (130, 8)]:
            await h.send("views", n, key="home", timestamp=T0 + offset)
        await h.send("views", 16, key="home", timestamp=T0 + 20)  # window [0, 60) closed at 60 + grace 5
        plain = h.table("per_page")
        assert plain == {"home": 31} and not plain.windowed
        with pytest.raises(TypeError, match="not windowed"):
            plain.windows("home")
        wt = h.table("per_minute")
        assert wt.windowed and wt.late_dropped == 1
        assert wt.windows("home") == {(T0, T0 + 60): 3, (T0 + 60, T0 + 120): 4, (T0 + 120, T0 + 180): 8}
        assert wt.window("home", at=T0 + 75) == 4
        assert wt.window("home", at=(T0 + 120, T0 + 180)) == 8
        assert wt.window("home", at=T0 + 300) == 0  # no window there: the table's default
        assert wt.stream_time("home") == T0 + 130
        assert wt == {("home", w): v for w, v in wt.windows("home").items()}  # still a dict
        with pytest.raises(KeyError, match="no table"):
            h.table("nope")


async def test_dead_letters_say_where_from_and_why() -> None:
    app, _ = _shop(on_agent_error="dead-letter", on_decode_error="dead-letter")
    async with AppHarness(app, virtual_time=True) as h:
        await h.send("orders", 5, key="ann", timestamp=T0 + 1)
        await h.send("orders", -1, key="ann", timestamp=T0 + 2, headers=[("trace", b"t-1")])
        p = default_partition(b"ann", 3)
        raw = h.transport.producer()
        await raw.start()
        await raw.send("orders", b"ann", b"not json", partition=p, timestamp_ms=int((T0 + 3) * 1000))
        await h.settle()
        assert h.dead_letters() == [
            DeadLetter(
                b"ann", b"-1", "ValueError: negative amount -1", "agent", "orders", p, 1, T0 + 2, (("trace", b"t-1"),)
            ),
            DeadLetter(b"ann", b"not json", h.dead_letters()[1].error, "decode", "orders", p, 2, T0 + 3),
        ]
        assert h.dead_letters()[0].error_type == "ValueError"
        assert h.yielded("book") == [10]  # the good record only


async def test_monitor_counts_what_the_run_received_and_sent() -> None:
    app, _ = _shop()
    async with AppHarness(app, virtual_time=True) as h:
        monitor = h.monitor  # counting starts here
        for i in range(4):
            await h.send("orders", i, key=f"c{i}")
        assert monitor.messages_received_by_topic["orders"] == 4
        assert monitor.messages_sent_by_topic["receipts"] == 4
        assert h.monitor is monitor
    assert monitor not in list(app.sensors)  # the app gets its own sensors back


async def test_late_dropped_counts_this_run_only() -> None:
    app = agentstream.App(_name("late"), broker="memory://", topic_partitions=1)
    views = app.topic("views", key_type=str, value_type=int)
    windowed = app.Table("per_minute", default=int).tumbling(60)

    @app.agent(views)
    async def count(stream: Any) -> None:
        async for event in stream.events():
            windowed[event.key] += event.value

    for _ in range(2):  # the same app, run twice: the counter lives on the declaration
        async with AppHarness(app, virtual_time=True) as h:
            await h.send("views", 1, key="k", timestamp=T0 + 120)
            await h.send("views", 1, key="k", timestamp=T0 + 10)  # late
            assert h.table("per_minute").late_dropped == 1
    assert windowed.late_dropped == 2
