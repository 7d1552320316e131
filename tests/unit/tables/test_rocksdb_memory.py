"""``rocksdb_memory_mb``: one block cache and one write-buffer manager bound every RocksDB store of
the process together (Kafka Streams' BoundedMemoryRocksDBConfig)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstream.exceptions import ConfigError
from agentstream.settings import ROCKSDB_MEMORY_MIN_MB, Settings
from agentstream.tables.rocksdb import RocksDBStore
from agentstream.tables.rocksdb_memory import RocksDBMemory
from agentstream.tables.store import store_for

MiB = 1 << 20


STORES = 32


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[list[RocksDBStore]]:
    """32 stores opened as a worker opens them, under a 32 MiB budget (16 MiB of memtables, 2 MiB
    per store's memtable)."""
    opened: list[RocksDBStore] = []
    for p in range(STORES):
        store = store_for("rocksdb://", tmp_path / str(p), memory_mb=ROCKSDB_MEMORY_MIN_MB)
        assert isinstance(store, RocksDBStore)
        opened.append(store)
    yield opened
    for store in opened:
        store.close()


def test_every_store_reports_one_shared_cache_of_the_budget(tmp_path: Path) -> None:
    stores = [store_for("rocksdb://", tmp_path / str(p), memory_mb=48) for p in range(2)]
    assert all(isinstance(s, RocksDBStore) for s in stores)
    try:
        _check_shared_cache(stores, 48)  # type: ignore[arg-type]  # RocksDBStores, checked above
    finally:
        for s in stores:
            s.close()


def _check_shared_cache(stores: list[RocksDBStore], budget_mb: int) -> None:
    assert {s.property_int("rocksdb.block-cache-capacity") for s in stores} == {budget_mb * MiB}
    before = stores[1].property_int("rocksdb.block-cache-usage") or 0
    for i in range(4000):  # ~4 MB into store 0's memtable, charged to the shared cache
        stores[0].put(b"k%08d" % i, b"v" * 1000)
    # store 1 sees store 0's memtable in its cache's usage: the same cache
    assert (stores[1].property_int("rocksdb.block-cache-usage") or 0) >= before + 2 * MiB
    usage = stores[0].memory.usage()
    assert usage["capacity"] == budget_mb * MiB
    assert usage["memtable_limit"] == budget_mb * MiB // 2
    assert usage["memtable_usage"] >= 2 * MiB


def test_a_reopened_store_is_in_the_budget_again(tmp_path: Path) -> None:
    """rocksdict reopens an existing DB with the options saved in it (and a block cache of its own)
    unless told otherwise: a restarted worker's stores must share the budget as new ones do."""
    first = store_for("rocksdb://", tmp_path / "0", memory_mb=48)
    first.put(b"k", b"v")
    first.close()
    again = store_for("rocksdb://", tmp_path / "0", memory_mb=40)
    assert isinstance(again, RocksDBStore)
    try:
        assert again.get(b"k") == b"v"
        assert again.property_int("rocksdb.block-cache-capacity") == 40 * MiB
    finally:
        again.close()


def test_the_memtables_of_all_stores_together_are_flushed_at_the_shared_limit(stores: list[RocksDBStore]) -> None:
    """~58 MB written across 32 stores, each store's part (1.8 MB) under its own memtable size (2 MiB):
    no store would switch its memtable (to be flushed) on its own, so without the shared write-buffer
    manager all of it stays in memtables. With it, the stores' memtables are switched and flushed once
    all of them together pass 16 MiB.

    The bound is soft, as RocksDB's manager without write stalls makes it (Kafka Streams' choice):
    a store whose switched memtable still waits for RocksDB's one flush thread (an fsync each, the
    disk's pace) is not switched again, so its new memtable may grow meanwhile. Hence the test counts
    the stores the manager made flush, not the bytes at one instant."""
    limit = stores[0].memory.memtable_limit
    per_store = stores[0].memory.write_buffer_size * 9 // 10
    value = b"v" * 1000
    written = 0
    for i in range(per_store * STORES // len(value)):
        stores[i % STORES].put(b"k%08d" % i, value)
        written += len(value)
    assert written > 3 * limit

    def flushed_or_switched(s: RocksDBStore) -> bool:
        return bool(s.property_int("rocksdb.num-files-at-level0") or s.property_int("rocksdb.num-immutable-mem-table"))

    made_to_flush = sum(flushed_or_switched(s) for s in stores)
    held = sum(s.property_int("rocksdb.cur-size-all-mem-tables") or 0 for s in stores)
    assert made_to_flush >= STORES // 2, (
        f"{made_to_flush} of {STORES} stores flushed; memtables hold {held / MiB:.1f} MiB of the "
        f"{written / MiB:.0f} MiB written (shared limit {limit / MiB:.0f} MiB)"
    )
    assert [s.get(b"k%08d" % i) for i, s in enumerate(stores)] == [value] * STORES  # flushed, not lost


def test_a_budget_below_the_minimum_is_refused_naming_the_setting_and_the_minimum() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("a", {"rocksdb_memory_mb": ROCKSDB_MEMORY_MIN_MB - 1}, environ={})
    assert info.value.setting == "rocksdb_memory_mb" and str(ROCKSDB_MEMORY_MIN_MB) in info.value.problem
    assert Settings.build("a", {"rocksdb_memory_mb": ROCKSDB_MEMORY_MIN_MB}, environ={}).rocksdb_memory_mb == 32


def _settled(store: RocksDBStore) -> None:
    """Wait (bounded by a count of polls, not by a time assert) until RocksDB has no compaction
    pending or running for ``store``."""
    import time

    for _ in range(500):
        if not store.property_int("rocksdb.compaction-pending") and not store.property_int(
            "rocksdb.num-running-compactions"
        ):
            return
        time.sleep(0.01)


def test_level_0_files_are_compacted_only_from_eight_on(tmp_path: Path) -> None:
    """Table keys are random, so a level-0 compaction rewrites the whole next level: stores wait for
    8 level-0 files (RocksDB's default, 4, compacted twice as often). Seven flushed files of
    overlapping keys stay in level 0; the eighth starts a compaction that empties it."""
    store = store_for("rocksdb://", tmp_path / "0", memory_mb=ROCKSDB_MEMORY_MIN_MB)
    assert isinstance(store, RocksDBStore)
    try:
        for f in range(7):
            store.write_many([b"k%06d" % (i * 7 + f) for i in range(1000)], [b"v"] * 1000)
            store.flush()
        _settled(store)
        assert store.property_int("rocksdb.num-files-at-level0") == 7
        store.write_many([b"k%06d" % (i * 7) for i in range(1000)], [b"w"] * 1000)
        store.flush()
        for _ in range(500):  # the compaction is scheduled in the background after the flush
            if (store.property_int("rocksdb.num-files-at-level0") or 0) < 8:
                break
            _settled(store)
        assert (store.property_int("rocksdb.num-files-at-level0") or 0) < 8
        assert store.get(b"k000007") == b"w" and store.get(b"k000008") == b"v"
    finally:
        store.close()


def test_the_default_budget_is_what_the_large_state_case_fills_at_1m_keys() -> None:
    """64 MiB (docs/deployment.md): one budget for the whole worker, whatever its partitions and keys."""
    assert Settings.build("a", {}, environ={}).rocksdb_memory_mb == 64
    store_memory = RocksDBMemory.create(64)
    assert store_memory.capacity == 64 * MiB and store_memory.memtable_limit == 32 * MiB
    # each store's memtable is a quarter of the shared memtable limit: 4 busy stores flush ~8 MiB files
    assert store_memory.write_buffer_size == 8 * MiB
