"""One partition of one table on one worker: its store, write-back cache, pending changelog
writes and changelog position. The :class:`~agentstream.tables.table.Table` declaration routes
each key to one of these; the worker's table manager opens, restores and closes them."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from ..exceptions import AgentStreamError
from ..lifecycle import PARTITION_TRANSITIONS, PartitionState, StateMachine
from ..transport.base import Delivery
from .cache import MISS, RecordCache
from .store import Store, read_checkpoint, write_checkpoint

__all__ = ["TablePartition", "TableNotReady", "TableNotActive", "CHECKPOINT_DELTA", "CACHE_MAX_BYTES"]


class TableNotReady(AgentStreamError):
    """The table partition a key belongs to is not held (or not yet restored) by this worker."""


class TableNotActive(TableNotReady):
    """A write to a partition this worker holds only as a standby (or is still restoring): the
    changelog would get two writers, so the write is refused."""


_ACTIVE: Final = PartitionState.ACTIVE

ChangelogSink = Callable[["TablePartition", list[tuple[bytes, bytes | None]]], None]
"""Takes a partition's encoded writes for its changelog topic (the table manager's send queue)."""


CHECKPOINT_DELTA = 10_000  # changelog records between checkpoints written at commit
CHECKPOINT_MIN_INTERVAL = 30.0
"""Seconds between two checkpoints written at commit (restore, close and standby catch-up force one).
A checkpoint flushes the store's memtables to a new SST file: at Faust's commit cadence (seconds)
that made many small level-0 files, each round of which RocksDB merged into the whole level 1 (keys
land everywhere), so compaction grew with the state. 30 s is Kafka Streams' commit interval under
at_least_once, where its commit flushes; a crash replays at most that much more changelog."""

CACHE_MAX_BYTES: Final = 32 << 20
"""About the most a partition's write-back cache holds, encoded (keys and values): the cache is
bounded by ``table_cache_size`` entries AND by this, so that large values cannot make 10,000
entries a gigabyte. The cache holds Python values, so their size is learnt by encoding one
write in :data:`CACHE_PROBE_EVERY` (and the first); the entry bound follows the running mean."""
CACHE_PROBE_EVERY: Final = 64


class TablePartition:
    """One partition of one table on this worker: store, cache, and changelog position."""

    __slots__ = (
        "table",
        "partition",
        "store",
        "cache",
        "pending",
        "last_send",
        "changelog_offset",
        "checkpoint_path",
        "lifecycle",
        "epoch",
        "writer",
        "checkpointed",
        "checkpointed_at",
        "changelog",
        "cache_entries",
        "entry_bytes",
        "probe_in",
    )

    def __init__(self, table: Any, partition: int, store: Store, checkpoint_path: Path | None, cache_size: int) -> None:
        self.table = table
        self.partition = partition
        self.store = store
        self.cache = RecordCache(cache_size)
        self.cache_entries = cache_size  # the configured bound; cache.max_size may be lower (bytes)
        self.entry_bytes = 0.0  # running mean of an entry's encoded size (0: not probed yet)
        self.probe_in = 0  # writes until the next size probe
        self.pending: dict[bytes, bytes | None] = {}  # sent to the changelog, not yet in the store
        self.last_send: Delivery | None = None
        self.changelog_offset: int | None = None if checkpoint_path is None else read_checkpoint(checkpoint_path)
        self.checkpointed = self.changelog_offset
        self.checkpointed_at = time.monotonic()
        self.checkpoint_path = checkpoint_path
        # Opened as a standby: it serves reads and follows the changelog, and takes writes only
        # once restored as an active partition (standby -> restoring -> active).
        self.lifecycle: StateMachine[PartitionState] = StateMachine(
            PartitionState.STANDBY, PARTITION_TRANSITIONS, f"table {table.name} partition {partition}"
        )
        self.epoch = 0  # +1 each time the partition becomes active (restored): derived state is stale
        self.writer: Any = None  # exactly_once: the TaskId whose transaction carries this partition's writes
        # Where encoded writes go on their way to the changelog topic (the table manager's send
        # queue, drained at commit); None: kept in ``pending`` only (the harness, standalone use).
        self.changelog: ChangelogSink | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def state(self) -> PartitionState:
        return self.lifecycle.state

    @property
    def active(self) -> bool:
        """Assigned as the active copy (restoring or restored)."""
        return self.lifecycle.state in (PartitionState.ACTIVE, PartitionState.RESTORING)

    @property
    def ready(self) -> bool:
        """Restored and taking writes."""
        return self.lifecycle.state is _ACTIVE

    def restoring(self) -> None:
        self.lifecycle.to(PartitionState.RESTORING)

    def activate(self) -> None:
        """Restored: takes writes from now on (derived state built before is stale: epoch + 1)."""
        if self.lifecycle.state is PartitionState.STANDBY:
            self.lifecycle.to(PartitionState.RESTORING)
        self.lifecycle.to(_ACTIVE)
        self.epoch += 1

    def standby(self, *, dirty: bool = False) -> None:
        """Suspended or demoted: no more writes. ``dirty``: the last commit failed, so the cache and
        the pending writes (maybe never delivered) are dropped; the next activation restores."""
        if dirty:
            self.discard_uncommitted()
        self.lifecycle.to(PartitionState.STANDBY)

    def close(self, *, dirty: bool = False) -> None:
        if dirty:
            self.discard_uncommitted()
        if self.lifecycle.state is not PartitionState.CLOSED:
            self.lifecycle.to(PartitionState.CLOSED)
        self.store.close()

    def _refuse_write(self) -> None:
        where = "a standby" if self.lifecycle.state is PartitionState.STANDBY else self.lifecycle.state.value
        raise TableNotActive(
            f"table {self.table.name!r} partition {self.partition} is {where} on this worker: only the agent "
            "task that owns the partition may write it (a second writer would fork its changelog). Fix: write "
            "from the agent that reads the key's partition (send it a record), or read only here"
        )

    def get_bytes(self, key: bytes) -> tuple[bool, Any]:
        """(found, python value) looking through cache, pending writes, then the store."""
        value = self.cache.dirty.get(key, MISS)
        if value is not MISS:
            return value is not None, value
        raw = self.pending.get(key, MISS)
        if raw is MISS:
            raw = self.store.get(key)
        if raw is None:
            return False, None
        return True, self.table.value_codec.loads(raw)

    def set(self, key: bytes, value: Any) -> None:
        if self.lifecycle.state is not _ACTIVE:
            self._refuse_write()
        if self.table.eos:
            self.table._claim(self)
        if self.probe_in <= 0 and self.cache_entries > 0:
            self._probe_size(key, value)
        self.probe_in -= 1
        evicted = self.cache.put(key, value)
        if evicted:
            self._write_through(evicted)

    def _probe_size(self, key: bytes, value: Any) -> None:
        """Learn an entry's encoded size from this write and bound the cache's entries so that
        they hold about :data:`CACHE_MAX_BYTES`."""
        self.probe_in = CACHE_PROBE_EVERY
        size = len(key) + 16
        if value is not None:
            try:
                raw = self.table.value_codec.dumps(value)
            except Exception:  # the write fails where it always did (its write-through), not here
                return
            size += 0 if raw is None else len(raw)
        mean = self.entry_bytes
        mean = float(size) if mean == 0.0 else mean * 0.875 + size * 0.125
        self.entry_bytes = mean
        self.cache.max_size = max(1, min(self.cache_entries, int(CACHE_MAX_BYTES / mean)))

    def dirty(self) -> bool:
        return bool(len(self.cache) or self.pending)

    def flush_cache(self) -> None:
        entries = self.cache.flush()
        if entries:
            self._write_through(entries)

    def _write_through(self, entries: list[tuple[bytes, Any]]) -> None:
        """Entries leaving the cache: encoded once, kept in ``pending`` (read back until the store
        has them) and handed to the changelog sink, which sends them at commit."""
        dumps: Any = self.table.value_codec.dumps  # Any: a codec may give bytearray (normalised below)
        pending = self.pending
        items: list[tuple[bytes, bytes | None]] = []
        for key, value in entries:
            raw = None if value is None else dumps(value)
            if raw is not None:
                # A copy of exactly its length, since this value is held until the commit and
                # orjson (3.12+) returns a buffer of 4 KB or more whatever the length: 1M keys
                # evicted between commits held 4 GB. Also makes a bytearray from a codec bytes.
                raw = b"%b" % (raw,)
            pending[key] = raw
            items.append((key, raw))
        if self.changelog is not None:
            self.changelog(self, items)

    def write_store(self) -> None:
        """After the producer flushed: apply delivered changelog values to the store."""
        if self.pending:
            self.store.write_batch(self.pending.items())
            self.pending.clear()
        if self.last_send is not None and self.last_send.done() and not self.last_send.cancelled():
            exc = self.last_send.exception()
            if exc is None:
                self.changelog_offset = self.last_send.result().offset + 1
            self.last_send = None

    def discard_uncommitted(self) -> None:
        """After an aborted transaction or a failed commit: forget writes the changelog may lack."""
        self.cache.clear()
        self.pending.clear()
        self.last_send = None

    def checkpoint(self, force: bool = False) -> None:
        """Record the changelog offset the store is consistent with (persistent stores only).

        Like Kafka Streams, a commit writes one only when the store moved CHECKPOINT_DELTA records
        since the last, and at most every CHECKPOINT_MIN_INTERVAL seconds (a checkpoint flushes
        RocksDB's memtable to a new SST file); restore, close and standby catch-up force it. A stale checkpoint only means a longer tail to replay.
        """
        if self.changelog_offset is None or self.checkpoint_path is None:
            return
        if not force and self.checkpointed is not None:
            if self.changelog_offset - self.checkpointed < CHECKPOINT_DELTA:
                return
            if time.monotonic() - self.checkpointed_at < CHECKPOINT_MIN_INTERVAL:
                return
        self.store.flush()
        write_checkpoint(self.checkpoint_path, self.changelog_offset)
        self.checkpointed = self.changelog_offset
        self.checkpointed_at = time.monotonic()

    def apply_changelog(self, key: bytes, value: bytes | None, offset: int) -> None:
        """Restore/standby path: the changelog record is already durable."""
        if value is None:
            self.store.delete(key)
        else:
            self.store.put(key, value)
        self.changelog_offset = offset + 1
