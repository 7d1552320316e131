"""Session tables on a RocksDB store (issue 45, finding 6): a key's sessions are read from the store
and the close order is the store index, so the worker's memory does not grow with the keys; the
sessions, their values, the closes (each once, with on_window_close) and the late records match a
plain reference model over a restart, from the local copy and from the changelog, and over a
standby's takeover."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream.testing import AppHarness
from tests.support.memory import held_bytes as support_held_bytes
from tests.support.workers import run_worker

_SESSION_MODULES = ("agentstream.tables.sessions", "agentstream.tables.window_index")
T0 = 1_700_000_000.0
GAP, GRACE = 10.0, 5.0


def held_bytes(st: Any) -> int:
    """Python memory the session table's per-partition state holds, the partitions themselves
    (store, cache, pending writes) left out."""
    return support_held_bytes(st._state.parts.values(), _SESSION_MODULES)


class Closed(list[Any]):
    def append_pair(self, window_key: Any, value: Any) -> None:
        self.append((window_key, value))


def session_app(
    app_id: str, broker: str, store: str, data_dir: Path, closed: Closed | None = None, **settings: Any
) -> tuple[Any, Any]:
    app = agentstream.App(
        app_id,
        broker=broker,
        store=store,
        data_dir=str(data_dir),
        topic_partitions=settings.pop("partitions", 1),
        commit_interval=0.05,
        table_cache_size=50,
        web_enabled=False,
        max_warmup_replicas=0,
        **settings,
    )
    topic = app.topic("events", key_type=str, value_type=dict)
    st = app.Table("counts", default=int, key_type=str).session(
        GAP, grace=GRACE, on_window_close=None if closed is None else closed.append_pair
    )

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            st[event.key] += 1

    return app, st


async def _held(store: str, keys: int, tmp_path: Path) -> int:
    app, st = session_app(f"sidx-{uuid.uuid4().hex[:6]}", "memory://", store, tmp_path)
    async with AppHarness(app, store=store, data_dir=str(tmp_path)) as h:  # the harness would give memory stores
        for i in range(keys):
            await h.send("events", {}, key=f"k{i}", timestamp=T0)
            await h.send("events", {}, key=f"k{i}", timestamp=T0 + 1)
        await h.wait_idle()
        await h.send("events", {}, key="z", timestamp=T0 + 2)  # the next record, once the partition was committed
        await h.wait_idle()
        assert len(st.as_dict()) == keys + 1  # one session per key, none closed
        assert st.sessions("k0") == {(T0, T0 + 1): 2}
        return held_bytes(st)


async def test_rocksdb_session_state_does_not_grow_with_the_keys(tmp_path: Path) -> None:
    small = await _held("rocksdb://", 300, tmp_path / "small")
    large = await _held("rocksdb://", 3000, tmp_path / "large")
    in_memory = await _held("memory://", 3000, tmp_path / "mem")
    assert in_memory > 3000 * 200  # the measure sees per-key state held in memory (a memory store's)
    # RocksDB: the close index's buffer of new entries (at most 1,024) and a few integers
    assert large < 200_000, large
    assert large < in_memory / 5
    assert large < small + 150_000


# -- a reference model ---------------------------------------------------------------------------------


class Reference:
    """Kafka Streams' session semantics for one partition, written plainly: a record at ``t`` joins
    the key's sessions with ``end >= t - gap`` and ``start <= t + gap``; late when the merged
    session's ``end + gap + grace`` is before stream time; sessions close (in close-time order)
    once ``end + gap + grace < stream time``."""

    def __init__(self) -> None:
        self.st: int | None = None
        self.live: dict[tuple[str, int, int], int] = {}
        self.closed: list[Any] = []
        self.late = 0
        self.bridged = 0  # records that merged two sessions or more
        self.gap, self.after = round(GAP * 1000), round((GAP + GRACE) * 1000)

    def record(self, key: str, ts: int) -> None:
        self.st = ts if self.st is None else max(self.st, ts)
        joined = [(k, s, e) for (k, s, e) in self.live if k == key and e >= ts - self.gap and s <= ts + self.gap]
        start = min([ts] + [s for _, s, _ in joined])
        end = max([ts] + [e for _, _, e in joined])
        if end + self.after < self.st:
            self.late += 1
        else:
            self.bridged += len(joined) > 1
            value = sum(self.live.pop(j) for j in joined) + 1
            self.live[(key, start, end)] = value
        for k, s, e in sorted(self.live, key=lambda x: (x[2] + self.after, x[0], x[1], x[2])):
            if e + self.after < self.st:
                self.closed.append(((k, (s / 1000, e / 1000)), self.live.pop((k, s, e))))

    def table(self) -> dict[Any, int]:
        return {(k, (s / 1000, e / 1000)): v for (k, s, e), v in self.live.items()}


def workload(seed: int, n: int, t_from: float) -> list[tuple[str, int]]:
    """``n`` records of 6 keys (same length: the close order of equal close times is by key) with
    stream time moving about 1.2 s a record and disorder up to 20 s (half the records), so that sessions are started,
    extended, bridged, closed, and some records are late."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ms = round((t_from + i * 1.2 - rng.uniform(0, 20) * (rng.random() < 0.5)) * 1000)
        out.append((f"k{rng.randrange(6):02d}", ms))
    return out


async def feed(h: AppHarness, records: list[tuple[str, int]], ref: Reference) -> None:
    for i, (key, ms) in enumerate(records):
        await h.send("events", {}, key=key, timestamp=ms / 1000)
        ref.record(key, ms)
        if i % 40 == 39:
            await h.wait_idle()  # commits in between: keys are read back from the store
    await h.wait_idle()


@pytest.mark.parametrize(
    "same_dir,callback",
    [(True, True), (False, True), (True, False)],
    ids=["local-copy", "restored-from-changelog", "local-copy-no-on_window_close"],
)
async def test_rocksdb_sessions_match_a_reference_across_a_restart(
    tmp_path: Path, same_dir: bool, callback: bool
) -> None:
    broker, app_id = f"memory://sref-{uuid.uuid4().hex[:8]}", f"sref-{uuid.uuid4().hex[:6]}"
    closed: Closed | None = Closed() if callback else None
    ref = Reference()
    app, st = session_app(app_id, broker, "rocksdb://", tmp_path / "w1", closed)
    h = await run_worker(app)
    try:
        await feed(h, workload(1, 240, T0), ref)
        assert st.as_dict() == ref.table()
        assert closed is None or closed == ref.closed
        assert st.late_dropped == ref.late
        late_before = st.late_dropped
    finally:
        await h.worker.stop()
    assert len(ref.closed) > 10 and ref.late and ref.bridged  # the workload does all of it

    app2, st2 = session_app(app_id, broker, "rocksdb://", tmp_path / ("w1" if same_dir else "w2"), closed)
    h2 = await run_worker(app2)
    try:
        await h2.wait_idle()
        assert st2.as_dict() == ref.table()  # no index entry shows as a session
        await feed(h2, workload(2, 240, T0 + 240 * 1.2), ref)
        assert st2.as_dict() == ref.table()
        assert closed is None or closed == ref.closed  # each session closed once, in close-time order, with its value
        assert st2.late_dropped + late_before == ref.late
        for key in ("k00", "k05"):
            assert st2.sessions(key) == {w: v for (k, w), v in ref.table().items() if k == key}
    finally:
        await h2.worker.stop()


async def test_rocksdb_partition_back_from_a_standby_closes_what_was_written_elsewhere(tmp_path: Path) -> None:
    """A partition written on worker B and followed by A as a standby: when it comes back to A,
    A's store index (built at activation) closes B's sessions, and the late record stays late."""
    broker, app_id = f"memory://ssb-{uuid.uuid4().hex[:8]}", f"ssb-{uuid.uuid4().hex[:6]}"
    closed: Closed = Closed()

    def make(name: str) -> tuple[Any, Any]:
        return session_app(
            app_id, broker, "rocksdb://", tmp_path / name, closed, partitions=2, table_standby_replicas=1
        )

    app_a, st_a = make("a")
    ha = await run_worker(app_a)
    hb: AppHarness | None = None
    try:
        from agentstream.transport.partitioner import default_partition

        codec = app_a.topics["events"].key_codec
        key_of = {default_partition(codec.dumps(k), 2): k for k in "abcdefgh"}
        for k in key_of.values():
            await ha.send("events", {}, key=k, timestamp=T0)
        await ha.wait_idle()

        app_b, _ = make("b")
        hb = await run_worker(app_b)
        await app_a.transport.settle()
        await asyncio.wait_for(ha.worker.assigned.wait(), 30)
        (moved,) = hb.worker.assignor.assignment.active
        key = key_of[moved]
        await hb.send("events", {}, key=key, timestamp=T0 + 4)  # on B: [0, 4]
        await hb.send("events", {}, key=key, timestamp=T0 + 30)  # a new session, and [0, 4] closes (4 + 15 < 30)
        await hb.wait_idle()
        await hb.worker.stop()
        hb = None

        await app_a.transport.settle()
        await asyncio.wait_for(ha.worker.assigned.wait(), 30)
        assert moved in ha.worker.assignor.assignment.active
        assert st_a.sessions(key) == {(T0 + 30, T0 + 30): 1}
        assert ((key, (T0, T0 + 4)), 2) in closed
        await ha.send("events", {}, key=key, timestamp=T0 + 10)  # 10 + 15 < 30: late on A too
        await ha.send("events", {}, key=key, timestamp=T0 + 60)  # closes [30, 30] (30 + 15 < 60) on A
        await ha.wait_idle()
        assert st_a.late_dropped == 1
        assert st_a.sessions(key) == {(T0 + 60, T0 + 60): 1}
        assert [c for c in closed if c[0][0] == key] == [((key, (T0, T0 + 4)), 2), ((key, (T0 + 30, T0 + 30)), 1)]
    finally:
        if hb is not None:
            await hb.worker.stop()
        await ha.worker.stop()


# -- the store index itself ----------------------------------------------------------------------------


def _part(store: Any) -> Any:
    """A table partition around ``store`` (StoreIndex reads its store, write-back cache and pending
    writes; the compiled build checks the type)."""
    from types import SimpleNamespace

    from agentstream.tables.partition import TablePartition

    return TablePartition(SimpleNamespace(name="t"), 0, store, None, 0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_store_index_takes_every_entry_once_in_order_like_a_heap(tmp_path: Path, seed: int) -> None:
    """Entries come due a few at a time (as sessions do) and in bulk, new ones land before, among
    and after those read ahead, some end before the last limit (a rebuild's), some are added
    twice, and a limit may be earlier than the last: due() gives each entry once, in (end, key)
    order, and the store keeps exactly the entries not taken."""
    from agentstream.tables.query import WINDOW_INDEX_END, WINDOW_INDEX_PREFIX
    from agentstream.tables.rocksdb import RocksDBStore
    from agentstream.tables.window_index import ADD_BATCH, LOOKAHEAD, StoreIndex, index_key

    rng = random.Random(seed)
    store = RocksDBStore(tmp_path / "db")
    try:
        index = StoreIndex(_part(store))
        expected: set[tuple[int, bytes]] = set()
        taken: list[tuple[int, bytes]] = []
        limit = 0
        added = 0
        for step in range(3000):
            for _ in range(rng.choice([0, 1, 1, 2, 5])):
                end = (
                    limit + rng.choice([1, 2, 3, 50, 400, 5000]) if rng.random() < 0.97 else limit - rng.randrange(100)
                )
                wk = b"k%d" % rng.randrange(4000)
                index.add(end, wk)
                expected.add((end, wk))
                added += 1
            limit += rng.choice([0, 1, 1, 2, 3, 700 if step % 500 == 499 else 1])
            # a windowed table's cleanup may ask with the wall clock, later than the stream time asked next
            asked = limit - rng.randrange(1, 500) if rng.random() < 0.2 else limit
            got = index.due(asked)
            want = sorted(e for e in expected if e[0] <= asked)
            assert [wk for _, wk in want] == got, step
            expected -= set(want)
            taken.extend(want)
        assert added > 2 * ADD_BATCH and len(taken) > 10 * LOOKAHEAD
        index.done_adding()
        left = {k for k, _ in store.items(WINDOW_INDEX_PREFIX, WINDOW_INDEX_END)}
        assert left == {index_key(end, wk) for end, wk in expected}
    finally:
        store.close()
