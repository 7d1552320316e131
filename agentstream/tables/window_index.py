"""Where a windowed or session table partition finds the windows due to expire (or the sessions
due to close), in time order.

Expiry pops windows by ``(end, store key)`` as stream time passes, each once. Two indexes give
that order, chosen by the partition's store:

* :class:`HeapIndex` (memory stores, whose data is in memory anyway): a min-heap of ``(end,
  key)`` and the set of keys in it, about 170 bytes a window.
* :class:`StoreIndex` (persistent stores): one entry per window in the partition's own store,
  under a reserved prefix, ``WINDOW_INDEX_PREFIX | end | window key`` with an empty value, so
  RocksDB keeps them sorted by end and what stays in memory is a few integers and a bounded
  buffer of new entries and of entries taken but not yet deleted, per partition, whatever the
  number of keys. The first due window is kept in memory (``min_end``), so a stream-time advance
  with nothing due costs a comparison; when windows are due one range scan takes them all,
  starting where the last one ended (past its entries, deleted with the next batch).

Session tables (:mod:`agentstream.tables.sessions`) use :class:`StoreIndex` too, with a session's
close time (``end + gap + grace``) as the "end" and its session key as the window key.

The store entries are derived state, written to the store only (never to the changelog): a
window written by a record gets its entry when it is created; a window restored from the
changelog, or followed as a standby, gets it when the partition becomes active, since the
windowed table rebuilds its index from the partition's data then (every activation, as the heap
was rebuilt). An entry whose window is gone (deleted by the application, or an entry left by a
crash before its window was committed) is dropped when it comes due; two writes of one window
give the same entry key, so nothing is indexed twice.
"""

from __future__ import annotations

import heapq
import struct
from typing import TYPE_CHECKING, Final

from .query import WINDOW_INDEX_END, WINDOW_INDEX_PREFIX

if TYPE_CHECKING:
    from .partition import TablePartition

__all__ = ["WindowIndex", "HeapIndex", "StoreIndex", "exists", "index_key", "NOTHING_DUE"]

_END = struct.Struct(">Q")
_BIAS: Final = 1 << 63
_HEAD: Final = len(WINDOW_INDEX_PREFIX) + 8  # prefix + end: the window key follows
NOTHING_DUE: Final = (1 << 62) - 1
"""``min_end`` of an empty index: no window end is this late."""
READ_AHEAD: Final = 128
"""Entries a scan reads past the ones due and keeps, so that the next few stream-time advances take
theirs without a scan (sessions come due a few at a time, about one per record)."""
_NO_COVER: Final = -(1 << 62)
ADD_BATCH: Final = 1024
"""New entries and entries taken, buffered in memory before one store write (new entries are
written before a scan that they could be part of)."""


def index_key(end_ms: int, wk: bytes) -> bytes:
    """The store key of window ``wk``'s index entry (sorted by end, then by window key)."""
    return WINDOW_INDEX_PREFIX + _END.pack(end_ms + _BIAS) + wk


def exists(part: TablePartition, key: bytes) -> bool:
    """Whether ``key`` has a value in the partition, without decoding it."""
    hit, value = part.cache.get(key)
    if hit:
        return value is not None
    if key in part.pending:
        return part.pending[key] is not None
    return key in part.store


class WindowIndex:
    """The windows of one partition by end: :meth:`note` before a window is written, :meth:`due`
    to take the ones whose end has passed a limit."""

    __slots__ = ()

    def note(self, end_ms: int, wk: bytes, fresh: bool | None) -> None:
        """Window ``wk`` (ending at ``end_ms``) is about to be written. ``fresh``: whether it has
        no value yet, when the caller knows (None: look it up if the index needs to)."""
        raise NotImplementedError

    def add(self, end_ms: int, wk: bytes) -> None:
        """Index a window found in the partition's data (the rebuild)."""
        raise NotImplementedError

    def done_adding(self) -> None:
        """The rebuild has added every window."""

    def due(self, limit_ms: int) -> list[bytes]:
        """Remove and return the windows ending at or before ``limit_ms``, in (end, key) order."""
        raise NotImplementedError

    def stored(self) -> int:
        """Entries this index keeps in the partition's store (0 for an in-memory index)."""
        return 0

    def __len__(self) -> int:
        raise NotImplementedError


class HeapIndex(WindowIndex):
    """A min-heap by end and the set of its keys (memory stores: the data is in memory too)."""

    __slots__ = ("heap", "known")

    def __init__(self) -> None:
        self.heap: list[tuple[int, bytes]] = []
        self.known: set[bytes] = set()

    def note(self, end_ms: int, wk: bytes, fresh: bool | None) -> None:
        if wk not in self.known:
            self.known.add(wk)
            heapq.heappush(self.heap, (end_ms, wk))

    def add(self, end_ms: int, wk: bytes) -> None:
        self.known.add(wk)
        self.heap.append((end_ms, wk))

    def done_adding(self) -> None:
        heapq.heapify(self.heap)

    def due(self, limit_ms: int) -> list[bytes]:
        heap = self.heap
        out: list[bytes] = []
        while heap and heap[0][0] <= limit_ms:
            _, wk = heapq.heappop(heap)
            self.known.discard(wk)
            out.append(wk)
        return out

    def __len__(self) -> int:
        return len(self.heap)


class StoreIndex(WindowIndex):
    """Entries in the partition's store under :data:`WINDOW_INDEX_PREFIX` (persistent stores)."""

    __slots__ = ("part", "adds", "adds_min", "drops", "min_end", "count", "in_store", "floor", "ahead", "at", "upto")

    def __init__(self, part: TablePartition) -> None:
        self.part = part
        self.adds: list[bytes] = []  # new entries not yet in the store
        self.adds_min = NOTHING_DUE  # the earliest end among them
        # entries taken by due() and not yet deleted from the store: the scans start past them
        # (``floor``), so they are deleted with the next write of new entries, not one by one
        self.drops: list[bytes] = []
        self.min_end = NOTHING_DUE  # no entry ends earlier (stale entries aside, which due() drops)
        self.count = 0  # entries indexed and not yet due (an estimate: a re-created window counts again)
        self.in_store = 0  # of which written to the store
        # Where the next scan starts: no entry ends earlier, as every one up to a scan's limit was
        # taken by it (None: from the prefix's start, which also drops entries left by a previous
        # run). A scan from the start would step over the deleted entries' tombstones until a
        # compaction removes them: when entries come due a few at a time, as sessions do, that is
        # thousands of tombstones per scan.
        self.floor: int | None = None
        # read ahead by the last scan: ahead[at:] are every store entry ending from ``floor`` to
        # ``upto`` (_NO_COVER: none read, or a new entry ends within them)
        self.ahead: list[bytes] = []
        self.at = 0
        self.upto = _NO_COVER

    def note(self, end_ms: int, wk: bytes, fresh: bool | None) -> None:
        if fresh is None:
            fresh = not exists(self.part, wk)
        if fresh:
            self.add(end_ms, wk)

    def add(self, end_ms: int, wk: bytes) -> None:
        adds = self.adds
        adds.append(index_key(end_ms, wk))
        self.count += 1
        if end_ms < self.min_end:
            self.min_end = end_ms
        if end_ms < self.adds_min:
            self.adds_min = end_ms
        floor = self.floor
        if floor is not None and end_ms < floor:
            # due by the next scan, which flushes it first, and with it the taken entries it now
            # starts before
            self.floor = end_ms
        if len(adds) + len(self.drops) >= ADD_BATCH:
            self._flush()

    def done_adding(self) -> None:
        self._flush()

    def _flush(self) -> None:
        """One store write: the taken entries deleted, then the new ones (a re-added entry stays)."""
        adds, drops = self.adds, self.drops
        if not adds and not drops:
            return
        if self.adds_min <= self.upto:  # new entries among those read ahead: read them again
            self.upto = _NO_COVER
            self.ahead = []
        store = self.part.store
        if drops:
            keys = drops + adds
            values: list[bytes | None] = [None] * len(drops)
            values.extend([b""] * len(adds))
            store.write_many(keys, values)
        else:
            store.write_many(adds, [b""] * len(adds))
        self.in_store = max(0, self.in_store + len(adds) - len(drops))
        self.adds = []
        self.adds_min = NOTHING_DUE
        self.drops = []

    def due(self, limit_ms: int) -> list[bytes]:
        out: list[bytes] = []
        if self.min_end > limit_ms:
            return out
        if self.adds_min <= limit_ms:
            self._flush()  # a new entry is due: the scan must see it (the flush drops the read-ahead)
        drops = self.drops
        floor = self.floor
        if limit_ms > self.upto:  # beyond what was read ahead: scan from where the last scan ended
            ahead: list[bytes] = []
            upto = NOTHING_DUE  # the scan reaches the end: every entry read
            for k, _ in self.part.store.items(
                WINDOW_INDEX_PREFIX if floor is None else index_key(floor, b""), WINDOW_INDEX_END
            ):
                if len(ahead) >= READ_AHEAD:
                    # read up to the end before this entry's (others may end with it, unread)
                    upto = _END.unpack_from(k, len(WINDOW_INDEX_PREFIX))[0] - _BIAS - 1
                    break
                ahead.append(k)
                if _END.unpack_from(k, len(WINDOW_INDEX_PREFIX))[0] - _BIAS > limit_ms:
                    continue
                ahead.pop()
                drops.append(k)
                out.append(k[_HEAD:])
            self.ahead, self.at, self.upto = ahead, 0, upto
        else:
            ahead = self.ahead
            at = self.at
            while at < len(ahead):
                k = ahead[at]
                if _END.unpack_from(k, len(WINDOW_INDEX_PREFIX))[0] - _BIAS > limit_ms:
                    break
                drops.append(k)
                out.append(k[_HEAD:])
                at += 1
            self.at = at
        ahead, at = self.ahead, self.at
        if at < len(ahead):
            next_end = _END.unpack_from(ahead[at], len(WINDOW_INDEX_PREFIX))[0] - _BIAS
        elif self.upto == NOTHING_DUE:
            next_end = NOTHING_DUE
        else:
            next_end = self.upto + 1  # unknown past the read-ahead: a scan will tell
        self.min_end = min(next_end, self.adds_min)
        self.count = max(0, self.count - len(out))
        if floor is None or limit_ms >= floor:  # never lowered here: taken entries may lie below
            self.floor = limit_ms + 1
        if len(drops) + len(self.adds) >= ADD_BATCH:
            self._flush()
        return out

    def stored(self) -> int:
        return self.in_store

    def __len__(self) -> int:
        return self.count
