"""Where table reads and writes go (issue 14): the key's own partition; a writer whose stream is
not partitioned by the table key (or encodes the key differently) is told once, by name, with the
fix; a key held by another worker is refused with a clear error, never a silent default."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.tables.table import TableNotReady
from agentstream.testing import AppHarness
from agentstream.transport.partitioner import default_partition
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio


def _split_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "while handling partition" in r.getMessage()]


async def test_a_keyless_writer_on_one_worker_gets_one_value_per_key_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = agentstream.App(f"route-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=4)
    ticks = app.topic("ticks", value_type=int)
    stats = app.Table("stats", default=int)

    @app.agent(ticks)
    async def tally(stream: agentstream.Stream) -> None:
        async for value in stream:
            stats["events"] += value

    caplog.set_level(logging.WARNING, "agentstream.tables.table")
    async with AppHarness(app) as h:
        for p in range(4):
            for _ in range(3):
                await h.send("ticks", 1, partition=p)
        await h.wait_idle()
        assert h.table("stats") == {"events": 12}
    warnings = _split_warnings(caplog)
    assert len(warnings) == 1, warnings  # once per writer, not per record
    assert "'tally'" in warnings[0] and "'stats'" in warnings[0] and "group_by" in warnings[0]
    assert "one value per key" in warnings[0]


async def test_a_stream_key_encoded_unlike_the_table_key_is_named_with_the_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = agentstream.App(f"enc-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=8)
    events = app.topic("events", key_type=str, key_serializer="json")  # b'"alice"' on the wire
    counts = app.Table("counts", default=int)  # Faust's raw keys: b"alice"

    @app.agent(events)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            counts[event.key] += 1

    keys = [
        k
        for k in (f"u{i}" for i in range(50))
        if default_partition(f'"{k}"'.encode(), 8) != default_partition(k.encode(), 8)
    ][:5]
    caplog.set_level(logging.WARNING, "agentstream.tables.table")
    async with AppHarness(app) as h:
        for k in keys:
            await h.send("events", None, key=k)
        await h.wait_idle()
        assert h.table("counts") == {k: 1 for k in keys}
        assert all(counts[k] == 1 for k in keys)
    (warning,) = _split_warnings(caplog)
    assert "'count'" in warning and "'counts'" in warning
    assert "encoded" in warning and "key_serializer" in warning


async def test_across_workers_a_foreign_key_is_refused_outside_agents_and_the_split_is_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker, app_id = f"memory://two-{uuid.uuid4().hex[:8]}", f"two-{uuid.uuid4().hex[:6]}"

    def build() -> tuple[agentstream.App, Any]:
        app = agentstream.App(
            app_id,
            broker=broker,
            store="memory://",
            topic_partitions=2,
            commit_interval=0.05,
            web_enabled=False,
            max_warmup_replicas=0,  # the second worker takes its partition at once: the test is about the split
            table_standby_replicas=0,  # no standby copy: a foreign key has no partition here at all
        )
        ticks = app.topic("ticks", value_type=int)
        stats = app.Table("stats", default=int)

        @app.agent(ticks)
        async def tally(stream: agentstream.Stream) -> None:
            async for value in stream:
                stats["events"] += value

        return app, stats

    caplog.set_level(logging.WARNING, "agentstream.tables.table")
    app_a, stats_a = build()
    app_b, stats_b = build()
    wa, wb = Worker(app_a), Worker(app_b)
    await wa.start()
    await asyncio.wait_for(wa.assigned.wait(), 30)
    await wb.start()
    try:
        await app_a.transport.settle()
        await asyncio.wait_for(wa.assigned.wait(), 30)
        await asyncio.wait_for(wb.assigned.wait(), 30)
        home = default_partition(b"events", 2)
        owner, other = (stats_a, stats_b) if home in wa.assignor.assignment.active else (stats_b, stats_a)
        with pytest.raises(TableNotReady, match=f"partition {home}.*Fix"):
            other.get("events")  # never a silent default for a key held elsewhere
        with pytest.raises(TableNotReady):
            _ = "events" in other
        producer = app_a.transport.producer()
        await producer.start()
        for p in (0, 1):
            for _ in range(3):
                await producer.send("ticks", None, b"1", partition=p)
        await producer.flush()
        await producer.stop()
        for _ in range(500):
            if owner.get("events") == 3:
                break
            await asyncio.sleep(0.02)
        assert owner.get("events") == 3  # the owner's own records only: the state split ...
    finally:
        await wb.stop()
        await wa.stop()
    warnings = _split_warnings(caplog)  # ... and the worker whose records went elsewhere said so
    assert any("owned by another worker" in w and "'tally'" in w and "group_by" in w for w in warnings), warnings
