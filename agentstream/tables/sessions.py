"""Session windows: ``app.Table(name, default=int).session(gap, grace=...)``, with Kafka Streams' semantics.

.. code-block:: python

    visits = app.Table("visits", default=int).session(300, grace=60)

    @app.agent(clicks)
    async def count(stream):
        async for event in stream.events():
            visits[event.key] += 1        # the session this record starts, extends or bridges

A *session* of a key is the activity ``[start, end]`` (both inclusive, the times of its first and
last record) of records no more than ``gap`` seconds apart. A record at ``t`` joins every session
of its key with ``end >= t - gap`` and ``start <= t + gap`` (Kafka Streams' ``findSessions``): none
starts a session ``[t, t]``; one is extended; two or more (an out-of-order record that fills the
gap between them) are merged into one, their values folded with ``merge`` (``+`` by default for
numbers) before the record's own update applies.

Time is the record's timestamp; the *stream time* of a table partition is the largest one seen.
A session is *closed* once ``stream_time > end + gap + grace`` (Kafka Streams' close time: a
record up to ``gap`` after ``end`` could still extend it, and ``grace`` more is allowed for
disorder). A record whose merged session would already be closed is late: dropped and counted
in :attr:`SessionTable.late_dropped`. A closed session is deleted (a tombstone to the changelog)
and ``on_window_close((key, (start, end)), value)`` runs once, as for the other windowed tables.

Storage: each session is one store (and changelog) entry under
:func:`session_key` ``(key, start, end)``; extending or merging sessions deletes the old entries
and writes the new one, as Kafka Streams' session store does, so restore, standby replicas and the
write-back cache work unchanged. Stream time is kept under the reserved stream-time key, as
windowed tables keep it, so late-record decisions survive a restart.

Per partition the table finds a key's sessions and the sessions due to close, by store:

* memory store (its data is in memory anyway): a dict of every key's sessions and a min-heap by
  close time, rebuilt from the data whenever the partition is (re)restored;
* persistent store (RocksDB): a key's sessions are one contiguous run of store keys, read with a
  range scan (the write-back cache and pending writes over it); what stays in memory is the
  sessions of the keys read or written since the partition's last commit (forgotten whenever the
  partition has nothing unwritten). The close order is the windowed tables' store index
  (:class:`~agentstream.tables.window_index.StoreIndex`), one store-only entry per session under a
  reserved prefix sorted by close time, rebuilt when the partition becomes active and never in
  the changelog. So the worker's memory does not grow with the number of keys or sessions.

Final results (:meth:`SessionTable.final_results`): one
:class:`~agentstream.tables.final_results.WindowFinal` per key and session when the session
closes, through the suppression buffer of :mod:`agentstream.tables.final_results`. A session is
buffered under its key and start whenever a record writes it; the sessions a record merges into
another (or whose start an earlier record moved) leave the buffer in the same record's writes, so
only the session they became gets a final, with the merged value and bounds.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import numbers
import operator
import struct
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..drop_count import DropCount
from ..durations import Seconds
from ..durations import to_seconds as seconds
from ..events import Event, current_event
from ..exceptions import TopologyError
from .cache import MISS
from .final_results import FinalResults, declare_final_results
from .query import STREAM_TIME_KEY, live_entries
from .window_close import WindowCloseCalls
from .window_index import StoreIndex, exists
from .windowed import (
    CHANGELOG_ADDITIONAL_RETENTION_MS,
    WindowTimeError,
    _refuse_far_future,
    _StreamTimeMark,
    _WindowValueCodec,
)

if TYPE_CHECKING:
    from ..topics import Topic
    from .partition import TablePartition
    from .table import Table

log = logging.getLogger(__name__)

__all__ = [
    "SessionTable",
    "SessionWindows",
    "session_key",
    "parse_session_key",
    "session_key_range",
    "sessions",
    "refuse_windowing",
]

SessionRange = tuple[float, float]
MergeFn = Callable[[Any, Any], Any]


def _ms(secs: float) -> int:
    return round(secs * 1000)


# -- store keys ------------------------------------------------------------------------------------
#
# 4-byte big-endian len(key) | key | 8-byte (start_ms + 2**63) | 8-byte (end_ms + 2**63): the
# windowed tables' layout with the end added, so a key's sessions are one contiguous run sorted
# by start, whatever bytes the key holds. A session key is 8 bytes longer than a window key of
# the same key, so the two never parse as each other.

_LEN = struct.Struct(">I")
_TIMES = struct.Struct(">QQ")
_BIAS = 1 << 63


def session_key(key: bytes, start_ms: int, end_ms: int) -> bytes:
    """Store key of the session ``[start_ms, end_ms]`` of ``key``."""
    return _LEN.pack(len(key)) + key + _TIMES.pack(start_ms + _BIAS, end_ms + _BIAS)


def parse_session_key(raw: bytes) -> tuple[bytes, int, int]:
    """``(key bytes, start ms, end ms)``: the inverse of :func:`session_key`; ValueError otherwise."""
    if len(raw) < 20:
        raise ValueError(f"not a session key (too short): {raw[:60]!r}")
    (n,) = _LEN.unpack_from(raw, 0)
    if len(raw) != 4 + n + 16:
        raise ValueError(f"not a session key (length {n} does not match): {raw[:60]!r}")
    start, end = _TIMES.unpack_from(raw, 4 + n)
    return raw[4 : 4 + n], start - _BIAS, end - _BIAS


def session_key_range(key: bytes) -> tuple[bytes, bytes]:
    """``(lo, hi)`` for ``store.items(lo, hi)``: every session of ``key``."""
    prefix = _LEN.pack(len(key)) + key
    return prefix, prefix + b"\xff" * 17


# -- geometry ----------------------------------------------------------------------------------------


class SessionWindows:
    """An inactivity ``gap`` and a ``grace`` period, in seconds (Kafka Streams' SessionWindows)."""

    def __init__(self, gap: float, grace: float = 0.0) -> None:
        gap_ms, grace_ms = _ms(gap), _ms(grace)
        if gap_ms <= 0:
            raise ValueError(f"session gap must be at least 1 ms, got {gap!r}")
        if grace_ms < 0:
            raise ValueError(f"session grace must be >= 0, got {grace!r}")
        self.gap, self.grace = gap_ms / 1000, grace_ms / 1000
        self.gap_ms, self.grace_ms = gap_ms, grace_ms

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap}, grace={self.grace})"


# -- per-partition index -------------------------------------------------------------------------------


class _PartSessions:
    """Stream time and the live sessions of one table partition.

    ``by_key``: keys' sessions as ``[start_ms, end_ms]`` pairs sorted by start (they never
    overlap). Memory store: every key's, and ``due``, a ``(close_ms, key, start_ms, end_ms)``
    min-heap whose stale entries (a session since extended or merged) are skipped when popped.
    Persistent store (``index`` set): only the keys read or written since the partition last had
    nothing unwritten (the rest are read from the store), and ``index`` gives the close order
    from the store. Derived from the store, so rebuilt whenever the partition is (re)restored."""

    __slots__ = ("part", "epoch", "stream_ms", "by_key", "due", "index")

    def __init__(self, part: TablePartition) -> None:
        self.part = part
        self.epoch: int = getattr(part, "epoch", 0)
        self.stream_ms: int | None = None
        self.by_key: dict[bytes, list[tuple[int, int]]] = {}
        self.due: list[tuple[int, bytes, int, int]] = []
        # a persistent store keeps the close order (memory flat in the keys); a memory store's data is in memory anyway
        self.index: StoreIndex | None = StoreIndex(part) if getattr(part.store, "persistent", False) else None


def _stored_spans(part: TablePartition, kb: bytes) -> list[tuple[int, int]]:
    """The live sessions of ``kb`` in a persistent store, sorted by start: one range scan (a key's
    session keys are contiguous), less those the write-back cache or the pending writes delete.
    (Sessions written and not yet in the store are the caller's: ``by_key`` holds their keys.)"""
    lo, hi = session_key_range(kb)
    dirty, pending = part.cache.dirty, part.pending
    out: list[tuple[int, int]] = []
    for k, _ in list(part.store.items(lo, hi)):  # list(): the scan ends (and frees its iterator) here
        v: Any = dirty.get(k, MISS)
        if v is MISS:
            v = pending.get(k, MISS)
        if v is None:
            continue  # deleted, not yet written to the store
        try:
            key, start, end = parse_session_key(k)
        except ValueError:
            continue
        if key == kb:
            out.append((start, end))
    return out


class _SessionState:
    """What every view of one session table shares: geometry, merge, callback, partition indexes."""

    def __init__(
        self, table: Table, window: SessionWindows, merge: MergeFn, on_window_close: Callable[[Any, Any], Any] | None
    ) -> None:
        self.table = table
        self.window = window
        self.grace = window.grace
        self.merge = merge
        self.parts: dict[int, _PartSessions] = {}
        self.late = DropCount()
        self.close_calls = WindowCloseCalls(table.name, on_window_close, "session")
        self.callbacks: set[asyncio.Future[Any]] = self.close_calls.pending  # the commit waits for these
        self.closes_by_wall_clock = False  # sessions close by stream time only, as in Kafka Streams
        self._close_after_ms = window.gap_ms + window.grace_ms
        self.final: FinalResults | None = None  # final_results(): the suppression buffer
        table.value_codec = _WindowValueCodec(table.value_codec)

    is_session = True

    # -- what tables/query.py, the harness and the exporter read --------------------------------------
    def split_key(self, raw: bytes) -> tuple[bytes, SessionRange]:
        """``(key bytes, (start, end))`` of a session's store key; ValueError for other keys."""
        kb, start, end = parse_session_key(raw)
        return kb, (start / 1000, end / 1000)

    def index_entries(self, part: TablePartition) -> int:
        """Entries the partition's close index keeps in its store (what a key count leaves out)."""
        ps = self.parts.get(part.partition)
        return ps.index.stored() if ps is not None and ps.part is part and ps.index is not None else 0

    def windows(self, part: TablePartition) -> _PartSessions:
        """The partition's index, rebuilt from its data when the partition object or epoch changed."""
        ps = self.parts.get(part.partition)
        if ps is not None and ps.part is part and ps.epoch == getattr(part, "epoch", 0):
            if ps.index is not None and ps.by_key and not (part.pending or len(part.cache)):
                ps.by_key.clear()  # everything is in the store: read keys from there again
            return ps
        ps = _PartSessions(part)
        index = ps.index
        # A store index is written for a partition that takes writes: a standby's (which never
        # closes anything) is built when it becomes active, which bumps its epoch.
        indexing = index is not None and bool(getattr(part, "ready", True))
        latest_end: int | None = None
        after = self._close_after_ms
        for k, value, decoded in live_entries(part, reserved=True):
            if k == STREAM_TIME_KEY:
                ps.stream_ms = value.ms if decoded else int(value)
                continue
            try:
                kb, start, end = parse_session_key(k)
            except ValueError:
                continue
            if latest_end is None or end > latest_end:
                latest_end = end
            if index is None:
                ps.by_key.setdefault(kb, []).append((start, end))
                ps.due.append((end + after, kb, start, end))
            elif indexing:
                index.add(end + after, k)
        if index is None:
            for spans in ps.by_key.values():
                spans.sort()
            heapq.heapify(ps.due)
        else:
            index.done_adding()
        if ps.stream_ms is None and latest_end is not None:
            ps.stream_ms = latest_end  # every session end is a lower bound
        self.parts[part.partition] = ps
        return ps

    def _spans(self, ps: _PartSessions, kb: bytes, keep: bool = False) -> list[tuple[int, int]]:
        """The live sessions of ``kb`` sorted by start (not to be mutated). A persistent store's
        are read from the store unless known; ``keep``: remember them until the partition is clean
        (the record path, which reads a key and then writes it)."""
        spans = ps.by_key.get(kb)
        if spans is not None:
            return spans
        if ps.index is None:
            return []
        spans = _stored_spans(ps.part, kb)
        if keep:
            ps.by_key[kb] = spans
        return spans

    def stream_time(self, key: Any) -> float | None:
        kb = self.table._key_dumps(key)
        ps = self.windows(self.table._partition_for(kb, False))
        return None if ps.stream_ms is None else ps.stream_ms / 1000

    # -- reads ------------------------------------------------------------------------------------------
    def sessions(self, key: Any) -> dict[SessionRange, Any]:
        """``{(start, end): value}`` of the live sessions of ``key``, earliest first."""
        kb = self.table._key_dumps(key)
        return self.sessions_in(self.table._partition_for(kb, False), kb)

    def sessions_in(self, part: TablePartition, kb: bytes) -> dict[SessionRange, Any]:
        """``{(start, end): value}`` of the live sessions of the key ``kb`` in ``part``."""
        out: dict[SessionRange, Any] = {}
        for start, end in self._spans(self.windows(part), kb):
            found, value = part.get_bytes(session_key(kb, start, end))
            if found:
                out[(start / 1000, end / 1000)] = value
        return out

    def _joined(self, ps: _PartSessions, kb: bytes, ts_ms: int) -> list[tuple[int, int]]:
        """The sessions of ``kb`` a record at ``ts_ms`` joins (Kafka Streams' findSessions)."""
        gap = self.window.gap_ms
        return [(s, e) for s, e in self._spans(ps, kb, True) if e >= ts_ms - gap and s <= ts_ms + gap]

    def value_at(self, key: Any, ts_ms: int) -> tuple[bool, Any]:
        """``(found, value)`` of the session a record of ``key`` at ``ts_ms`` belongs to: the
        sessions it would join, folded with ``merge`` (found False when it starts a new one)."""
        kb = self.table._key_dumps(key)
        part = self.table._partition_for(kb, False)
        joined = self._joined(self.windows(part), kb, ts_ms)
        return self._fold(part, kb, joined)

    def _fold(self, part: TablePartition, kb: bytes, joined: list[tuple[int, int]]) -> tuple[bool, Any]:
        found, value = False, None
        for start, end in joined:
            hit, v = part.get_bytes(session_key(kb, start, end))
            if not hit:
                continue
            value = self.merge(value, v) if found else v
            found = True
        return found, value

    # -- writes -----------------------------------------------------------------------------------------
    def write(self, key: Any, ts: float, value: Any) -> bool:
        """Advance stream time to ``ts`` and store ``value`` as the session a record at ``ts``
        starts, extends or bridges (deleting the sessions it replaces). False (counted) when late."""
        table = self.table
        kb = table._key_dumps(key)
        part = table._partition_for(kb, True)
        ps = self.windows(part)
        ts_ms = _ms(ts)
        if ps.stream_ms is None or ts_ms > ps.stream_ms:
            _refuse_far_future(table, ts_ms)  # before any write: the record goes to the error policy
            ps.stream_ms = ts_ms
            part.set(STREAM_TIME_KEY, _StreamTimeMark(ts_ms))
        joined = self._joined(ps, kb, ts_ms)
        start = min([ts_ms] + [s for s, _ in joined])
        end = max([ts_ms] + [e for _, e in joined])
        if end + self._close_after_ms < ps.stream_ms:
            self._late(key, ts, ps.stream_ms)
        else:
            spans = [span for span in self._spans(ps, kb) if span not in joined]
            spans.append((start, end))
            spans.sort()
            ps.by_key[kb] = spans
            for s, e in joined:
                if (s, e) != (start, end):
                    part.set(session_key(kb, s, e), None)
            sk = session_key(kb, start, end)
            part.set(sk, value)
            if ps.index is None:
                heapq.heappush(ps.due, (end + self._close_after_ms, kb, start, end))
            else:  # a session already there keeps its entry (same close time, same key)
                ps.index.note(end + self._close_after_ms, sk, (start, end) not in joined)
            final = self.final
            if final is not None:  # the sessions merged away (or moved) get no final of their own
                for s, _ in joined:
                    if s != start:
                        final.removed(part.partition, kb, s)
                final.updated(part.partition, kb, start, end, value)
        if self.final is not None:  # emit the finals of the sessions closed at stream time
            self.final.advance(part.partition, ps.stream_ms)
        self.close_calls.run(self._close_due(ps))
        return end + self._close_after_ms >= ps.stream_ms

    @property
    def late_dropped(self) -> int:
        """Records dropped because the session they would join had closed."""
        return self.late.total

    @property
    def callback_errors(self) -> int:
        """on_window_close calls that raised (each logged)."""
        return self.close_calls.errors

    def _late(self, key: Any, ts: float, st: int) -> None:
        log.debug(
            "table %s: dropped late record for key %r at time %s (stream time %s, gap %ss, grace %ss)",
            self.table.name,
            key,
            ts,
            st / 1000,
            self.window.gap,
            self.grace,
        )
        reported = self.late.add()
        if reported:
            log.warning(
                "table %s: dropped %d late record(s) whose sessions had closed (%d in total; gap %ss, grace %ss)",
                self.table.name,
                reported,
                self.late.total,
                self.window.gap,
                self.grace,
            )

    # -- closing ------------------------------------------------------------------------------------------
    def _close_due(self, ps: _PartSessions) -> list[tuple[Any, Any]]:
        """Delete the sessions closed at the partition's stream time: ``((key, (start, end)), value)``."""
        st = ps.stream_ms
        heap = ps.due
        out: list[tuple[Any, Any]] = []
        if st is None:
            return out
        part = ps.part
        if ps.index is not None:
            return self._close_stored(ps, st)
        while heap and heap[0][0] < st:
            _, kb, start, end = heapq.heappop(heap)
            spans = ps.by_key.get(kb)
            if spans is None or (start, end) not in spans:
                continue  # since extended or merged into another session
            spans.remove((start, end))
            if not spans:
                del ps.by_key[kb]
            sk = session_key(kb, start, end)
            found, value = part.get_bytes(sk)
            if not found:
                continue
            part.set(sk, None)
            out.append(((self.table.key_codec.loads(kb), (start / 1000, end / 1000)), value))
        return out

    def _close_stored(self, ps: _PartSessions, st: int) -> list[tuple[Any, Any]]:
        """:meth:`_close_due` with the close order in the store: the sessions whose close time is
        before ``st``; an entry whose session is gone (extended, merged) is dropped. Without an
        ``on_window_close`` nothing is decoded and nothing returned."""
        assert ps.index is not None
        part = ps.part
        out: list[tuple[Any, Any]] = []
        loads = self.table.key_codec.loads
        want_values = self.close_calls.callback is not None
        for sk in ps.index.due(st - 1):  # closed once close < stream time
            if want_values:
                found, value = part.get_bytes(sk)
                if not found:
                    continue
            elif not exists(part, sk):
                continue  # since extended or merged into another session
            kb, start, end = parse_session_key(sk)
            part.set(sk, None)
            spans = ps.by_key.get(kb)
            if spans is not None:
                ps.by_key[kb] = [span for span in spans if span != (start, end)]
            if want_values:
                out.append(((loads(kb), (start / 1000, end / 1000)), value))
        return out

    # -- iteration ------------------------------------------------------------------------------------------
    def items(self) -> Iterator[tuple[tuple[Any, SessionRange], Any]]:
        kloads, vloads = self.table.key_codec.loads, self.table.value_codec.loads
        for part in list(self.table.parts.values()):
            for k, value, decoded in live_entries(part):
                try:
                    kb, window = self.split_key(k)
                except ValueError:
                    continue
                yield (kloads(kb), window), value if decoded else vloads(value)


def _record_ms(event: Event | None) -> int:
    event = event if event is not None else current_event()
    if event is None:
        raise WindowTimeError("this session-table operation needs the current event: call it inside an agent")
    return _ms(event.timestamp)


class SessionTable:
    """A table of ``(key, (start, end))`` -> value, one entry per session; see the module docstring.

    Inside an agent ``st[key]`` is the value of the session the current record belongs to (the
    sessions it bridges merged; the default when it starts a new one) and ``st[key] = v`` stores
    ``v`` as that session, so ``st[key] += 1`` counts the record into its session. Outside an agent
    ``st[key]`` is the key's latest session. :meth:`sessions` gives every live session of a key."""

    def __init__(self, state: _SessionState) -> None:
        self._state = state

    # -- configuration -----------------------------------------------------------------------------
    @property
    def table(self) -> Table:
        return self._state.table

    @property
    def name(self) -> str:
        return self._state.table.name

    @property
    def window(self) -> SessionWindows:
        return self._state.window

    @property
    def gap(self) -> float:
        return self._state.window.gap

    @property
    def grace(self) -> float:
        return self._state.window.grace

    @property
    def merge(self) -> MergeFn:
        return self._state.merge

    @property
    def changelog_topic(self) -> Any:
        return self._state.table.changelog_topic

    @property
    def late_dropped(self) -> int:
        """Records dropped because the session they belong to had closed."""
        return self._state.late_dropped

    @property
    def callback_errors(self) -> int:
        """``on_window_close`` calls that raised (each logged)."""
        return self._state.callback_errors

    # -- reads ----------------------------------------------------------------------------------------
    def _missing(self, key: Any) -> Any:
        default = self._state.table.default
        if default is not None:
            return default()
        raise KeyError(key)

    def __getitem__(self, key: Any) -> Any:
        event = current_event()
        if event is None:
            latest = self.sessions(key)
            return latest[max(latest)] if latest else self._missing(key)
        found, value = self._state.value_at(key, _ms(event.timestamp))
        return value if found else self._missing(key)

    def get(self, key: Any, default: Any = None) -> Any:
        """Like ``st[key]``, ``default`` when there is no session (the table's default is not used)."""
        event = current_event()
        if event is None:
            latest = self.sessions(key)
            return latest[max(latest)] if latest else default
        found, value = self._state.value_at(key, _ms(event.timestamp))
        return value if found else default

    def __contains__(self, key: Any) -> bool:
        """Inside an agent: whether the current record joins a session of ``key``; outside: any session."""
        event = current_event()
        if event is None:
            return bool(self.sessions(key))
        return self._state.value_at(key, _ms(event.timestamp))[0]

    def sessions(self, key: Any) -> dict[SessionRange, Any]:
        """``{(start, end): value}`` of every live session of ``key``, earliest first."""
        return self._state.sessions(key)

    def stream_time(self, key: Any) -> float | None:
        """Stream time of ``key``'s partition (None before its first record)."""
        return self._state.stream_time(key)

    # -- writes ------------------------------------------------------------------------------------------
    def __setitem__(self, key: Any, value: Any) -> None:
        """Store ``value`` as the session of the current record (late: dropped and counted)."""
        self._state.write(key, _record_ms(None) / 1000, value)

    # -- iteration ---------------------------------------------------------------------------------------
    def items(self) -> Iterator[tuple[tuple[Any, SessionRange], Any]]:
        """``((key, (start, end)), value)`` of every live session in the partitions held here."""
        return self._state.items()

    def keys(self) -> Iterator[tuple[Any, SessionRange]]:
        return (k for k, _ in self._state.items())

    def values(self) -> Iterator[Any]:
        return (v for _, v in self._state.items())

    def __iter__(self) -> Iterator[tuple[Any, SessionRange]]:
        return self.keys()

    def __len__(self) -> int:
        return sum(1 for _ in self._state.items())

    def as_dict(self) -> dict[tuple[Any, SessionRange], Any]:
        return dict(self._state.items())

    def final_results(self, topic: Any = None) -> Topic:
        """The topic that gets one :class:`~agentstream.tables.final_results.WindowFinal` per key and
        session once the session closes (stream time past end + gap + grace), with its value and
        bounds after every merge; a session merged into another gets none of its own. Durable
        through a changelogged suppression buffer (see agentstream.tables.final_results).
        ``topic``: a Topic, a name, or None for ``<table>-final``."""
        state = self._state
        if state.final is not None:
            raise TopologyError(
                f"table {self.name!r} already sends its final results to {state.final.topic.name!r}; "
                "keep the topic final_results() returned"
            )
        state.final = declare_final_results(
            state.table,
            topic,
            state._close_after_ms,
            stream_time=lambda part: state.windows(part).stream_ms,
            callbacks=state.callbacks,  # the set the commit's step 0 waits for (table._windowed.callbacks)
            end_inclusive=True,
        )
        return state.final.topic

    async def wait_callbacks(self) -> None:
        """Until every ``async`` on_window_close started so far has finished (tests, shutdown)."""
        while self._state.callbacks:
            await asyncio.gather(*list(self._state.callbacks), return_exceptions=True)

    def __repr__(self) -> str:
        return f"<SessionTable {self.name} gap={self.gap} grace={self.grace}>"


def _default_merge(table: Table) -> MergeFn:
    """``+`` when the table's default gives a number; otherwise the merge must be given."""
    sample: Any = None
    if table.default is not None:
        try:
            sample = table.default()
        except Exception:
            sample = None
    if isinstance(sample, numbers.Number) and not isinstance(sample, bool):
        return operator.add
    what = "no default" if table.default is None else f"default={table.default!r}, which gives {sample!r}"
    raise TopologyError(
        f"table {table.name!r}: session(merge=...) is required: two sessions a record bridges are merged into "
        f"one, and the table has {what}, not a number to add. Fix: pass merge=lambda a, b: ... combining "
        "two session values"
    )


def session_changelog_configs(window: SessionWindows) -> dict[str, str]:
    """Compacted (latest value per session) and deleted by time: a session's newest record is
    written at its end, and the session is deleted once stream time passes end + gap + grace; a
    day more as Kafka Streams adds for clock drift."""
    return {
        "cleanup.policy": "compact,delete",
        "retention.ms": str(window.gap_ms + window.grace_ms + CHANGELOG_ADDITIONAL_RETENTION_MS),
    }


def refuse_windowing(table: Table) -> None:
    """``tumbling()``/``hopping()``/``using_window()`` of a table that already has session windows:
    refused here, before the windowed tables' own check (which knows only its own window state)."""
    state: Any = getattr(table, "_windowed", None)
    if getattr(state, "is_session", False):
        raise TopologyError(
            f"table {table.name!r} is already windowed ({state.window!r}); keep the SessionTable that session() returned"
        )


def sessions(
    table: Table,
    gap: Seconds,
    *,
    grace: Seconds = 0.0,
    merge: MergeFn | None = None,
    on_window_close: Callable[[Any, Any], Any] | None = None,
) -> SessionTable:
    """Make ``table`` a session table (once): the implementation of ``Table.session()``."""
    existing = getattr(table, "_windowed", None)
    if existing is not None:
        raise TopologyError(
            f"table {table.name!r} is already windowed ({existing.window!r}); keep the table "
            "that tumbling()/hopping()/session() returned"
        )
    if table.is_global:
        raise TopologyError(f"global table {table.name!r} cannot have session windows")
    if merge is not None and not callable(merge):
        raise TopologyError(f"table {table.name!r}: session(merge=...) must be a function of two values, got {merge!r}")
    window = SessionWindows(seconds(gap), seconds(grace))
    state = _SessionState(table, window, merge if merge is not None else _default_merge(table), on_window_close)
    table._windowed = state
    changelog = table.changelog_topic.config
    for key, value in session_changelog_configs(window).items():
        changelog.setdefault(key, value)  # the table's extra_topic_configs win
    return SessionTable(state)
