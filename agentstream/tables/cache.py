"""Per-task write-back cache in front of the stores (Kafka Streams' record cache).

Repeated updates to a hot key between commits collapse into one store write and ONE changelog
record. The cache never decides *what* the final state is, only *when* it is written: every entry
leaves either through :meth:`RecordCache.put`'s eviction list or :meth:`RecordCache.flush`, and
the caller writes both to store + changelog, so final contents are independent of ``max_size``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["RecordCache", "MISS"]

S = TypeVar("S", bound=Hashable)
"""Whatever identifies a store in the caller (a name, an index, the store object...)."""

_MISS = object()
_NOTHING: list = []  # type: ignore[type-arg]  # put()'s usual answer: shared, never mutated (callers only read it)
MISS = _MISS
"""What :meth:`RecordCache.lookup` returns for a key it does not hold."""


class RecordCache(Generic[S]):
    """Dirty entries per ``(store_id, key)``; value ``None`` is a cached delete (tombstone).

    ``flush()`` returns entries in *first-write order since the last flush* (an update keeps the
    key's place, so write order per key is preserved and changelog order stays deterministic).
    An OrderedDict gives O(1) update-in-place and O(1) eviction of the oldest entry.
    """

    __slots__ = ("_entries", "max_size")

    def __init__(self, max_size: int = 10_000) -> None:
        if max_size < 0:
            raise ValueError(f"cache max_size must be >= 0, got {max_size}")
        self.max_size = max_size
        self._entries: OrderedDict[tuple[S, bytes], bytes | None] = OrderedDict()

    def put(self, store_id: S, key: bytes, value: bytes | None) -> list[tuple[S, bytes, bytes | None]]:
        """Cache a write; return the entries the caller must write through now (usually none).

        With ``max_size == 0`` the write itself is returned: write-through.
        """
        max_size = self.max_size
        if not max_size:
            return [(store_id, key, value)]
        entries = self._entries
        entries[(store_id, key)] = value
        if len(entries) <= max_size:
            return _NOTHING
        evicted: list[tuple[S, bytes, bytes | None]] = []
        while len(entries) > self.max_size:
            (sid, k), v = entries.popitem(last=False)
            evicted.append((sid, k, v))
        return evicted

    def get(self, store_id: S, key: bytes) -> tuple[bool, bytes | None]:
        """``(True, value)`` on a hit (value None = deleted); ``(False, None)``: ask the store."""
        value = self._entries.get((store_id, key), _MISS)
        if value is _MISS:  # a sentinel: misses are common, and raising KeyError is slow
            return False, None
        return True, value  # type: ignore[return-value]  # not _MISS, so bytes | None

    def lookup(self, store_id: S, key: bytes) -> object:
        """The cached value (None = deleted), or :data:`MISS`: :meth:`get` without the result tuple,
        for the per-record read path."""
        return self._entries.get((store_id, key), _MISS)

    def flush(self) -> list[tuple[S, bytes, bytes | None]]:
        """Hand over every dirty entry (first-write order) and empty the cache."""
        entries = self._entries
        out = [(sid, k, v) for (sid, k), v in entries.items()]
        entries.clear()
        return out

    def flush_view(self) -> list[tuple[S, bytes, bytes | None]]:
        """The dirty entries :meth:`flush` would return, left in place (for full-table reads)."""
        return [(sid, k, v) for (sid, k), v in self._entries.items()]

    def entries(self) -> list[tuple[S, bytes, bytes | None]]:
        """The dirty entries without flushing them (a table listing reads through the cache)."""
        return [(sid, k, v) for (sid, k), v in self._entries.items()]

    def clear(self) -> None:
        """Drop dirty entries unwritten (an aborted exactly-once transaction, a revoked task)."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
