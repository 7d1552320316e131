"""The windowed table's index of live windows (issue 45, finding 6): with a RocksDB store it lives in
the store, so the worker's memory does not grow with the keys; windows still close exactly once
each, in end order, after a restart from the same store and after a restore from the changelog."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream.testing import AppHarness
from tests.support.memory import held_bytes as support_held_bytes
from tests.support.workers import run_worker

pytestmark = pytest.mark.asyncio

_WINDOW_MODULES = ("agentstream.tables.windowed", "agentstream.tables.window_index")


def held_bytes(wt: Any) -> int:
    """Python memory the windowed table's per-partition state holds (its window index), the
    partitions themselves (store, cache, pending writes) left out."""
    return support_held_bytes(wt._state.parts.values(), _WINDOW_MODULES)


def window_app(
    app_id: str, broker: str, store: str, data_dir: Path, closed: list[Any] | None = None
) -> tuple[Any, Any]:
    app = agentstream.App(
        app_id,
        broker=broker,
        store=store,
        data_dir=str(data_dir),
        topic_partitions=1,
        commit_interval=0.05,
        table_cache_size=100,
        web_enabled=False,
    )
    topic = app.topic("events", key_type=str, value_type=dict)

    def on_close(key: Any, value: Any) -> None:
        if closed is not None:
            closed.append((key, value))

    wt = app.Table("counts", default=int, on_window_close=on_close).hopping(30.0, 10.0, expires=30.0)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    return app, wt


async def _index_size(store: str, keys: int, tmp_path: Path) -> int:
    app, wt = window_app(f"idx-{uuid.uuid4().hex[:6]}", "memory://", store, tmp_path / store.split(":")[0])
    async with AppHarness(app, store=store) as h:  # the harness would give it memory stores
        for i in range(keys):
            await h.send("events", {}, key=f"k{i}", timestamp=100.0)
        await h.wait_idle()
        assert len(wt.as_dict()) == 3 * keys  # every key in its 3 windows, none expired
        return held_bytes(wt)


async def test_rocksdb_window_index_does_not_grow_with_the_keys(tmp_path: Path) -> None:
    small = await _index_size("rocksdb://", 200, tmp_path / "small")
    large = await _index_size("rocksdb://", 3000, tmp_path / "large")  # 9,000 windows
    in_memory = await _index_size("memory://", 3000, tmp_path / "mem")
    assert in_memory > 9000 * 100  # the measure sees an index held in memory (a memory store's heap)
    # RocksDB: at most a buffer of new entries (1,024 of ~100 bytes) besides a few integers
    assert large < 200_000, large
    assert large < in_memory / 5
    assert large < small + 150_000


async def _run(app: Any, wt: Any, sends: list[tuple[str, float]]) -> dict[Any, Any]:
    """Run a worker over ``sends``; the windows it held at the end."""
    h = await run_worker(app)
    try:
        for key, ts in sends:
            await h.send("events", {}, key=key, timestamp=ts)
        await h.wait_idle()
        return dict(wt.as_dict())
    finally:
        await h.worker.stop()


@pytest.mark.parametrize("same_store", [True, False], ids=["same-store", "restored-from-changelog"])
async def test_windows_close_once_each_in_end_order_after_a_restart(tmp_path: Path, same_store: bool) -> None:
    """Windows written before a restart expire (with on_window_close) exactly once each after it,
    whether the worker reopens its RocksDB store or restores an empty one from the changelog."""
    broker, app_id = f"memory://wix-{uuid.uuid4().hex[:8]}", f"wix-{uuid.uuid4().hex[:6]}"
    keys = [f"k{i:02d}" for i in range(40)]
    closed: list[Any] = []
    app, wt = window_app(app_id, broker, "rocksdb://", tmp_path / "a", closed)
    # windows [0,30) [10,40) [20,50) [30,60) ... ; expires 30 after their end
    first = [(k, ts) for ts in (5.0, 25.0) for k in keys]
    before = await _run(app, wt, first + [("z", 65.0)])  # stream time 65: [0, 30) expired (30 + 30 <= 65)
    assert sorted(k for (k, w), _ in closed if w == (0.0, 30.0)) == keys
    assert all(w == (0.0, 30.0) for (_, w), _ in closed)
    assert len(before) == 2 * len(keys) + 3
    closed_first = list(closed)

    app2, wt2 = window_app(app_id, broker, "rocksdb://", tmp_path / ("a" if same_store else "b"), closed)
    h = await run_worker(app2)
    try:
        await h.wait_idle()
        assert wt2.as_dict() == before  # no index entry shows as a window
        await h.send("events", {}, key="z", timestamp=200.0)  # everything written so far expires
        await h.wait_idle()
        assert set(wt2.as_dict()) == {("z", w) for w in ((180.0, 210.0), (190.0, 220.0), (200.0, 230.0))}
    finally:
        await h.worker.stop()
    after = closed[len(closed_first) :]
    # each window once, over both runs
    every = [key for key, _ in closed]
    assert len(every) == len(set(every))
    assert {key for key, _ in after} == set(before)
    assert dict(after) == before  # with its final value
    ends = [w[1] for (_, w), _ in after]
    assert ends == sorted(ends)  # in end order
    # and they stay closed: a third run closes nothing again
    app3, wt3 = window_app(app_id, broker, "rocksdb://", tmp_path / ("a" if same_store else "c"), closed)
    n = len(closed)
    await _run(app3, wt3, [("z", 400.0)])
    assert {key for key, _ in closed[n:]} == {("z", w) for w in ((180.0, 210.0), (190.0, 220.0), (200.0, 230.0))}
