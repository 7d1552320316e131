"""A table partition's write-back cache in front of its store (Kafka Streams' record cache).

Repeated updates to a hot key between commits collapse into one store write and ONE changelog
record. The cache never decides *what* the final state is, only *when* it is written: every entry
leaves either through :meth:`RecordCache.put`'s eviction list or :meth:`RecordCache.flush`, and
the caller writes both to store + changelog, so final contents are independent of ``max_size``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

__all__ = ["RecordCache", "MISS"]

_MISS: Final = object()
_NOTHING: Final[list] = []  # type: ignore[type-arg]  # put()'s usual answer: shared, never mutated (callers only read it)
MISS: Final = _MISS  # Final (as every constant the per-record kernels read): a C static when compiled
"""The default for ``RecordCache.dirty.get(key, MISS)``: the cache does not hold the key (the
per-record read path reads ``dirty`` inline; :meth:`RecordCache.get` is the tuple form)."""


class RecordCache:
    """Dirty entries of one store by key; value ``None`` is a cached delete (tombstone).

    One cache per store (a table partition's): entries are keyed by the key bytes alone, so the
    per-record read and write build no tuple. ``flush()`` returns entries in *first-write order
    since the last flush* (an update keeps the key's place, so write order per key is preserved
    and changelog order stays deterministic). An OrderedDict gives O(1) update-in-place and O(1)
    eviction of the oldest entry.
    """

    __slots__ = ("dirty", "max_size")

    def __init__(self, max_size: int = 10_000) -> None:
        if max_size < 0:
            raise ValueError(f"cache max_size must be >= 0, got {max_size}")
        self.max_size = max_size
        # key -> value (None: deleted). Public for the per-record read path (a table partition's
        # get reads it inline: ``dirty.get(key, MISS)``); written only through put/flush/clear.
        self.dirty: OrderedDict[bytes, object] = OrderedDict()

    def put(self, key: bytes, value: object) -> list[tuple[bytes, object]]:
        """Cache a write; return the entries the caller must write through now (usually none).

        With ``max_size == 0`` the write itself is returned: write-through.
        """
        entries = self.dirty
        entries[key] = value
        if len(entries) <= self.max_size:
            return _NOTHING
        return self.evict()

    def evict(self) -> list[tuple[bytes, object]]:
        """Remove and return the oldest entries past ``max_size`` (first written first): what a
        caller that wrote ``dirty[key]`` inline must write through when ``len(dirty) > max_size``."""
        entries = self.dirty
        max_size = self.max_size
        evicted: list[tuple[bytes, object]] = []
        while len(entries) > max_size:
            evicted.append(entries.popitem(last=False))
        return evicted

    def get(self, key: bytes) -> tuple[bool, object]:
        """``(True, value)`` on a hit (value None = deleted); ``(False, None)``: ask the store."""
        value = self.dirty.get(key, _MISS)
        if value is _MISS:  # a sentinel: misses are common, and raising KeyError is slow
            return False, None
        return True, value

    def flush(self) -> list[tuple[bytes, object]]:
        """Hand over every dirty entry (first-write order) and empty the cache."""
        entries = self.dirty
        out = list(entries.items())
        entries.clear()
        return out

    def entries(self) -> list[tuple[bytes, object]]:
        """The dirty entries, left in place (a table listing reads through the cache)."""
        return list(self.dirty.items())

    def clear(self) -> None:
        """Drop dirty entries unwritten (an aborted exactly-once transaction, a revoked task)."""
        self.dirty.clear()

    def __len__(self) -> int:
        return len(self.dirty)
