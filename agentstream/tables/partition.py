"""One partition of one table on one worker: its store, write-back cache, pending changelog
writes and changelog position. The :class:`~agentstream.tables.table.Table` declaration routes
each key to one of these; the worker's table manager opens, restores and closes them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import AgentStreamError
from ..transport.base import Delivery
from .cache import RecordCache
from .store import Store, read_checkpoint, write_checkpoint

if TYPE_CHECKING:
    from .table import Table

__all__ = ["TablePartition", "TableNotReady", "CHECKPOINT_DELTA"]


class TableNotReady(AgentStreamError):
    """The table partition a key belongs to is not held (or not yet restored) by this worker."""


CHECKPOINT_DELTA = 10_000  # changelog records between checkpoints written at commit


class TablePartition:
    """One partition of one table on this worker: store, cache, and changelog position."""

    __slots__ = ("table", "partition", "store", "cache", "pending", "last_send", "changelog_offset",
                 "checkpoint_path", "active", "_ready", "epoch", "writer", "checkpointed")

    def __init__(self, table: "Table", partition: int, store: Store, checkpoint_path: Path | None,
                 cache_size: int) -> None:
        self.table = table
        self.partition = partition
        self.store = store
        self.cache: RecordCache[int] = RecordCache(cache_size)
        self.pending: dict[bytes, bytes | None] = {}  # sent to the changelog, not yet in the store
        self.last_send: Delivery | None = None
        self.changelog_offset: int | None = None if checkpoint_path is None else read_checkpoint(checkpoint_path)
        self.checkpointed = self.changelog_offset
        self.checkpoint_path = checkpoint_path
        self.active = False
        self._ready = False
        self.epoch = 0  # +1 each time the partition becomes ready (restored): derived state is stale
        self.writer: Any = None  # exactly_once: the TaskId whose transaction carries this partition's writes

    @property
    def ready(self) -> bool:
        return self._ready

    @ready.setter
    def ready(self, value: bool) -> None:
        if value and not self._ready:
            self.epoch += 1
        self._ready = value

    def get_bytes(self, key: bytes) -> tuple[bool, Any]:
        """(found, python value) looking through cache, pending writes, then the store."""
        hit, value = self.cache.get(0, key)
        if hit:
            return value is not None, value
        if key in self.pending:
            raw = self.pending[key]
        else:
            raw = self.store.get(key)
        if raw is None:
            return False, None
        return True, self.table.value_codec.loads(raw)

    def set(self, key: bytes, value: Any) -> None:
        if self.table.eos:
            self.table._claim(self)
        evicted = self.cache.put(0, key, value)
        if evicted:
            self.table._send_changelog(self, evicted)

    def dirty(self) -> bool:
        return bool(len(self.cache) or self.pending)

    def flush_cache(self) -> None:
        entries = self.cache.flush()
        if entries:
            self.table._send_changelog(self, entries)

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
        """exactly_once, after an abort: forget writes the changelog never committed."""
        self.cache.clear()
        self.pending.clear()
        self.last_send = None

    def checkpoint(self, force: bool = False) -> None:
        """Record the changelog offset the store is consistent with (persistent stores only).

        Like Kafka Streams, a commit writes one only when the store moved CHECKPOINT_DELTA records
        since the last (a checkpoint flushes RocksDB's memtable to a new SST file); restore, close
        and standby catch-up force it. A stale checkpoint only means a longer tail to replay.
        """
        if self.changelog_offset is None or self.checkpoint_path is None:
            return
        if not force and self.checkpointed is not None and self.changelog_offset - self.checkpointed < CHECKPOINT_DELTA:
            return
        self.store.flush()
        write_checkpoint(self.checkpoint_path, self.changelog_offset)
        self.checkpointed = self.changelog_offset

    def apply_changelog(self, key: bytes, value: bytes | None, offset: int) -> None:
        """Restore/standby path: the changelog record is already durable."""
        if value is None:
            self.store.delete(key)
        else:
            self.store.put(key, value)
        self.changelog_offset = offset + 1
