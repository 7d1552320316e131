"""Where a windowed table partition finds the windows due to expire, in end order.

Expiry pops windows by ``(end, store key)`` as stream time passes, each once. Two indexes give
that order, chosen by the partition's store:

* :class:`HeapIndex` (memory stores, whose data is in memory anyway): a min-heap of ``(end,
  key)`` and the set of keys in it, about 170 bytes a window.
* :class:`StoreIndex` (persistent stores): one entry per window in the partition's own store,
  under a reserved prefix, ``WINDOW_INDEX_PREFIX | end | window key`` with an empty value, so
  RocksDB keeps them sorted by end and what stays in memory is a few integers and a bounded
  buffer of new entries per partition, whatever the number of keys. The first due window is kept
  in memory (``min_end``), so a stream-time advance with nothing due costs a comparison; when
  windows are due one range scan takes them all, starting at ``min_end`` (after the first scan,
  which starts at the prefix and drops whatever an earlier run left below it): RocksDB keeps the
  deleted entries as tombstones until a compaction, and a scan from the prefix stepped over all
  of them each time (a join expiring a record at every record spent a millisecond a record).

The store entries are derived state, written to the store only (never to the changelog): a
window written by a record gets its entry when it is created; a window restored from the
changelog, or followed as a standby, gets it when the partition becomes active, since the
windowed table rebuilds its index from the partition's data then (every activation, as the heap
was rebuilt). An entry whose window is gone (deleted by the application, or an entry left by a
crash before its window was committed) is dropped when it comes due; two writes of one window
give the same entry key, so nothing is indexed twice.

A stream-stream join's buffer (:mod:`agentstream.joins.windowed`) keeps its records' index the
same way, under sub-prefixes of the same reserved range: a :class:`StoreIndex` by record time
(what closes when), and a :class:`StoreKeys` set ordered by the record's own key (the buffered
records of one join key within a time range, by one range scan).

A windowed table's suppression buffer (:mod:`agentstream.tables.final_results`, a table of its
own) keeps its windows' close order in a :class:`StoreIndex` too, by close time: a buffered
window's close time can move (a session grows), so it takes :meth:`StoreIndex.due_ends` and drops
an entry whose close time is no longer its window's.
"""

from __future__ import annotations

import heapq
import struct
from typing import TYPE_CHECKING, Final

from .query import WINDOW_INDEX_END, WINDOW_INDEX_PREFIX

if TYPE_CHECKING:
    from .partition import TablePartition

__all__ = [
    "WindowIndex",
    "HeapIndex",
    "StoreIndex",
    "StoreKeys",
    "drop_entries",
    "exists",
    "index_key",
    "NOTHING_DUE",
]

_END = struct.Struct(">Q")
_BIAS: Final = 1 << 63
NOTHING_DUE: Final = (1 << 62) - 1
"""``min_end`` of an empty index: no window end is this late."""
ADD_BATCH: Final = 1024
"""New entries buffered in memory before one store write (they are written before any scan)."""
LOOKAHEAD: Final = 64
"""Entries a due scan reads past the limit and keeps, so the next expiries need no scan."""
_KEY_MAX: Final = (1 << 64) - 1
DROP_BATCH: Final = 1024
"""Entries deleted per store write by :func:`drop_entries`."""


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


def drop_entries(part: TablePartition, lo: bytes, hi: bytes) -> int:
    """Delete every store entry ``lo <= key < hi`` (store-only entries: nothing goes to the
    changelog), a batch at a time; returns how many there were."""
    store = part.store
    batch: list[bytes] = []
    n = 0
    for k, _ in store.items(lo, hi):  # a snapshot: the deletes below do not disturb it
        batch.append(k)
        if len(batch) >= DROP_BATCH:
            store.write_many(batch, [None] * len(batch))
            n += len(batch)
            batch = []
    if batch:
        store.write_many(batch, [None] * len(batch))
        n += len(batch)
    return n


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
    """Entries in the partition's store under :data:`WINDOW_INDEX_PREFIX` (persistent stores), or
    under ``prefix`` (up to ``end``, excluded), a sub-range of it, for another user of the store."""

    __slots__ = (
        "part",
        "adds",
        "adds_min",
        "gone",
        "min_end",
        "count",
        "in_store",
        "prefix",
        "end",
        "head",
        "scanned",
        "ahead",
        "ahead_at",
        "ahead_last",
    )

    def __init__(
        self, part: TablePartition, prefix: bytes = WINDOW_INDEX_PREFIX, end: bytes = WINDOW_INDEX_END
    ) -> None:
        self.part = part
        self.prefix = prefix
        self.end = end
        self.head = len(prefix) + 8  # prefix + end: the window key follows
        self.adds: list[bytes] = []  # new entries not yet in the store (at most ADD_BATCH)
        self.adds_min = NOTHING_DUE  # the earliest end among them
        # entries taken by due() not yet deleted from the store: all below min_end, where scans start
        self.gone: list[bytes] = []
        self.min_end = NOTHING_DUE  # no entry ends earlier (stale entries aside, which due() drops)
        self.scanned = False  # a due() scan ran: no entry of the store ends before min_end any more
        # What the last scan read, in key order: every store entry from ahead[ahead_at] up to
        # ahead_last (None: to the end of the index) until the next write of new entries.
        self.ahead: list[bytes] | None = None
        self.ahead_at = 0
        self.ahead_last: bytes | None = None
        self.count = 0  # entries indexed and not yet due (an estimate: a re-created window counts again)
        self.in_store = 0  # of which written to the store

    def note(self, end_ms: int, wk: bytes, fresh: bool | None) -> None:
        if fresh is None:
            fresh = not exists(self.part, wk)
        if fresh:
            self.add(end_ms, wk)

    def add(self, end_ms: int, wk: bytes) -> None:
        adds = self.adds
        adds.append(self.prefix + _END.pack(end_ms + _BIAS) + wk)
        self.count += 1
        if end_ms < self.min_end:
            self.min_end = end_ms
        if end_ms < self.adds_min:
            self.adds_min = end_ms
        if len(adds) >= ADD_BATCH:
            self._flush()

    def done_adding(self) -> None:
        self._flush()

    def _flush(self) -> None:
        adds, gone = self.adds, self.gone
        if gone:  # deletes first: an entry taken and added again since is added after its delete
            self.part.store.write_batch([*((k, None) for k in gone), *((k, b"") for k in adds)])
            self.in_store = max(0, self.in_store - len(gone)) + len(adds)
            self.adds, self.gone = [], []
        elif adds:
            self.part.store.write_many(adds, [b""] * len(adds))
            self.in_store += len(adds)
            self.adds = []
        self.adds_min = NOTHING_DUE
        self.ahead = None  # new entries may fall among those read

    def due(self, limit_ms: int) -> list[bytes]:
        head = self.head
        return [k[head:] for k in self._take(limit_ms)]

    def due_ends(self, limit_ms: int) -> list[tuple[int, bytes]]:
        """:meth:`due` with each entry's end: ``(end, window key)`` pairs, for a caller whose
        windows' ends can move (it drops an entry whose end is no longer its window's)."""
        at, head = len(self.prefix), self.head
        return [(_END.unpack_from(k, at)[0] - _BIAS, k[head:]) for k in self._take(limit_ms)]

    def _take(self, limit_ms: int) -> list[bytes]:
        """Remove and return the entries (whole store keys) ending at or before ``limit_ms``."""
        out: list[bytes] = []
        if self.min_end > limit_ms:
            return out
        if self.adds_min <= limit_ms or not self.scanned:
            self._flush()  # some new entries are due: in the store first (waiting ones are all later)
        bound = self.prefix + _END.pack(min(limit_ms + 1 + _BIAS, _KEY_MAX))  # the due entries sort below
        ahead = self.ahead
        last = self.ahead_last
        if ahead is None or (last is not None and last < bound):
            ahead = self._read(bound)
            last = self.ahead_last
        i = self.ahead_at
        n = len(ahead)
        gone = self.gone
        while i < n and ahead[i] < bound:
            k = ahead[i]
            gone.append(k)
            out.append(k)
            i += 1
        self.ahead_at = i
        self.count = max(0, self.count - len(out))
        at = len(self.prefix)
        if i < n:
            next_end = _END.unpack_from(ahead[i], at)[0] - _BIAS
        elif last is None:
            next_end = NOTHING_DUE
        else:  # read up to a later entry (none is left to take): nothing in the store ends earlier
            next_end = _END.unpack_from(last, at)[0] - _BIAS
        self.min_end = min(next_end, self.adds_min)
        if len(gone) >= ADD_BATCH:
            self._flush()
        return out

    def _read(self, bound: bytes) -> list[bytes]:
        """Read the entries from ``min_end`` on: all those below ``bound`` and :data:`LOOKAHEAD`
        more (kept as :attr:`ahead`)."""
        # entries are added at min_end or later: after the first scan, none is in the store below it
        start = self.prefix + _END.pack(self.min_end + _BIAS) if self.scanned else self.prefix
        self.scanned = True
        ahead: list[bytes] = []
        last: bytes | None = None
        past = 0
        for k, _ in self.part.store.items(start, self.end):
            ahead.append(k)
            if k >= bound:
                past += 1
                if past >= LOOKAHEAD:
                    last = k
                    break
        self.ahead, self.ahead_at, self.ahead_last = ahead, 0, last
        return ahead

    def stored(self) -> int:
        return self.in_store

    def __len__(self) -> int:
        return self.count


class StoreKeys:
    """A sorted set of store-only entries under ``prefix`` (persistent stores), read by range.

    Each entry is ``prefix | key`` with an empty value; every key belongs to a ``group`` (its
    leading bytes, which a :meth:`scan` names). Changes wait in memory (new entries by group,
    removed ones in a set; :data:`ADD_BATCH` in all at most) and are written in one batch; a scan
    merges them with what it reads from the store, so reading costs no write.
    """

    __slots__ = ("part", "prefix", "end", "waiting", "removed", "changes", "in_store")

    def __init__(self, part: TablePartition, prefix: bytes, end: bytes) -> None:
        self.part = part
        self.prefix = prefix
        self.end = end
        self.waiting: dict[bytes, list[bytes]] = {}  # group -> keys added, not yet in the store
        self.removed: set[bytes] = set()  # keys removed, maybe still in the store
        self.changes = 0  # entries in both
        self.in_store = 0  # entries written (an estimate: a re-added key counts again)

    def add(self, key: bytes, group: bytes) -> None:
        """Add ``key``, whose leading bytes are ``group``."""
        keys = self.waiting.get(group)
        if keys is None:
            self.waiting[group] = [key]
        else:
            keys.append(key)
        self.removed.discard(key)
        self.changes += 1
        if self.changes >= ADD_BATCH:
            self.flush()

    def remove(self, keys: list[bytes], groups: list[bytes]) -> None:
        """Remove ``keys`` (``groups``: the group of each, in the same order)."""
        waiting = self.waiting
        removed = self.removed
        for key, group in zip(keys, groups):
            held = waiting.get(group)
            if held is not None and key in held:
                left = [k for k in held if k != key]  # every add of it
                if left:
                    waiting[group] = left
                else:
                    del waiting[group]
            removed.add(key)  # also when it was waiting: an earlier add of it may be in the store
        self.changes += len(keys)
        if self.changes >= ADD_BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the waiting changes to the store."""
        if not self.changes:
            return
        prefix = self.prefix
        batch: list[tuple[bytes, bytes | None]] = [(prefix + k, None) for k in self.removed]
        dropped = len(batch)
        batch.extend((prefix + k, b"") for keys in self.waiting.values() for k in keys)
        if batch:
            self.part.store.write_batch(batch)
        self.in_store = max(0, self.in_store - dropped) + len(batch) - dropped
        self.waiting = {}
        self.removed = set()
        self.changes = 0

    def scan(self, group: bytes, lo: bytes, hi: bytes) -> list[bytes]:
        """The keys ``lo <= key < hi`` in ascending order; ``lo`` and ``hi`` start with ``group``."""
        skip = len(self.prefix)
        found = [k[skip:] for k, _ in self.part.store.items(self.prefix + lo, self.prefix + hi)]
        removed = self.removed
        if removed:
            found = [k for k in found if k not in removed]
        keys = self.waiting.get(group)
        if keys:
            new = [k for k in keys if lo <= k < hi]
            if new:
                found = sorted(set(found).union(new))
        return found

    def __len__(self) -> int:
        return self.in_store
