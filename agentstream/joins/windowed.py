"""Stream-stream windowed joins (Kafka Streams' KStream-KStream join), buffered in a changelogged table.

``stream.join(payments, within=timedelta(minutes=5), grace=...)`` (also ``left_join``,
``outer_join``). Per task (one partition number of both co-partitioned topics), with W = within,
G = grace, times in whole milliseconds of the *record timestamps*, and the records taken in the
task's order (lowest buffered timestamp first; ``max_task_idle`` decides how long a lagging
input is waited for):

* *Stream time* ST is the largest timestamp seen on either side (shared, as in Kafka Streams).
* A record at time t is **late** when ``t + W + G < ST`` (its own join window ``[t-W, t+W]`` has
  closed, grace included): it is dropped with no result at all, counted in ``late_dropped``.
* Otherwise it joins every buffered record of the other side with the same key bytes and
  ``|t - t_other| <= W`` (both ends included): one ``(left, right)`` result each, in the buffered
  records' time order, stamped with ``max(t, t_other)``. Then it is buffered itself.
* A buffered record at time t is kept while a record that is not late could still match it,
  i.e. until ``ST > t + 2W + G``; then it is deleted. If it never matched, a left (left side of a
  ``left_join``/``outer_join``) or right (``outer_join``) record then emits ``(value, None)`` /
  ``(None, value)``, stamped with its own time. This is Kafka Streams 3.x's "no spurious
  results" rule (unmatched results only after the window closed), with the close taken at the
  point where *no acceptable record can match any more*: Kafka Streams closes at ``t + W + G``
  although its lateness rule still admits matching records until ``t + 2W + G``, so it can emit
  ``(v, None)`` and later ``(v, o)``; here a record gets either matches or one unmatched result,
  never both. Expiry runs when stream time advances, before the advancing record is joined; an
  input that ends leaves its last records' unmatched results unemitted until time moves on.
* A record with a ``None`` key or value cannot join: left/outer emit it unmatched at once.
* A record stamped more than ``max_message_time_difference`` ahead of the wall clock (default a
  day; 0 disables the bound, as for windowed tables) is dropped, counted in ``future_dropped`` and
  logged (rate-limited): taken as stream time it would close every window and make every later
  record late, and restarts would not help (the stream time is stored). A stored stream time
  beyond that bound (written before the bound existed) is clamped when the buffer is loaded.

Consequently the results are exactly a nested-loop join over the non-late records, plus the
unmatched records whose ``t + 2W + G`` is below the final stream time: deterministic for
replayed input whenever the task order is (tests/unit/joins/test_joins_stream_stream.py checks it
against such a reference, with late and out-of-order input).

Both sides live in one internal table, ``<app>-<agent>-join-<topic>`` (changelog topic
``<app>-<agent>-join-<topic>-changelog``), so a restarted or failed-over task gets its buffers and
stream time back through the normal restore. The index of the buffered records (to find a record's
matches, and to close records in time order) is derived from the table, rebuilt whenever its
partition becomes active:

* memory store (:class:`_Buffers`): in memory, the records (key, time, matched) and their values up to
  :data:`VALUES_MAX_BYTES`: past it the oldest records' values (raw and decoded) are dropped from
  memory, counted in ``values_spilled`` and logged, and read back from the buffer table when one of
  them matches or closes unmatched, so a large buffer costs reads, never results;
* persistent store (:class:`_StoreBuffers`): in the store, as store-only entries under the reserved
  index range of :mod:`agentstream.tables.window_index` (never in the changelog; left out of the
  table's reads and key counts): a :class:`~agentstream.tables.window_index.StoreKeys` set ordered
  like the buffer keys (side, key, time, offset: a record's matches are one range scan) and a
  :class:`~agentstream.tables.window_index.StoreIndex` by time. No value is held: records are read
  from the buffer table when they match or close, so the Python memory does not grow with the
  buffered records (a bounded batch of index changes per partition).

Keys: side tag, key bytes, timestamp and the
record's offset, so a record handled again after a crash (at-least-once) overwrites its own entry
instead of being buffered twice (it may emit its matches again: duplicates, never losses).
"""

from __future__ import annotations

import bisect
import collections
import heapq
import logging
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from ..clock import clock_for
from ..drop_count import DropCount
from ..events import Event
from ..tables.partition import TableNotReady, TablePartition
from ..tables.query import WINDOW_INDEX_PREFIX, live_entries
from ..tables.store import MemoryStore
from ..tables.window_index import StoreIndex, StoreKeys, drop_entries
from ..transport.message import Message
from .core import result_event

if TYPE_CHECKING:
    from ..tables.table import Table
    from ..types import AppT as App  # the App's interface: app.py imports this module

log = logging.getLogger(__name__)

__all__ = ["StreamStreamJoin", "STREAM_TIME_KEY"]

LEFT, RIGHT = 0, 1
_TAGS = (b"L", b"R")
STREAM_TIME_KEY = b"\xff\xff\xff\xffagentstream.join-stream-time"
"""Reserved buffer key holding the stream time (sorts after every tagged key)."""

_LEN = struct.Struct(">I")
_TS = struct.Struct(">Q")
_UID = struct.Struct(">q")
_TOPIC_LEN = struct.Struct(">H")
_BIAS = 1 << 63
VALUES_MAX_BYTES = 64 << 20
"""About the most one join holds in memory of its buffered records' values (raw bytes, a decoded
value counted at its raw size again); beyond it the oldest are read back from the buffer table
when needed (its store holds every buffered record)."""


def buffer_key(side: int, kb: bytes, ts_ms: int, uid: int) -> bytes:
    return _TAGS[side] + _LEN.pack(len(kb)) + kb + _TS.pack(ts_ms + _BIAS) + _UID.pack(uid)


def parse_buffer_key(raw: bytes) -> tuple[int, bytes, int, int]:
    """``(side, key bytes, ts_ms, uid)``; ValueError for anything else (the stream-time entry)."""
    tag = raw[:1]
    if tag not in _TAGS or len(raw) < 21:
        raise ValueError(f"not a join buffer key: {raw!r}")
    (n,) = _LEN.unpack_from(raw, 1)
    if len(raw) != 1 + 4 + n + 16:
        raise ValueError(f"not a join buffer key: {raw!r}")
    (ts,) = _TS.unpack_from(raw, 5 + n)
    (uid,) = _UID.unpack_from(raw, 13 + n)
    return _TAGS.index(tag), raw[5 : 5 + n], ts - _BIAS, uid


def _buffer_value(matched: bool, topic: str, raw: bytes) -> bytes:
    t = topic.encode()
    return (b"\x01" if matched else b"\x00") + _TOPIC_LEN.pack(len(t)) + t + raw


def _parse_value(data: bytes) -> tuple[bool, str, bytes]:
    (n,) = _TOPIC_LEN.unpack_from(data, 1)
    return data[0] == 1, data[3 : 3 + n].decode(), data[3 + n :]


class _Entry:
    """One buffered record."""

    __slots__ = ("side", "kb", "ts", "uid", "topic", "raw", "matched", "skey", "value", "decoded", "charge")

    def __init__(
        self, side: int, kb: bytes, ts: int, uid: int, topic: str, raw: bytes, matched: bool, skey: bytes
    ) -> None:
        self.side, self.kb, self.ts, self.uid = side, kb, ts, uid
        self.topic, self.matched, self.skey = topic, matched, skey
        self.raw: bytes | None = raw  # None: spilled (read back from the buffer table when needed)
        self.value: Any = None
        self.decoded = False
        self.charge = 0  # bytes counted against the join's VALUES_MAX_BYTES while its values are held

    def order(self) -> tuple[int, int]:
        return self.ts, self.uid


class _Index:
    """The index of one buffer partition's records: by side, key and time (to find a record's
    matches) and by time (to close records as stream time passes)."""

    __slots__ = ("part", "epoch", "stream_ms")

    holds_values: ClassVar[bool] = True
    """Whether the records' values are kept in memory (under VALUES_MAX_BYTES) with the index."""

    def __init__(self, part: TablePartition) -> None:
        self.part = part
        self.epoch: int = part.epoch
        self.stream_ms: int | None = None

    def add(self, e: _Entry) -> None:
        """Index a buffered record."""
        raise NotImplementedError

    def find(self, skey: bytes) -> _Entry | None:
        """The buffered record under ``skey``, if any."""
        raise NotImplementedError

    def others(self, side: int, kb: bytes, lo: int, hi: int) -> list[_Entry]:
        """The buffered records of ``side`` with key ``kb`` and ``lo <= ts <= hi``, in (ts, uid) order."""
        raise NotImplementedError

    def due(self, limit: int) -> list[_Entry]:
        """Remove from the index and return the records with ``ts < limit``, in (ts, side, key) order."""
        raise NotImplementedError

    def held(self) -> list[_Entry]:
        """The records whose values the index keeps in memory (released when it is rebuilt)."""
        return []

    def stored(self) -> int:
        """Entries the index keeps in the partition's store (0 for an in-memory index)."""
        return 0


class _Buffers(_Index):
    """In memory (memory stores, whose data is in memory anyway): per side and key, entries in
    time order; a heap by time."""

    __slots__ = ("by_key", "entries", "heap")

    def __init__(self, part: TablePartition) -> None:
        super().__init__(part)
        self.by_key: tuple[dict[bytes, list[_Entry]], dict[bytes, list[_Entry]]] = ({}, {})
        self.entries: dict[bytes, _Entry] = {}
        self.heap: list[tuple[int, int, bytes]] = []

    def add(self, e: _Entry) -> None:
        self.entries[e.skey] = e
        bisect.insort(self.by_key[e.side].setdefault(e.kb, []), e, key=_Entry.order)
        heapq.heappush(self.heap, (e.ts, e.side, e.skey))

    def find(self, skey: bytes) -> _Entry | None:
        return self.entries.get(skey)

    def others(self, side: int, kb: bytes, lo: int, hi: int) -> list[_Entry]:
        lst = self.by_key[side].get(kb)
        out: list[_Entry] = []
        if lst:
            for i in range(bisect.bisect_left(lst, (lo, -_BIAS), key=_Entry.order), len(lst)):
                e = lst[i]
                if e.ts > hi:
                    break
                out.append(e)
        return out

    def due(self, limit: int) -> list[_Entry]:
        heap = self.heap
        out: list[_Entry] = []
        while heap and heap[0][0] < limit:
            _, _, skey = heapq.heappop(heap)
            e = self.entries.pop(skey, None)
            if e is None:
                continue
            lst = self.by_key[e.side][e.kb]
            lst.remove(e)
            if not lst:
                del self.by_key[e.side][e.kb]
            out.append(e)
        return out

    def held(self) -> list[_Entry]:
        return list(self.entries.values())


_INDEX_KEYS = WINDOW_INDEX_PREFIX + b"K"  # | buffer key: by side, key bytes, time, offset
_INDEX_KEYS_END = WINDOW_INDEX_PREFIX + b"L"
_INDEX_TIMES = WINDOW_INDEX_PREFIX + b"T"  # | time | buffer key: by time (closing)
_INDEX_TIMES_END = WINDOW_INDEX_PREFIX + b"U"
_TS_MAX = (1 << 64) - 1


def _group(side: int, kb: bytes) -> bytes:
    """The leading bytes of the buffer keys of one side and key (before the time)."""
    return _TAGS[side] + _LEN.pack(len(kb)) + kb


def _group_of(skey: bytes) -> bytes:
    """:func:`_group` of a buffer key."""
    return skey[: 5 + _LEN.unpack_from(skey, 1)[0]]


class _StoreBuffers(_Index):
    """In the partition's store (persistent stores): two sets of store-only entries under the
    reserved index range (:mod:`agentstream.tables.window_index`), by key and by time, and no
    values: a record is read from the buffer table (its cache, pending writes, then the store)
    when it matches or closes. What stays in memory is a bounded batch of new entries."""

    __slots__ = ("keys", "times")

    holds_values: ClassVar[bool] = False

    def __init__(self, part: TablePartition) -> None:
        super().__init__(part)
        self.keys = StoreKeys(part, _INDEX_KEYS, _INDEX_KEYS_END)
        self.times = StoreIndex(part, _INDEX_TIMES, _INDEX_TIMES_END)

    def add(self, e: _Entry) -> None:
        self.keys.add(e.skey, _group(e.side, e.kb))
        self.times.add(e.ts, e.skey)

    def find(self, skey: bytes) -> _Entry | None:
        found, stored = self.part.get_bytes(skey)
        if not found or not isinstance(stored, bytes) or len(stored) < 3:
            return None
        side, kb, ts, uid = parse_buffer_key(skey)
        matched, topic, raw = _parse_value(stored)
        return _Entry(side, kb, ts, uid, topic, raw, matched, skey)

    def others(self, side: int, kb: bytes, lo: int, hi: int) -> list[_Entry]:
        group = _group(side, kb)
        first = _TS.pack(min(max(lo + _BIAS, 0), _TS_MAX))
        past = _TS.pack(min(max(hi + 1 + _BIAS, 0), _TS_MAX))
        out: list[_Entry] = []
        stale: list[bytes] = []
        for skey in self.keys.scan(group, group + first, group + past):
            e = self.find(skey)
            if e is None:  # an entry left by a crash before its record was committed
                stale.append(skey)
            else:
                out.append(e)
        if stale:
            self.keys.remove(stale, [group] * len(stale))
        return out

    def due(self, limit: int) -> list[_Entry]:
        skeys = self.times.due(limit - 1)
        out: list[_Entry] = []
        for skey in skeys:
            e = self.find(skey)
            if e is not None:
                out.append(e)
        self.keys.remove(skeys, [_group_of(k) for k in skeys])
        return out

    def stored(self) -> int:
        return self.times.stored() + self.keys.in_store


def _raw_entries(part: TablePartition) -> Iterator[tuple[bytes, bytes]]:
    """Every live ``(key, value bytes)`` of the partition (the join writes bytes, so cached values are bytes too)."""
    for k, v, _ in live_entries(part, reserved=True):
        yield k, v


class StreamStreamJoin:
    """The join state machine of one task (see the module docstring for the semantics)."""

    def __init__(self, app: App, table: Table, other: str, kind: str, within_ms: int, grace_ms: int) -> None:
        self.app = app
        self.table = table
        self.right_topics = frozenset({other})
        self.within = within_ms
        self.grace = grace_ms
        self.emits = (kind in ("left", "outer"), kind == "outer")
        self.late = DropCount()
        self.future = DropCount()  # records too far ahead of the wall clock (max_message_time_difference)
        self._bufs: dict[int, _Index] = {}
        self.max_value_bytes = VALUES_MAX_BYTES
        self.values_held = 0  # bytes of buffered values in memory (see VALUES_MAX_BYTES)
        self.spilled = DropCount()  # buffered records whose values were dropped from memory
        self.values_reread = 0  # reads of spilled values back from the buffer table
        self.values_unreadable = 0  # spilled values missing from the table when needed (logged)
        self._held: collections.deque[_Entry] = collections.deque()  # entries holding values, oldest first
        table._index_entries = self.index_entries  # its store-only entries are not the table's keys

    # -- state ----------------------------------------------------------------------------------
    def _part(self, partition: int) -> TablePartition:
        part = self.table.parts.get(partition)
        if part is None:
            if self.app.worker is not None:
                raise TableNotReady(f"join buffer {self.table.name!r} partition {partition} is not on this worker")
            # agent.test_context(): no worker opens partitions, so keep the buffer in memory.
            part = TablePartition(self.table, partition, MemoryStore(), None, 0)
            part.activate()
            self.table.parts[partition] = part
        return part

    def buffers(self, partition: int) -> _Index:
        """The partition's index, rebuilt when the partition was (re)opened or restored."""
        part = self._part(partition)
        b = self._bufs.get(partition)
        if b is not None and b.part is part and b.epoch == part.epoch:
            return b
        if b is not None:
            for old in b.held():
                self._release(old)
        b = self._build(part)
        self._bufs[partition] = b
        return b

    def _build(self, part: TablePartition) -> _Index:
        """The index of ``part``, from its data: in memory for a memory store, in the store (its
        old entries dropped first: they may be stale) for a persistent one."""
        persistent = bool(getattr(part.store, "persistent", False))
        b: _Index
        if persistent:
            drop_entries(part, _INDEX_KEYS, _INDEX_KEYS_END)
            drop_entries(part, _INDEX_TIMES, _INDEX_TIMES_END)
            b = _StoreBuffers(part)
        else:
            b = _Buffers(part)
        stored: bytes | None = None
        ahead: list[bytes] = []
        latest: int | None = None
        bound = self._future_bound()
        for k, v in _raw_entries(part):
            if k == STREAM_TIME_KEY:
                stored = v
                continue
            try:
                side, kb, ts, uid = parse_buffer_key(k)
            except ValueError:
                continue
            if bound is not None and ts > bound:  # buffered before the bound existed
                ahead.append(k)
                continue
            if latest is None or ts > latest:
                latest = ts
            if persistent:  # the value stays in the store: parse the key only
                e = _Entry(side, kb, ts, uid, "", b"", False, k)
                b.add(e)
                continue
            matched, topic, raw = _parse_value(v)
            e = _Entry(side, kb, ts, uid, topic, raw, matched, k)
            b.add(e)
            self._hold(e)
        if isinstance(b, _StoreBuffers):
            b.keys.flush()
            b.times.done_adding()
        for k in ahead:
            part.set(k, None)
        self.future.total += len(ahead)  # logged by _loaded_stream_time
        b.stream_ms = self._loaded_stream_time(part.partition, stored, latest, bound, len(ahead))
        return b

    def index_entries(self, part: TablePartition) -> int:
        """Entries the join's index keeps in the partition's store (what a key count leaves out)."""
        b = self._bufs.get(part.partition)
        return b.stored() if b is not None and b.part is part else 0

    @property
    def late_dropped(self) -> int:
        """Records dropped late (older than stream time minus within + grace)."""
        return self.late.total

    @property
    def future_dropped(self) -> int:
        """Records dropped as too far ahead of the wall clock (max_message_time_difference)."""
        return self.future.total

    @property
    def values_spilled(self) -> int:
        """Buffered records whose values were dropped from memory (read back when needed)."""
        return self.spilled.total

    def _future_bound(self) -> int | None:
        """The latest acceptable record time (ms): the wall clock plus ``max_message_time_difference``."""
        limit = float(getattr(self.app.settings, "max_message_time_difference", 0.0) or 0.0)
        return None if limit <= 0 else int((clock_for(self.app).time() + limit) * 1000)

    def _loaded_stream_time(
        self, partition: int, raw: bytes | None, latest: int | None, bound: int | None, ahead: int
    ) -> int | None:
        """The stored stream time, unless it is missing, not a number or beyond ``bound`` (stored
        before the bound existed): then the latest buffered record's time (None: none buffered), a
        lower bound of the true stream time that makes no acceptable record late."""
        try:
            stored = None if raw is None else int(raw)
        except ValueError:
            stored = None
        if stored is not None and (bound is None or stored <= bound):
            return stored
        fallback = latest
        if raw is not None:
            log.warning(
                "join %s partition %d: stored stream time %r is %s; using %s (the latest buffered record's time)%s",
                self.table.name,
                partition,
                raw[:40],
                "not a number" if stored is None else "beyond the wall clock + max_message_time_difference",
                "none" if fallback is None else f"{fallback / 1000:.3f}",
                f"; dropped {ahead} buffered record(s) as far ahead" if ahead else "",
            )
        return fallback

    # -- values in memory, bounded -----------------------------------------------------------------
    def _hold(self, e: _Entry) -> None:
        """Count ``e``'s values against the bound; spill the oldest held ones past it."""
        raw = e.raw
        if raw is None:
            return
        e.charge = len(raw) * (2 if e.decoded else 1) + 1
        self.values_held += e.charge
        self._held.append(e)
        if self.values_held > self.max_value_bytes:
            self._spill()

    def _release(self, e: _Entry) -> None:
        """``e`` left the buffer: its values no longer count."""
        self.values_held -= e.charge
        e.charge = 0
        held = self._held
        while held and held[0].charge == 0:
            held.popleft()

    def _spill(self) -> None:
        held = self._held
        n = 0
        while self.values_held > self.max_value_bytes and held:
            e = held.popleft()
            if e.charge == 0:
                continue  # left the buffer already
            self.values_held -= e.charge
            e.charge = 0
            e.raw, e.value, e.decoded = None, None, False
            n += 1
        reported = self.spilled.add(n)
        if reported:
            log.warning(
                "join %s: %d buffered record value(s) dropped from memory since the last warning (%d in total; "
                "the bound is %d bytes): they are read back from the buffer table when they match or close",
                self.table.name,
                reported,
                self.spilled.total,
                self.max_value_bytes,
            )

    def _raw(self, b: _Index, e: _Entry) -> bytes | None:
        """``e``'s value bytes: held, or read back from the buffer table (None: missing there, logged)."""
        if e.raw is not None:
            return e.raw
        self.values_reread += 1
        found, stored = b.part.get_bytes(e.skey)
        if found and isinstance(stored, bytes) and len(stored) >= 3:
            return _parse_value(stored)[2]
        self.values_unreadable += 1
        log.error(
            "join %s partition %d: buffered record %s@%d (time %d ms) is missing from the buffer table; "
            "it cannot join (%d such in total)",
            self.table.name,
            b.part.partition,
            e.topic,
            e.uid,
            e.ts,
            self.values_unreadable,
        )
        return None

    def _decode(self, b: _Index, e: _Entry) -> Any:
        """``e``'s decoded value (kept while its raw value is held); raises KeyError when it is
        missing from the buffer table (logged by :meth:`_raw`)."""
        if e.decoded:
            return e.value
        raw = self._raw(b, e)
        if raw is None:
            raise KeyError(e.skey)
        topic = self.app.topics.get(e.topic)
        value = raw if topic is None else topic.value_codec.loads(raw)
        if e.charge:  # held: keep the decoded value too, counted
            e.value, e.decoded = value, True
            e.charge += len(raw)
            self.values_held += len(raw)
            if self.values_held > self.max_value_bytes:
                self._spill()
        return value

    # -- the Joiner protocol ----------------------------------------------------------------------
    def on_left(self, event: Event) -> list[Event]:
        return self._handle(event, LEFT)

    def on_right(self, event: Event) -> list[Event]:
        return self._handle(event, RIGHT)

    def _pair(self, side: int, value: Any, other: Any) -> tuple[Any, Any]:
        return (value, other) if side == LEFT else (other, value)

    def _handle(self, event: Event, side: int) -> list[Event]:
        m = event.message
        kb, raw, t = m.key, m.value, m.timestamp_ms
        if kb is None or raw is None:
            return [result_event(event.key, self._pair(side, event.value, None), event)] if self.emits[side] else []
        bound = self._future_bound()
        if bound is not None and t > bound:
            self._too_far_ahead(event, bound)
            return []
        b = self.buffers(m.partition)
        st = b.stream_ms
        if st is not None and t + self.within + self.grace < st:
            self._late(event, st)
            return []
        out: list[Event] = []
        if st is None or t > st:
            b.stream_ms = t
            b.part.set(STREAM_TIME_KEY, b"%d" % t)
            self._expire(b, out)
        matched = False
        for e in b.others(1 - side, kb, t - self.within, t + self.within):
            try:
                other = self._decode(b, e)
            except KeyError:
                continue  # missing from the buffer table: logged and counted
            matched = True
            out.append(result_event(event.key, self._pair(side, event.value, other), event, max(t, e.ts)))
            if not e.matched:
                e.matched = True
                e_raw = self._raw(b, e)
                if e_raw is not None:
                    b.part.set(e.skey, _buffer_value(True, e.topic, e_raw))
        skey = buffer_key(side, kb, t, m.offset)
        existing = b.find(skey)
        if existing is not None:  # handled again after a crash: keep one entry
            if matched and not existing.matched:
                existing.matched = True
                b.part.set(skey, _buffer_value(True, existing.topic, raw))  # the same record: its value
        else:
            e = _Entry(side, kb, t, m.offset, m.topic, raw, matched, skey)
            b.add(e)
            b.part.set(skey, _buffer_value(matched, m.topic, raw))
            if b.holds_values:
                e.value, e.decoded = event.value, True
                self._hold(e)
        return out

    def _expire(self, b: _Index, out: list[Event]) -> None:
        """Delete buffered records no acceptable record can match any more; emit unmatched ones."""
        assert b.stream_ms is not None
        emits = self.emits
        for e in b.due(b.stream_ms - 2 * self.within - self.grace):  # expired: ts < limit
            if not e.matched and emits[e.side]:
                unmatched = self._unmatched(b, e)  # before the delete: a spilled value is read back
                if unmatched is not None:
                    out.append(unmatched)
            self._release(e)
            b.part.set(e.skey, None)

    def _unmatched(self, b: _Index, e: _Entry) -> Event | None:
        raw = self._raw(b, e)
        if raw is None:
            return None  # missing from the buffer table: logged and counted
        topic = self.app.topics.get(e.topic)
        key = e.kb if topic is None else topic.key_codec.loads(e.kb)
        value = e.value if e.decoded else raw if topic is None else topic.value_codec.loads(raw)
        message = Message(e.topic, b.part.partition, e.uid, e.ts, 0, e.kb, raw, None, -1, -1, ())
        return Event(key, self._pair(e.side, value, None), message)

    def _late(self, event: Event, st: int) -> None:
        log.debug(
            "join %s: dropped late record %s at %d ms (stream time %d ms, within %d ms, grace %d ms)",
            self.table.name,
            event.where(),
            event.message.timestamp_ms,
            st,
            self.within,
            self.grace,
        )
        reported = self.late.add()
        if reported:
            log.warning(
                "join %s: dropped %d late record(s) (%d in total): older than stream time minus within + grace (%.3fs)",
                self.table.name,
                reported,
                self.late.total,
                (self.within + self.grace) / 1000,
            )

    def _too_far_ahead(self, event: Event, bound: int) -> None:
        reported = self.future.add()
        if reported:
            log.warning(
                "join %s: dropped record %s at %.3f: more than max_message_time_difference=%ss ahead of the "
                "wall clock (%d such record(s) since the last warning, %d in total); as stream time it would "
                "make every later record late",
                self.table.name,
                event.where(),
                event.message.timestamp_ms / 1000,
                self.app.settings.max_message_time_difference,
                reported,
                self.future.total,
            )
