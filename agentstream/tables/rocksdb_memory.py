"""One memory budget for every RocksDB store of a worker process (the ``rocksdb_memory_mb`` setting).

Kafka Streams' documented ``BoundedMemoryRocksDBConfig``, with rocksdict 0.3.29: without it, each
store (one per table partition: actives, standbys, global tables, restores) has its own block
cache, keeps the index and filter blocks of every SST file outside any cache (they grow with the
keys) and up to 4 x 16 MB of memtables, so a worker's memory grows with its partitions and state.
With it, all stores share:

* **one LRU block cache** of ``rocksdb_memory_mb`` MiB holding data blocks AND index and filter
  blocks (``cache_index_and_filter_blocks``): what RocksDB holds for reads is bounded, whatever the
  number of keys. Index and filters are partitioned (two-level index, partitioned filters), so only
  their small top level stays pinned and the partitions are cached like data. L0's index and
  filters are pinned (they are read by every lookup). RocksDB's LRU cache keeps half its capacity as
  a high-priority pool, and index and filter blocks are inserted there
  (``cache_index_and_filter_blocks_with_high_priority``, on by default): a scan of data blocks does
  not evict them. rocksdict sets neither explicitly; these are RocksDB's defaults.
* **one write-buffer manager charged to that cache**: the memtables of all stores together are
  flushed once they reach :data:`MEMTABLE_SHARE` of the budget, and their memory is counted in the
  cache (data blocks are evicted to make room). Writes never stall for it (Kafka Streams'
  ``allow_stall`` false): while a flush runs, memtables may briefly hold more.

What is NOT in the budget: RocksDB's table readers (bounded by ``MAX_OPEN_FILES`` per store, small
with index and filters in the cache), iterators' pinned blocks while a scan is open, and the
allocator's own overhead (glibc arenas: RSS can sit above the budget by tens of MB).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rocksdict import BlockBasedIndexType, BlockBasedOptions, Cache, Options, WriteBufferManager

from agentstream.settings import ROCKSDB_MEMORY_DEFAULT_MB, ROCKSDB_MEMORY_MIN_MB

__all__ = ["MEMTABLE_SHARE", "RocksDBMemory", "shared_memory"]

MiB = 1 << 20
MEMTABLE_SHARE = 0.5
"""Part of the budget the memtables of all stores may take before the largest is flushed (Kafka
Streams' example leaves the split to the user; the state stores here are write-heavy counters)."""
MAX_WRITE_BUFFER_SIZE = 16 * MiB  # measured best for random-key inserts (see rocksdb.py's options)
MIN_WRITE_BUFFER_SIZE = 1 * MiB
MEMTABLES_PER_STORE = 3  # one being written, up to two being flushed
BLOCK_SIZE = 8 * 1024  # twice RocksDB's 4 KB: half the index for the same data, a little more read per miss


@dataclass(frozen=True)
class RocksDBMemory:
    """The shared block cache and write-buffer manager of one budget, and the options that use them."""

    budget_mb: int
    cache: Cache
    write_buffers: WriteBufferManager

    @classmethod
    def create(cls, budget_mb: int) -> RocksDBMemory:
        if budget_mb < ROCKSDB_MEMORY_MIN_MB:  # settings refuse it at start; a direct caller hears it too
            raise ValueError(f"rocksdb_memory_mb must be >= {ROCKSDB_MEMORY_MIN_MB}, got {budget_mb}")
        cache = Cache(budget_mb * MiB)
        wbm = WriteBufferManager.new_write_buffer_manager_with_cache(cls.memtable_limit_of(budget_mb), False, cache)
        return cls(budget_mb, cache, wbm)

    @staticmethod
    def memtable_limit_of(budget_mb: int) -> int:
        return int(budget_mb * MiB * MEMTABLE_SHARE)

    @property
    def capacity(self) -> int:
        """Bytes the shared cache may hold (memtables included, charged by the manager)."""
        return self.budget_mb * MiB

    @property
    def memtable_limit(self) -> int:
        """Bytes of memtables, all stores together, at which the write-buffer manager flushes."""
        return self.write_buffers.get_buffer_size()

    @property
    def write_buffer_size(self) -> int:
        """One store's memtable size: a quarter of the memtable share, 1 to 16 MiB. The manager
        flushes the largest memtable once all together reach the share, so with more stores than
        that each is flushed smaller; fewer, larger flushes mean fewer level-0 files to compact."""
        return max(MIN_WRITE_BUFFER_SIZE, min(MAX_WRITE_BUFFER_SIZE, self.memtable_limit // 4))

    def usage(self) -> dict[str, int]:
        """What the budget holds now, in bytes (the cache's usage includes the memtables)."""
        return {
            "capacity": self.capacity,
            "usage": self.cache.get_usage(),
            "pinned": self.cache.get_pinned_usage(),
            "memtable_limit": self.memtable_limit,
            "memtable_usage": self.write_buffers.get_usage(),
        }

    def apply(self, opts: Options) -> None:
        """Point ``opts`` (one store's) at the shared cache and write-buffer manager."""
        opts.set_write_buffer_manager(self.write_buffers)
        opts.set_write_buffer_size(self.write_buffer_size)
        opts.set_max_write_buffer_number(MEMTABLES_PER_STORE)
        table = BlockBasedOptions()
        table.set_block_cache(self.cache)
        table.set_block_size(BLOCK_SIZE)
        table.set_cache_index_and_filter_blocks(True)
        table.set_pin_l0_filter_and_index_blocks_in_cache(True)
        table.set_index_type(BlockBasedIndexType.two_level_index_search())
        table.set_partition_filters(True)
        table.set_pin_top_level_index_and_filter(True)
        table.set_bloom_filter(10, False)  # point reads on the hot path mostly miss or hit one file
        opts.set_block_based_table_factory(table)


_shared: dict[int, RocksDBMemory] = {}
_lock = threading.Lock()


def shared_memory(budget_mb: int = ROCKSDB_MEMORY_DEFAULT_MB) -> RocksDBMemory:
    """The process's budget of ``budget_mb`` MiB, created at its first use and then shared by every
    store opened with that setting (a worker process has one setting, so one budget)."""
    with _lock:
        memory = _shared.get(budget_mb)
        if memory is None:
            memory = _shared[budget_mb] = RocksDBMemory.create(budget_mb)
        return memory
