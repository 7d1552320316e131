"""final_results() on a RocksDB store (issue 45, finding 6): the suppression buffer's close order
is a store index in the buffer's own store, so the worker's memory does not grow with the open
windows; the finals (which, with which values, in which order) are the memory store's, over a
restart from the local copy and from the changelog."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream.tables.final_results import FinalResults
from agentstream.testing import AppHarness
from tests.support.memory import held_bytes as support_held_bytes
from tests.support.workers import run_worker

_MODULES = ("agentstream.tables.final_results", "agentstream.tables.window_index")
T0 = 1_700_000_000.0


def held_bytes(final: FinalResults) -> int:
    """Python memory the suppression buffer's per-partition state holds, the partitions themselves
    (store, cache, pending writes) left out."""
    return support_held_bytes(final._parts.values(), _MODULES)


def final_app(app_id: str, broker: str, store: str, data_dir: Path, kind: str, **settings: Any) -> Any:
    app = agentstream.App(
        app_id,
        broker=broker,
        store=store,
        data_dir=str(data_dir),
        topic_partitions=1,
        commit_interval=0.05,
        table_cache_size=50,
        web_enabled=False,
        max_warmup_replicas=0,
        **settings,
    )
    topic = app.topic("events", key_type=str, value_type=dict)
    table = app.Table("counts", default=int, key_type=str)
    wt: Any = table.session(10, grace=5) if kind == "session" else table.hopping(10, 5, expires=1000, grace=5)
    wt.final_results("count-finals")

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    return app


def final_of(app: Any) -> FinalResults:
    final: FinalResults = app.tables["counts"]._windowed.final
    return final


async def _held(store: str, keys: int, tmp_path: Path) -> int:
    app = final_app(f"fidx-{uuid.uuid4().hex[:6]}", "memory://", store, tmp_path, "hopping")
    async with AppHarness(app, store=store, data_dir=str(tmp_path)) as h:  # the harness would give memory stores
        for i in range(keys):
            await h.send("events", {}, key=f"k{i}", timestamp=T0)
        await h.wait_idle()
        await h.send("events", {}, key="z", timestamp=T0 + 1)  # the next record, once the partition was committed
        await h.wait_idle()
        final = final_of(app)
        (part,) = final.buffer.parts.values()
        assert len([k for k, _ in final.buffer.items()]) == 2 * (keys + 1)  # two open windows a key, none closed
        assert h.read("count-finals") == []
        assert part.ready
        return held_bytes(final)


async def test_rocksdb_suppression_buffer_does_not_grow_with_the_open_windows(tmp_path: Path) -> None:
    small = await _held("rocksdb://", 300, tmp_path / "small")  # 602 open windows
    large = await _held("rocksdb://", 3000, tmp_path / "large")  # 6,002
    in_memory = await _held("memory://", 3000, tmp_path / "mem")
    assert in_memory > 6000 * 100  # the measure sees per-window state held in memory (a memory store's)
    # RocksDB: the close index's buffer of new entries (at most 1,024) and a few integers
    assert large < 200_000, large
    assert large < in_memory / 3
    assert large < small + 150_000


# -- the same finals as the memory store's -----------------------------------------------------------


def workload(seed: int, n: int, t_from: float) -> list[tuple[str, int]]:
    """``n`` records of 6 keys with stream time moving about 1.2 s a record and disorder up to
    20 s (half the records): windows and sessions open, grow, merge and close, some records late."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ms = round((t_from + i * 1.2 - rng.uniform(0, 20) * (rng.random() < 0.5)) * 1000)
        out.append((f"k{rng.randrange(6):02d}", ms))
    return out


async def feed(h: AppHarness, records: list[tuple[str, int]]) -> None:
    for i, (key, ms) in enumerate(records):
        await h.send("events", {}, key=key, timestamp=ms / 1000)
        if i % 40 == 39:
            await h.wait_idle()  # commits in between: buffered windows are read back from the store
    await h.wait_idle()


async def finals_over_a_restart(store: str, kind: str, guarantee: str, tmp_path: Path, same_dir: bool) -> list[Any]:
    """The finals topic, in order, after two workers in turn processed the workload."""
    broker, app_id = f"memory://fref-{uuid.uuid4().hex[:8]}", f"fref-{uuid.uuid4().hex[:6]}"
    app = final_app(app_id, broker, store, tmp_path / "w1", kind, processing_guarantee=guarantee)
    h = await run_worker(app)
    try:
        await feed(h, workload(1, 200, T0))
        if store == "rocksdb://":
            assert final_of(app)._parts[0].index is not None  # the store index is what ran
    finally:
        await h.worker.stop()
    app2 = final_app(
        app_id, broker, store, tmp_path / ("w1" if same_dir else "w2"), kind, processing_guarantee=guarantee
    )
    h2 = await run_worker(app2)
    try:
        await feed(h2, workload(2, 200, T0 + 200 * 1.2))
        await h2.worker.commit()
        final = final_of(app2)
        assert final.errors == 0
        assert not final._parts[0].unindexed  # nothing in flight once committed
        return [(m.key, m.value) for m in app2.transport.read_topic("count-finals", committed=True)]
    finally:
        await h2.worker.stop()


@pytest.mark.parametrize(
    "kind,guarantee,same_dir",
    [
        ("session", "at_least_once", True),
        ("session", "exactly_once", False),
        ("hopping", "at_least_once", False),
        ("hopping", "exactly_once", True),
    ],
    ids=[
        "session-alo-local-copy",
        "session-eos-from-changelog",
        "hopping-alo-from-changelog",
        "hopping-eos-local-copy",
    ],
)
async def test_rocksdb_finals_match_the_memory_stores_across_a_restart(
    tmp_path: Path, kind: str, guarantee: str, same_dir: bool
) -> None:
    expected = await finals_over_a_restart("memory://", kind, guarantee, tmp_path / "mem", same_dir)
    got = await finals_over_a_restart("rocksdb://", kind, guarantee, tmp_path / "rocks", same_dir)
    assert len(expected) > 40  # the workload closes many windows, in both runs
    assert len({v for _, v in expected}) == len(expected)  # each once
    assert got == expected  # the same finals, values and order


async def test_rocksdb_session_reusing_the_start_of_one_whose_final_awaits_its_ack_still_gets_its_final(
    tmp_path: Path,
) -> None:
    """As with a memory store: the acknowledgement of a closed session's final, coming after a newer
    session was buffered under the same start, must not delete the newer one's entry (whose final
    would then never come)."""
    app = final_app(f"freuse-{uuid.uuid4().hex[:6]}", "memory://", "rocksdb://", tmp_path, "session")
    events = app.topics["events"]
    async with AppHarness(app, store="rocksdb://", data_dir=str(tmp_path)) as h:
        await events.send(key="a", value={}, timestamp=0.0)
        await events.send(key="a", value={}, timestamp=1.0)  # [0, 1], closes once stream time passes 1 + 15
        await h.wait_idle()
        # in one batch: [0, 1] closes (its final is sent), then a's [10, 10] starts and the record
        # at 0 extends it back to [0, 10], before the first final's acknowledgement is handled
        for key, ts in [("z", 17.0), ("a", 10.0), ("a", 0.0)]:
            await events.send(key=key, value={}, timestamp=ts)
        await h.wait_idle()
        assert final_of(app)._parts[0].index is not None
        await events.send(key="z", value={}, timestamp=100.0)
        await h.wait_idle()
        got: list[tuple[Any, ...]] = []
        for _ in range(100):
            got = sorted((v.key, v.start, v.end, v.value) for _, v in h.read("count-finals"))
            if len(got) >= 3:
                break
            await asyncio.sleep(0.01)
        assert got == [("a", 0.0, 1.0, 2), ("a", 0.0, 10.0, 2), ("z", 17.0, 17.0, 1)]
