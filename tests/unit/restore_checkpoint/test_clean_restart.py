"""A restart after a clean stop restores nothing: the stop commits, flushes the RocksDB stores and
writes each partition's checkpoint at the changelog's end, so the next start finds its state
current (issue 30). Without the data dir, the whole changelog is restored."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

import agentstream
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio


def counting_app(app_id: str, broker: str, data_dir: Path) -> agentstream.App:
    app = agentstream.App(
        app_id,
        broker=broker,
        topic_partitions=2,
        store="rocksdb://",
        data_dir=str(data_dir),
        web_enabled=False,
        commit_interval=0.05,
    )
    totals = app.Table("totals", default=int)

    @app.agent(app.topic("ticks", key_type=str, value_type=int))
    async def tally(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            totals[event.key] += event.value

    return app


async def _send(app: agentstream.App, n: int) -> None:
    """``n`` records over keys k0..k49 (no partition given: the key's own, as the table partitions it)."""
    producer = app.transport.producer()
    await producer.start()
    for i in range(n):
        await producer.send("ticks", f"k{i % 50}".encode(), b"1")
    await producer.flush()
    await producer.stop()


async def _run(app: agentstream.App, send: int = 0) -> tuple[int, int]:
    """Start a worker, send ``send`` records, wait until handled, stop cleanly: (restored, keys held)."""
    worker = Worker(app)
    await worker.start()
    try:
        await asyncio.wait_for(worker.assigned.wait(), 10)
        restored = worker.tables.restored_records if worker.tables else -1
        if send:
            await _send(app, send)
            for _ in range(500):
                if dict((await worker.status()).agents).get("tally", 0) >= send:
                    break
                await asyncio.sleep(0.02)
        # the keys read back from the table (status' key count is RocksDB's estimate: it runs high
        # by the overwrites not compacted yet, more of them the more commits a loaded machine makes)
        return restored, sum(1 for _ in app.tables["totals"].items())
    finally:
        await worker.stop()


async def test_a_restart_after_a_clean_stop_restores_nothing(tmp_path: Path) -> None:
    broker, app_id = f"memory://ck-{uuid.uuid4().hex[:8]}", f"ck-{uuid.uuid4().hex[:6]}"
    assert await _run(counting_app(app_id, broker, tmp_path), send=500) == (0, 50)
    # the same data dir, a new app object as a restarted process builds it
    assert await _run(counting_app(app_id, broker, tmp_path)) == (0, 50)


async def test_without_its_data_dir_a_worker_restores_the_whole_changelog(tmp_path: Path) -> None:
    broker, app_id = f"memory://ck-{uuid.uuid4().hex[:8]}", f"ck-{uuid.uuid4().hex[:6]}"
    assert await _run(counting_app(app_id, broker, tmp_path / "a"), send=500) == (0, 50)
    restored, keys = await _run(counting_app(app_id, broker, tmp_path / "b"))  # a new host: no state
    # every changelog record: at least one per key (the table cache writes a key once per commit)
    assert keys == 50 and restored >= 50


async def test_a_stop_during_a_periodic_commit_lets_it_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop waits for the commit in flight instead of cancelling it (which closes every task
    dirty), so the restart still restores nothing."""
    from agentstream.transport.memory import MemoryProducer

    broker, app_id = f"memory://ck-{uuid.uuid4().hex[:8]}", f"ck-{uuid.uuid4().hex[:6]}"
    app = counting_app(app_id, broker, tmp_path)
    worker = Worker(app)
    in_flush = asyncio.Event()
    real_flush = MemoryProducer.flush

    async def slow_flush(self: MemoryProducer) -> None:  # a broker slow to take the commit's records
        in_flush.set()
        await asyncio.sleep(0.3)
        await real_flush(self)

    await worker.start()
    try:
        await asyncio.wait_for(worker.assigned.wait(), 10)
        await _send(app, 100)
        monkeypatch.setattr(MemoryProducer, "flush", slow_flush)
        await asyncio.wait_for(in_flush.wait(), 10)  # the periodic commit is delivering
    finally:
        await worker.stop()
    monkeypatch.setattr(MemoryProducer, "flush", real_flush)
    assert await _run(counting_app(app_id, broker, tmp_path)) == (0, 50)
