"""Scaling out without a restore stall, in-process on the memory broker: a worker that joins a
stateful app first gets warm-up replicas while the caught-up worker keeps processing, and takes
its active partitions in a probing rebalance once its copies are caught up."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream.tables.query import live_entries
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio


def counting_app(app_id: str, broker: str, store: str = "memory://", **settings: Any) -> agentstream.App:
    app = agentstream.App(
        app_id,
        broker=broker,
        topic_partitions=2,
        store=store,
        commit_interval=0.05,
        web_enabled=False,
        probing_rebalance_interval=0.1,
        **settings,
    )
    ticks = app.topic("ticks", key_type=str, value_type=int)
    totals = app.Table("totals", default=int)

    @app.agent(ticks)
    async def tally(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            totals[event.key] += event.value

    return app


def _keys_held(*workers: Worker) -> int:
    """The keys of the partitions the workers serve, read back from their tables (status' count of a
    RocksDB store is RocksDB's estimate, which runs high by the overwrites not compacted yet)."""
    held = 0
    for w in workers:
        parts = w.app.tables["totals"].parts
        held += sum(1 for p in w.assignment.active if p in parts for _ in live_entries(parts[p]))
    return held


async def _until(check: Any, what: str, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_new_worker_warms_up_then_takes_its_share_in_a_probing_rebalance() -> None:
    broker, app_id = f"memory://warm-{uuid.uuid4().hex[:8]}", f"warm-{uuid.uuid4().hex[:6]}"
    app_a = counting_app(app_id, broker)
    wa, wb = Worker(app_a), None
    await wa.start()
    try:
        await asyncio.wait_for(wa.assigned.wait(), 30)
        producer = app_a.transport.producer()
        await producer.start()
        for i in range(400):  # 200 keys per partition: state a newcomer would have to restore
            await producer.send("ticks", f"k{i}".encode(), b"1", partition=i % 2)
        await producer.flush()

        async def a_counted(n: int = 400) -> bool:
            return dict((await wa.status()).agents)["tally"] == n

        await _until(a_counted, "worker a to count the first 400")
        app_b = counting_app(app_id, broker)
        wb = Worker(app_b)
        await wb.start()
        b = wb

        async def b_has_warmups() -> bool:
            return bool(b.assignment.warmup)

        await _until(b_has_warmups, "the newcomer's warm-ups")
        first = b.assignment
        assert first.active == [] and first.warmup and set(first.warmup) <= set(first.standby)
        assert sorted(wa.assignment.active) == [0, 1]  # a keeps processing both meanwhile
        for i in range(400, 410):  # handled by a during the warm-up
            await producer.send("ticks", f"k{i}".encode(), b"1", partition=i % 2)
        await producer.flush()

        async def split() -> bool:
            return len(b.assignment.active) == 1 and len(wa.assignment.active) == 1

        await _until(split, "the probing rebalance to hand the newcomer its share")
        assert b.assignment.active == first.warmup and not b.assignment.warmup
        for i in range(410, 420):
            await producer.send("ticks", f"k{i}".encode(), b"1", partition=i % 2)
        await producer.flush()

        async def all_counted() -> bool:
            sa, sb = await wa.status(), await b.status()
            return dict(sa.agents)["tally"] + dict(sb.agents)["tally"] >= 420

        await _until(all_counted, "every record counted")
        # nothing lost: every key is held by one of the two; and the newcomer restored at most the
        # tail a wrote after its warm-up's last read, not the 200 records its warm-up had
        (table_a,), (table_b,) = (await wa.status()).tables, (await b.status()).tables
        assert table_a.local_keys + table_b.local_keys == 420
        assert b.tables is not None and b.tables.restored_records <= 20, b.tables.restored_records
        await producer.stop()
    finally:
        if wb is not None:
            await wb.stop()
        await wa.stop()


async def test_without_warmups_the_newcomer_takes_its_share_at_once() -> None:
    broker, app_id = f"memory://cold-{uuid.uuid4().hex[:8]}", f"cold-{uuid.uuid4().hex[:6]}"
    wa = Worker(counting_app(app_id, broker, max_warmup_replicas=0))
    await wa.start()
    wb = Worker(counting_app(app_id, broker, max_warmup_replicas=0))
    try:
        await asyncio.wait_for(wa.assigned.wait(), 30)
        await wb.start()

        async def split() -> bool:
            return len(wb.assignment.active) == 1 and len(wa.assignment.active) == 1

        await _until(split, "the split")
        assert not wb.assignment.warmup
    finally:
        await wb.stop()
        await wa.stop()


async def _send(app: agentstream.App, keys: list[str]) -> None:
    producer = app.transport.producer()
    await producer.start()
    for key in keys:  # no partition given: the key's own, as the table partitions it
        await producer.send("ticks", key.encode(), b"1")
    await producer.flush()
    await producer.stop()


async def _counted(workers: list[Worker], expect: int) -> None:
    async def done() -> bool:
        return sum([dict((await w.status()).agents).get("tally", 0) for w in workers]) >= expect

    await _until(done, f"{expect} records counted")


async def test_a_newcomer_whose_data_dir_outlived_its_changelog_warms_up_from_nothing(tmp_path: Path) -> None:
    """The newcomer's data dir holds a copy of an older changelog (the app was reset, or the
    broker's data lost), whose checkpoints lie beyond the new changelog's end. Its warm-up must
    not count them as caught up: it wipes the copy and follows the changelog from its start, so
    it takes its share without a restore and without the old keys."""
    app_id = f"stale-{uuid.uuid4().hex[:6]}"
    old_broker, broker = f"memory://stale-{uuid.uuid4().hex[:8]}", f"memory://fresh-{uuid.uuid4().hex[:8]}"
    old = Worker(counting_app(app_id, old_broker, "rocksdb://", data_dir=str(tmp_path / "b")))
    await old.start()
    try:
        await asyncio.wait_for(old.assigned.wait(), 30)
        await _send(old.app, [f"old{i}" for i in range(1000)])  # about 500 changelog records a partition
        await _counted([old], 1000)
    finally:
        await old.stop()

    # its copy counts as the whole changelog to read (about 200 records a partition): more than the
    # acceptable lag, so not caught up
    lag = {"acceptable_recovery_lag": 50}
    app_a = counting_app(app_id, broker, "rocksdb://", data_dir=str(tmp_path / "a"), **lag)
    wa, wb = Worker(app_a), None
    await wa.start()
    try:
        await asyncio.wait_for(wa.assigned.wait(), 30)
        await _send(app_a, [f"k{i}" for i in range(400)])  # about 200 a partition: below the old ends
        await _counted([wa], 400)
        wb = Worker(counting_app(app_id, broker, "rocksdb://", data_dir=str(tmp_path / "b"), **lag))
        await wb.start()
        b = wb

        async def split() -> bool:
            return len(b.assignment.active) == 1 and len(wa.assignment.active) == 1

        await _until(split, "the probing rebalance to hand the newcomer its share")
        await _send(app_a, [f"k{i}" for i in range(400, 420)])
        await _counted([wa, b], 420)
        assert _keys_held(wa, b) == 420  # none of the 1000 old keys
        assert b.tables is not None and b.tables.restored_records <= 20, b.tables.restored_records
    finally:
        if wb is not None:
            await wb.stop()
        await wa.stop()


async def test_a_worker_restarted_on_its_data_dir_takes_its_partition_back_without_a_warmup_round(
    tmp_path: Path,
) -> None:
    """b owns partition 1 and stops; a takes it over (restoring it). b starts again on its data
    dir, whose copy of partition 1 is behind by only what a wrote meanwhile: it reports that copy
    at its first join (as Kafka Streams reports its state directory), so the plan hands partition 1
    straight back and b restores only that tail; a member with no copy would get a warm-up first."""
    app_id, broker = f"back-{uuid.uuid4().hex[:6]}", f"memory://back-{uuid.uuid4().hex[:8]}"

    def worker(name: str) -> Worker:
        return Worker(counting_app(app_id, broker, "rocksdb://", data_dir=str(tmp_path / name)))

    wa, wb = worker("a"), worker("b")
    await wa.start()
    try:
        await asyncio.wait_for(wa.assigned.wait(), 30)
        await _send(wa.app, [f"k{i}" for i in range(400)])
        await _counted([wa], 400)
        await wb.start()
        b = wb

        async def split() -> bool:
            return b.assignment.active == [1] and wa.assignment.active == [0]

        await _until(split, "b to take partition 1 in a probing rebalance")
        await _send(wa.app, [f"k{i}" for i in range(400, 420)])
        await _counted([wa, b], 420)
        await wb.stop()
        a = wa

        async def a_owns_both() -> bool:
            return a.assignment.active == [0, 1]

        await _until(a_owns_both, "a to take partition 1 over")
        await _send(wa.app, [f"k{i}" for i in range(420, 430)])  # the tail b's copy misses
        wb = worker("b")
        await wb.start()
        back = wb

        async def b_assigned() -> bool:
            return back.assigned.is_set() and back.assignment is not None

        await _until(b_assigned, "the restarted b's first assignment")
        first = back.assignment
        assert first.active == [1] and not first.warmup  # no warm-up round: its copy was caught up

        async def every_key_held() -> bool:
            return _keys_held(wa, back) == 430

        await _until(every_key_held, "every key held once, by a or b")
        assert back.tables is not None and back.tables.restored_records <= 10, back.tables.restored_records
    finally:
        await wb.stop()
        await wa.stop()
