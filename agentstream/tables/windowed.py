"""Windowed tables: Faust's ``table.tumbling(...)`` API with Kafka Streams' window lifecycle.

.. code-block:: python

    views = app.Table("views", default=int).tumbling(60, expires=3600).relative_to_field("ts")

    @app.agent(topic)
    async def count(stream):
        async for view in stream:
            views[view.page] += 1                 # every window the record's time falls in
            print(views[view.page].value())       # the window of the table's time source

A :class:`WindowedTable` wraps an ordinary :class:`~agentstream.tables.table.Table`; it adds no
storage of its own. Store (and so changelog) keys are ``window_key(key_bytes, window_start)``,
so restore, standby replicas and the write-back cache work unchanged.

Per table partition the *stream time* is the largest record time written so far (the table's
time source: record timestamp, a value field, or the wall clock). A window is *closed* once
``stream_time >= end + grace``: writes to it are dropped (a record with no open window counts
in :attr:`WindowedTable.late_dropped`). It *expires* once ``end + max(expires, grace) <=
stream_time``: it is deleted (a tombstone goes to the changelog through the normal write path)
and, as in Faust, ``on_window_close((key, (start, end)), final_value)`` runs then, once.

Expiry is checked on every stream-time advance: each partition keeps its windows in an index
by end (:mod:`~agentstream.tables.window_index`: a min-heap for memory stores; for a persistent
store, entries in the store itself, so memory does not grow with the keys), so a check costs
O(1) when nothing is due (no timer). The index is rebuilt lazily from the store whenever the
partition has been (re)restored. A sync ``on_window_close`` runs inline after the record's own
writes, once the table's bookkeeping is done; an exception from it is logged with the key and
window (and counted in ``callback_errors``) and never undoes or skips the record. An ``async``
one is started as a task (not awaited before the commit; see :meth:`WindowedTable.wait_callbacks`).
Either may run again for the same window after a crash, like any processing since the last
commit.

Stream time itself is stored in the partition under a reserved key (not a window key, so
iteration skips it). Going through the cache, it costs one changelog record per commit, and it
makes late-record decisions survive a restart: without it a restored partition would accept
records for windows that had closed, or even expired, and silently re-create them from zero.
"""

from __future__ import annotations

import asyncio
import logging
import operator
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

from ..clock import clock_for
from ..codecs import Codec
from ..drop_count import DropCount
from ..durations import Seconds
from ..durations import to_seconds as seconds
from ..events import Event, current_event
from ..exceptions import AgentStreamError, SerializationError, TopologyError
from ..runtime import current_clock
from .final_results import declare_final_results
from .query import STREAM_TIME_KEY, live_entries
from .window_close import WindowCloseCalls
from .window_index import HeapIndex, StoreIndex, WindowIndex, exists
from .windows import (
    HoppingWindow,
    TumblingWindow,
    faust_window_key,
    parse_faust_window_key,
    parse_window_key,
    window_key,
)

if TYPE_CHECKING:
    from ..topics import Topic
    from .table import Table, TablePartition

log = logging.getLogger(__name__)

__all__ = [
    "WindowSet",
    "WindowedTable",
    "WindowTimeError",
    "Seconds",
    "WindowCloseCallback",
    "STREAM_TIME_KEY",
    "windowed_changelog_configs",
]

WindowRange = tuple[float, float]
WindowCloseCallback = Callable[[Any, Any], None | Awaitable[None]]
"""``on_window_close((key, (start, end)), final_value)``; may be ``async``."""
TimeSource = Callable[[Event | None], float]


class WindowTimeError(AgentStreamError):
    """A window operation needs a time its time source cannot give (e.g. no current event)."""


def _ms(secs: float) -> int:
    # The same rounding as windows.py: whole milliseconds, round not floor.
    return round(secs * 1000)


def _epoch(value: Any) -> float:
    """A time value as epoch seconds; naive datetimes are taken as UTC (deterministic)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return float(value.timestamp())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise WindowTimeError(f"window time must be epoch seconds or a datetime, got {value!r}")


# -- time sources ----------------------------------------------------------------------------


class FarFutureTimestamp(SerializationError):
    """A record's time lies further ahead of the wall clock than ``max_message_time_difference``.

    Letting it advance stream time would close and expire every window of the partition and
    make every later record late (Kafka's ``max.message.time.difference`` guards the same), so
    the record is refused before it writes anything and goes to the app's error policy."""


def _future_bound_ms(table: Table) -> int | None:
    limit = float(getattr(table.app.settings, "max_message_time_difference", 0.0) or 0.0)
    return None if limit <= 0 else _ms(clock_for(table.app).time() + limit)


def _refuse_far_future(table: Table, ts_ms: int) -> None:
    bound = _future_bound_ms(table)
    if bound is not None and ts_ms > bound:
        raise FarFutureTimestamp(
            f"table {table.name!r}: record time {ts_ms / 1000:.3f} is more than max_message_time_difference="
            f"{table.app.settings.max_message_time_difference}s ahead of the wall clock; not counted "
            "(it would expire every window of the partition)"
        )


def _need_event(event: Event | None) -> Event:
    event = event if event is not None else current_event()
    if event is None:
        raise WindowTimeError("this windowed-table operation needs the current event: call it inside an agent")
    return event


def _stream_time(event: Event | None) -> float:
    return _need_event(event).timestamp


def _wall_time(event: Event | None) -> float:
    return current_clock().time()


def _field_time(field: Any) -> TimeSource:
    """Time from the event's value: a Record field descriptor, a field name, or a callable."""
    name = getattr(field, "field", None)
    getter: Callable[[Any], Any]
    if isinstance(name, str) and hasattr(field, "getattr"):
        getter = field.getattr
    elif isinstance(field, str):
        attr = field

        def getter(value: Any) -> Any:
            return value[attr] if isinstance(value, Mapping) else getattr(value, attr)
    elif callable(field):
        getter = field
    else:
        raise TopologyError(f"relative_to_field() takes a Record field, a field name or a callable, got {field!r}")

    def source(event: Event | None) -> float:
        return _epoch(getter(_need_event(event).value))

    return source


# -- the stream-time entry -----------------------------------------------------------------------


class _StreamTimeMark:
    """Stream time as a cache value; the codec wrapper encodes it, whatever the table's codec."""

    __slots__ = ("ms",)

    def __init__(self, ms: int) -> None:
        self.ms = ms


class _WindowValueCodec:
    """The table's value codec plus the stream-time entry (which it may not be able to encode)."""

    def __init__(self, inner: Codec) -> None:
        self.inner = inner

    def dumps(self, obj: Any) -> bytes | None:
        if type(obj) is _StreamTimeMark:
            return b"%d" % obj.ms
        return self.inner.dumps(obj)

    def loads(self, data: bytes | None) -> Any:
        return self.inner.loads(data)


# -- per-partition window index ------------------------------------------------------------------


class _PartWindows:
    """Stream time and the live windows of one table partition, by window end.

    ``index`` holds the windows not yet expired, taken in end order as stream time passes, so a
    check costs O(1) when nothing is due: in memory for a memory store, in the store for a
    persistent one. Derived from the store, so rebuilt whenever the partition is (re)restored.
    """

    __slots__ = ("part", "epoch", "stream_ms", "index", "closed_ms", "anchor")

    def __init__(self, part: TablePartition) -> None:
        self.part = part
        self.epoch: int = getattr(part, "epoch", 0)
        self.stream_ms: int | None = None
        # a persistent store keeps the index (memory flat in the keys); a memory store's data is in memory anyway
        self.index: WindowIndex = StoreIndex(part) if getattr(part.store, "persistent", False) else HeapIndex()
        self.closed_ms = -1  # windows ending at or before this closed by the wall clock (cleanup)
        # (stream time, wall time) when a cleanup last saw stream time move: from there the
        # partition's time goes on with the wall clock while no record moves it
        self.anchor: tuple[int, float] | None = None


class _WindowState:
    """What every view of one windowed table shares: window, grace, callback, partition indexes."""

    def __init__(
        self, table: Table, window: HoppingWindow, grace: float, on_window_close: WindowCloseCallback | None
    ) -> None:
        self.table = table
        self.window = window
        self.grace = grace
        self._size_ms = _ms(window.size)
        self._grace_ms = _ms(grace)
        self._expire_after_ms = max(_ms(window.expires), self._grace_ms)
        self.parts: dict[int, _PartWindows] = {}
        self.late = DropCount()
        self.close_calls = WindowCloseCalls(table.name, on_window_close)
        self.callbacks: set[asyncio.Future[Any]] = self.close_calls.pending  # the commit waits for these
        table.value_codec = _WindowValueCodec(table.value_codec)
        # Faust's format (topic_naming='faust'): keys are JSON [key, [start, end]], and stream
        # time is not stored (a Faust reader could not decode the entry): it is rebuilt from
        # the latest window start after a restore.
        self.faust_format = bool(getattr(table, "faust_format", False))
        self.final: Any = None  # final_results(): the suppression buffer (agentstream.tables.final_results)

    def window_key(self, kb: bytes, start: float) -> bytes:
        if self.faust_format:
            return faust_window_key(kb, start, self.window.size)
        return window_key(kb, start)

    def parse_window_key(self, raw: bytes) -> tuple[bytes, float]:
        if self.faust_format:
            return parse_faust_window_key(raw)
        return parse_window_key(raw)

    def window_range(self, start: float) -> WindowRange:
        start_ms = _ms(start)
        return start_ms / 1000, (start_ms + self._size_ms) / 1000

    # -- partitions ------------------------------------------------------------------------------
    def part_for(self, kb: bytes, write: bool) -> TablePartition:
        return self.table._partition_for(kb, write)

    def windows(self, part: TablePartition) -> _PartWindows:
        """The partition's index, rebuilt from its data when the partition object or epoch changed."""
        pw = self.parts.get(part.partition)
        if pw is not None and pw.part is part and pw.epoch == getattr(part, "epoch", 0):
            return pw
        pw = _PartWindows(part)
        index = pw.index
        # A store index is written for a partition that takes writes: a standby's (which never
        # expires anything) is built when it becomes active, which bumps its epoch.
        indexing = not isinstance(index, StoreIndex) or bool(getattr(part, "ready", True))
        windows = 0
        latest_end: int | None = None
        for k, value, decoded in live_entries(part, reserved=True):
            if k == STREAM_TIME_KEY:
                pw.stream_ms = value.ms if decoded else int(value)
                continue
            try:
                _, start = self.parse_window_key(k)
            except ValueError:
                continue
            end_ms = _ms(start) + self._size_ms
            windows += 1
            if latest_end is None or end_ms > latest_end:
                latest_end = end_ms
            if indexing:
                index.add(end_ms, k)
        index.done_adding()
        bound = _future_bound_ms(self.table)
        if pw.stream_ms is not None and bound is not None and pw.stream_ms > bound:
            log.warning(
                "table %s partition %d: stored stream time %s is beyond the wall clock + "
                "max_message_time_difference; using %s",
                self.table.name,
                part.partition,
                pw.stream_ms / 1000,
                bound / 1000,
            )
            pw.stream_ms = bound
        if pw.stream_ms is None and latest_end is not None:
            # Written by a version that did not store stream time: every window start is a
            # lower bound of it (the record that created the window was no earlier).
            pw.stream_ms = latest_end - self._size_ms
        self.parts[part.partition] = pw
        if windows:
            log.debug(
                "table %s partition %d: indexed %d windows, stream time %s",
                self.table.name,
                part.partition,
                windows,
                None if pw.stream_ms is None else pw.stream_ms / 1000,
            )
        return pw

    # -- reads -----------------------------------------------------------------------------------
    def get(self, key: Any, start: float) -> tuple[bool, Any]:
        kb = self.table._key_dumps(key)
        return self.part_for(kb, False).get_bytes(self.window_key(kb, start))

    # -- writes ----------------------------------------------------------------------------------
    def write(
        self,
        key: Any,
        ts: float,
        values: Mapping[WindowRange, Any],
        wkeys: list[bytes] | None = None,
        fresh: list[bool] | None = None,
    ) -> bool:
        """Advance stream time to ``ts`` and write ``values`` to the windows that are still open.
        ``wkeys``: the windows' store keys in ``values``' order, when the caller has them;
        ``fresh``: in the same order, whether each window had no value when the caller read it.

        Returns False (and counts the record as late) when none was open.
        """
        table = self.table
        kb = table._key_dumps(key)
        part = self.part_for(kb, True)
        pw = self.windows(part)
        ts_ms = _ms(ts)
        if pw.stream_ms is None or ts_ms > pw.stream_ms:
            _refuse_far_future(table, ts_ms)  # before any write: the record goes to the error policy
            pw.stream_ms = ts_ms
            if not self.faust_format:
                part.set(STREAM_TIME_KEY, _StreamTimeMark(ts_ms))
        st = pw.stream_ms
        wrote = False
        if wkeys is None or len(wkeys) != len(values):
            wkeys = [self.window_key(kb, start) for start, _ in values]
            fresh = None
        elif fresh is not None and len(fresh) != len(wkeys):
            fresh = None
        index = pw.index
        i = 0
        for ((_, end), value), wk in zip(values.items(), wkeys):
            end_ms = _ms(end)
            if end_ms + self._grace_ms <= st or end_ms <= pw.closed_ms:
                i += 1
                continue  # this window is closed (by stream time, or expired by the wall clock)
            index.note(end_ms, wk, None if fresh is None else fresh[i])
            part.set(wk, value)
            wrote = True
            i += 1
        if self.final is not None:  # buffer the windows taken, emit the finals of those closed
            self.final.written(part.partition, kb, values, st, pw.closed_ms)
        if not wrote:
            self._late(key, ts, st)
        # Expiry (and with it on_window_close, as in Faust) runs after the record's own writes,
        # which went to open windows only; callbacks run once the heaps are consistent, and a
        # failing one is logged: it cannot undo or skip the record.
        self._run_callbacks(self._expire_due(pw))
        return wrote

    def stream_time(self, key: Any) -> float | None:
        """Stream time of ``key``'s partition (None before its first write)."""
        kb = self.table._key_dumps(key)
        pw = self.windows(self.part_for(kb, False))
        return None if pw.stream_ms is None else pw.stream_ms / 1000

    def index_entries(self, part: TablePartition) -> int:
        """Entries the partition's expiry index keeps in its store (what a key count leaves out)."""
        pw = self.parts.get(part.partition)
        return pw.index.stored() if pw is not None and pw.part is part else 0

    def put(self, key: Any, start: float, value: Any) -> bool:
        """Write one window by its start, without moving stream time; False (counted as late) if
        it is closed, by stream time or by the wall-clock cleanup (as :meth:`write` decides: a put
        must not reopen a window whose final was sent or whose close callback ran)."""
        kb = self.table._key_dumps(key)
        part = self.part_for(kb, True)
        pw = self.windows(part)
        end_ms = _ms(start) + self._size_ms
        if (pw.stream_ms is not None and end_ms + self._grace_ms <= pw.stream_ms) or end_ms <= pw.closed_ms:
            self._late(key, start, pw.stream_ms if pw.stream_ms is not None else pw.closed_ms)
            return False
        wk = self.window_key(kb, start)
        pw.index.note(end_ms, wk, None)
        part.set(wk, value)
        if self.final is not None:
            self.final.updated(part.partition, kb, _ms(start), end_ms, value)
        return True

    def delete_window(self, key: Any, start: float) -> None:
        kb = self.table._key_dumps(key)
        part = self.part_for(kb, True)
        wk = self.window_key(kb, start)
        if part.get_bytes(wk)[0]:
            part.set(wk, None)
        if self.final is not None:
            self.final.removed(part.partition, kb, _ms(start))

    def stale(self, key: Any, ts: float) -> bool:
        """Whether every window of ``ts`` is closed at the partition's stream time."""
        kb = self.table._key_dumps(key)
        pw = self.windows(self.part_for(kb, False))
        if pw.stream_ms is None:
            return ts < 0
        return self.window.stale(ts, pw.stream_ms / 1000, self.grace)

    def delete(self, key: Any, ts: float) -> None:
        """Delete ``key``'s windows containing ``ts`` (tombstones; no close callback)."""
        kb = self.table._key_dumps(key)
        part = self.part_for(kb, True)
        for start, _ in self.window.ranges(ts):
            wk = self.window_key(kb, start)
            if part.get_bytes(wk)[0]:
                part.set(wk, None)
            if self.final is not None:
                self.final.removed(part.partition, kb, _ms(start))

    @property
    def late_dropped(self) -> int:
        """Records dropped because every window they belong to had closed."""
        return self.late.total

    @property
    def callback_errors(self) -> int:
        """on_window_close calls that raised (each logged)."""
        return self.close_calls.errors

    def _late(self, key: Any, ts: float, st: int) -> None:
        log.debug(
            "table %s: dropped late record for key %r at time %s (stream time %s, grace %ss)",
            self.table.name,
            key,
            ts,
            st / 1000,
            self.grace,
        )
        reported = self.late.add()
        if reported:
            log.warning(
                "table %s: dropped %d late record(s) whose windows had closed (%d in total; grace is %ss)",
                self.table.name,
                reported,
                self.late.total,
                self.grace,
            )

    def _run_callbacks(self, expired: list[tuple[bytes, Any]]) -> None:
        """``on_window_close((key, (start, end)), final value)`` for each expired window (Faust
        calls it when the window expires, not when it stops taking records)."""
        if self.close_calls.callback is None or not expired:
            return
        loads = self.table.key_codec.loads
        closed: list[tuple[Any, Any]] = []
        for wk, value in expired:
            kb, start = self.parse_window_key(wk)
            closed.append(((loads(kb), self.window_range(start)), value))
        self.close_calls.run(closed)

    @property
    def closes_by_wall_clock(self) -> bool:
        """Faust's table cleanup: a window given ``expires=`` closes once the wall clock passes
        its end + expires, even if its partition's stream time stands still (no new records)."""
        return bool(getattr(self.window, "expires_given", False))

    def cleanup(self, part: TablePartition, now: float) -> int:
        """Close (expire, with ``on_window_close``) the windows of ``part`` whose end + expires has
        passed while no record came: the partition's time goes on with the wall clock from where a
        cleanup last saw its stream time move (``now``: wall-clock epoch seconds). For live records
        (stamped about now) that is Faust's rule, a window closing once the wall clock passes its
        end + expires; a replay of old records keeps its windows while it runs, as stream time
        says. Later records for a closed window are late. Returns how many closed. Called by the
        worker every ``table_cleanup_interval``."""
        pw = self.windows(part)
        if pw.stream_ms is None:
            return 0
        if pw.anchor is None or pw.anchor[0] != pw.stream_ms:
            pw.anchor = (pw.stream_ms, now)
        bound = pw.anchor[0] + _ms(now - pw.anchor[1]) - self._expire_after_ms
        if bound <= pw.closed_ms:
            return 0
        pw.closed_ms = bound
        if self.final is not None:  # the windows ending by ``bound`` take no more records: final
            self.final.advance(part.partition, bound + self._grace_ms)
        expired = self._expire_due(pw, bound + self._expire_after_ms)
        self._run_callbacks(expired)
        return len(expired)

    def _expire_due(self, pw: _PartWindows, wall_ms: int | None = None) -> list[tuple[bytes, Any]]:
        """Delete the windows expired at the partition's stream time (or at ``wall_ms``, the
        cleanup's wall clock, when later); ``(key, final value)`` of each."""
        st = pw.stream_ms
        if wall_ms is not None and (st is None or wall_ms > st):
            st = wall_ms
        out: list[tuple[bytes, Any]] = []
        if st is None:
            return out
        part = pw.part
        want_values = self.close_calls.callback is not None
        for wk in pw.index.due(st - self._expire_after_ms):
            if want_values:
                found, value = part.get_bytes(wk)
                if not found:
                    continue  # deleted by the application
                part.set(wk, None)
                out.append((wk, value))
            elif exists(part, wk):
                part.set(wk, None)
                out.append((wk, None))
        if out:
            log.debug("table %s partition %d: expired %d windows", self.table.name, part.partition, len(out))
        return out

    # -- iteration -------------------------------------------------------------------------------
    def items(self) -> Iterator[tuple[tuple[Any, WindowRange], Any]]:
        kloads, vloads = self.table.key_codec.loads, self.table.value_codec.loads
        for part in list(self.table.parts.values()):
            for k, value, decoded in live_entries(part):
                try:
                    kb, start = self.parse_window_key(k)
                except ValueError:
                    continue  # the stream-time entry
                yield (kloads(kb), self.window_range(start)), value if decoded else vloads(value)


_MISSING: Any = object()


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class WindowSet:
    """The windows of one key (what ``windowed_table[key]`` returns, Faust's WindowSet).

    Read one window with :meth:`value`, :meth:`current`, :meth:`now` or :meth:`delta`;
    ``wt[key] += 1`` applies the operator to *every* window containing the record's time and
    hands the results to :meth:`WindowedTable.__setitem__`, which writes the open ones.
    """

    __slots__ = ("table", "key", "event", "_ts", "_updates", "_wkeys", "_fresh")

    def __init__(
        self,
        table: WindowedTable,
        key: Any,
        event: Event | None,
        ts: float | None = None,
        updates: dict[WindowRange, Any] | None = None,
        wkeys: list[bytes] | None = None,
        fresh: list[bool] | None = None,
    ) -> None:
        self.table = table
        self.key = key
        self.event = event
        self._ts = ts
        self._updates = updates
        # The store keys of ``updates``' windows, in its order, when ``apply`` made them: the
        # write that follows a read-modify-write does not build them again.
        self._wkeys = wkeys
        self._fresh = fresh  # per window of ``updates``: it had no value when read (a new window)

    # -- reads -----------------------------------------------------------------------------------
    def _at(self, timestamp: float) -> Any:
        if timestamp < 0:  # before the first window: nothing can be stored there
            return self.table._missing(self.key, timestamp)
        return self.table._get(self.key, self.table.window.current(timestamp)[0])

    def value(self, event: Event | None = None) -> Any:
        """The window of the table's time source (what ``+=`` wrote last)."""
        return self._at(self.table.time_of(event or self.event))

    def current(self, event: Event | None = None) -> Any:
        """The window containing the current event's record timestamp (Faust's ``current()``)."""
        return self._at(_stream_time(event or self.event))

    def now(self) -> Any:
        """The latest window, as Faust's ``now()``: inside an agent the latest-starting window
        containing the stream time of the key's partition (the newest window there); outside
        one, the earliest window containing the wall-clock time."""
        table = self.table
        event = self.event if self.event is not None else current_event()
        if event is not None:
            st = table._state.stream_time(self.key)
            if st is not None:
                return self._at(st)
        now = clock_for(table.table.app).time()
        return table._get(self.key, table.window.earliest(now)[0])

    def delta(self, d: Seconds, event: Event | None = None) -> Any:
        """The window containing the current event's record timestamp minus ``d``."""
        return self._at(_stream_time(event or self.event) - seconds(d))

    def stale(self, event: Event | None = None) -> bool:
        """True when the record's time (the table's time source) is in closed windows only.

        Asked after ``wt[key] += 1`` it tells whether that update was dropped as late.
        """
        return self.table._state.stale(self.key, self.table.time_of(event or self.event))

    def __getitem__(self, window: WindowRange | Event) -> Any:
        """``wt[key][(start, end)]``: one window by its range; ``wt[key][event]``: this WindowSet
        with ``event`` as the event its reads are relative to (Faust's)."""
        if isinstance(window, Event):
            return WindowSet(self.table, self.key, window)
        return self.table._get(self.key, window[0])

    def __setitem__(self, window: WindowRange, value: Any) -> None:
        """``wt[key][(start, end)] = value``: write one window by its range (if still open)."""
        if isinstance(window, Event):
            raise TypeError("cannot assign to a WindowSet keyed by an event; index it by a (start, end) range")
        self.table._state.put(self.key, window[0], value)

    def __delitem__(self, window: WindowRange) -> None:
        """``del wt[key][(start, end)]``: delete one window by its range (a tombstone)."""
        if isinstance(window, Event):
            raise TypeError("cannot delete a WindowSet keyed by an event; index it by a (start, end) range")
        self.table._state.delete_window(self.key, window[0])

    # -- arithmetic: Faust's ``table[key] += 1`` ---------------------------------------------------
    def apply(self, op: Callable[[Any, Any], Any], other: Any) -> WindowSet:
        """``op(window value, other)`` for every window of the record's time, to be assigned back."""
        table = self.table
        ts = table.time_of(self.event)
        state = table._state
        kb = state.table._key_dumps(self.key)
        part = state.part_for(kb, False)
        updates: dict[WindowRange, Any] = {}
        wkeys: list[bytes] = []
        fresh: list[bool] = []
        for r in table.window.ranges(ts):
            wk = state.window_key(kb, r[0])
            found, value = part.get_bytes(wk)
            updates[r] = op(value if found else table._missing(self.key, r), other)
            wkeys.append(wk)
            fresh.append(not found)
        return WindowSet(table, self.key, self.event, ts, updates, wkeys, fresh)

    def __iadd__(self, other: Any) -> WindowSet:
        return self.apply(operator.add, other)

    def __isub__(self, other: Any) -> WindowSet:
        return self.apply(operator.sub, other)

    def __imul__(self, other: Any) -> WindowSet:
        return self.apply(operator.mul, other)

    def __itruediv__(self, other: Any) -> WindowSet:
        return self.apply(operator.truediv, other)

    def __ifloordiv__(self, other: Any) -> WindowSet:
        return self.apply(operator.floordiv, other)

    def __imod__(self, other: Any) -> WindowSet:
        return self.apply(operator.mod, other)

    def __ipow__(self, other: Any) -> WindowSet:
        return self.apply(operator.pow, other)

    def __ilshift__(self, other: Any) -> WindowSet:
        return self.apply(operator.lshift, other)

    def __irshift__(self, other: Any) -> WindowSet:
        return self.apply(operator.rshift, other)

    def __iand__(self, other: Any) -> WindowSet:
        return self.apply(operator.and_, other)

    def __ixor__(self, other: Any) -> WindowSet:
        return self.apply(operator.xor, other)

    def __ior__(self, other: Any) -> WindowSet:
        return self.apply(operator.or_, other)

    def __repr__(self) -> str:
        return f"<WindowSet {self.table.name}[{self.key!r}]>"


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class WindowedTable:
    """A table of ``(key, window)`` -> value (Faust's WindowWrapper); see the module docstring.

    Made by ``Table.tumbling()`` / ``Table.hopping()``; the ``relative_to_*`` methods return
    views sharing the same windows and stream time, with another time source for writes and
    :meth:`WindowSet.value`.
    """

    def __init__(
        self, state: _WindowState, time_source: TimeSource = _stream_time, relative_to: str = "stream"
    ) -> None:
        self._state = state
        self._time_source = time_source
        self.relative_mode = relative_to  # "stream", "now", "field", "timestamp" or "callable"

    # -- configuration -----------------------------------------------------------------------------
    @property
    def table(self) -> Table:
        return self._state.table

    @property
    def name(self) -> str:
        return self._state.table.name

    @property
    def window(self) -> HoppingWindow:
        return self._state.window

    @property
    def grace(self) -> float:
        return self._state.grace

    # Faust's WindowWrapper passes these on to its table
    @property
    def changelog_topic(self) -> Any:
        return self._state.table.changelog_topic

    @property
    def changelog_topic_name(self) -> str:
        return self._state.table.changelog_topic.name

    @property
    def data(self) -> Any:
        return self._state.table.data

    def info(self) -> dict[str, Any]:
        return self._state.table.info()

    def on_recover(self, fun: Callable[[], Any]) -> Callable[[], Any]:
        """``@windowed.on_recover``: the table's recovery callback (Faust's WindowWrapper)."""
        return self._state.table.on_recover(fun)

    def as_ansitable(self, title: str = "{table.name}", **kwargs: Any) -> str:
        """Faust's ``as_ansitable`` of a windowed table: the table's rows as a text table."""
        table = self._state.table
        return table.as_ansitable(title=title.format(table=table), **kwargs)

    @property
    def late_dropped(self) -> int:
        """Records dropped because every window they belong to had closed (or had none)."""
        return self._state.late_dropped

    def final_results(self, topic: Any = None) -> Topic:
        """The topic that gets one :class:`~agentstream.tables.final_results.WindowFinal` per key and
        window once the window closes (stream time past end + grace), Kafka Streams'
        ``suppress(untilWindowCloses)``; durable through a changelogged suppression buffer (see
        agentstream.tables.final_results). ``topic``: a Topic, a name, or None for ``<table>-final``."""
        state = self._state
        if state.final is not None:
            raise TopologyError(
                f"table {self.name!r} already sends its final results to {state.final.topic.name!r}; "
                "keep the topic final_results() returned"
            )
        state.final = declare_final_results(
            state.table,
            topic,
            state._grace_ms,
            stream_time=lambda part: state.windows(part).stream_ms,
            callbacks=state.callbacks,
        )
        return state.final.topic  # type: ignore[no-any-return]

    def relative_to_stream(self) -> WindowedTable:
        """Window by the record's timestamp (event time; the default)."""
        return WindowedTable(self._state, _stream_time, "stream")

    def relative_to_now(self) -> WindowedTable:
        """Window by the wall clock at processing time."""
        return WindowedTable(self._state, _wall_time, "now")

    def relative_to_field(self, field: Any) -> WindowedTable:
        """Window by a value field: a Record field, a field name, or ``fn(value) -> seconds | datetime``."""
        return WindowedTable(self._state, _field_time(field), "field")

    def relative_to(self, ts: Any) -> WindowedTable:
        """Faust's ``relative_to()``: a fixed time (epoch seconds or a datetime), a Record field,
        or ``fn(event) -> seconds | datetime``."""
        if isinstance(ts, (datetime, int, float)) and not isinstance(ts, bool):
            fixed = _epoch(ts)
            return WindowedTable(self._state, lambda event: fixed, "timestamp")
        if isinstance(getattr(ts, "field", None), str) and hasattr(ts, "getattr"):
            return self.relative_to_field(ts)
        if callable(ts):
            fn = ts

            def source(event: Event | None) -> float:
                return _epoch(fn(_need_event(event)))

            return WindowedTable(self._state, source, "callable")
        raise TopologyError(f"relative_to() takes a time, a datetime, a Record field or a callable, got {ts!r}")

    def __contains__(self, key: Any) -> bool:
        """Whether ``key`` has a value in the window of the current time (the table's time source)."""
        start = self._state.window.current(self.time_of())[0]
        return self._state.get(key, start)[0]

    def time_of(self, event: Event | None = None) -> float:
        """The time this view assigns to ``event`` (default: the current event)."""
        return self._time_source(event)

    # -- mapping API ---------------------------------------------------------------------------------
    def _get(self, key: Any, start: float) -> Any:
        found, value = self._state.get(key, start)
        if found:
            return value
        return self._missing(key, self._state.window_range(start))

    def _missing(self, key: Any, where: Any) -> Any:
        default = self._state.table.default
        if default is not None:
            return default()
        raise KeyError((key, where))

    def __getitem__(self, key: Any) -> WindowSet:
        return WindowSet(self, key, current_event())

    def __setitem__(self, key: Any, value: Any) -> None:
        """Write ``value`` to every open window of the current time (``+=`` results per window)."""
        if isinstance(value, WindowSet):
            if value._updates is None or value._ts is None:
                return  # ``wt[k] = wt[k]``: nothing changed
            self._index(key)
            self._state.write(key, value._ts, value._updates, value._wkeys, value._fresh)
            return
        self._index(key)
        ts = self.time_of()
        self._state.write(key, ts, {r: value for r in self._state.window.ranges(ts)})

    def __delitem__(self, key: Any) -> None:
        """Delete ``key`` from every window of the current time."""
        index = self.key_index_table
        if index is not None:
            index.pop(key, None)
        self._state.delete(key, self.time_of())

    # -- Faust's key index (``tumbling(..., key_index=True)``) ----------------------------------------
    @property
    def key_index_table(self) -> Table | None:
        """The ``<name>-key_index`` table of the keys set, or None (no key index)."""
        return self._state.table.key_index_table

    def _index(self, key: Any) -> None:
        index = self.key_index_table
        if index is not None and key not in index:
            index[key] = 1

    def _index_keys(self) -> list[Any] | None:
        index = self.key_index_table
        return None if index is None else list(index.keys())

    def items(self, event: Event | None = None) -> WindowedView:
        """``((key, (start, end)), value)`` for every window in the partitions this worker holds;
        ``.now()``, ``.current()``, ``.delta(d)`` give ``(key, value)`` for one window per key, as
        Faust's windowed items views do."""
        return WindowedView(self, event, "items")

    def keys(self, event: Event | None = None) -> WindowedView:
        return WindowedView(self, event, "keys")

    def values(self, event: Event | None = None) -> WindowedView:
        return WindowedView(self, event, "values")

    def as_dict(self) -> dict[tuple[Any, WindowRange], Any]:
        return dict(self._state.items())

    def __iter__(self) -> Iterator[Any]:
        """``(key, (start, end))`` of every window held here; with a key index, each key (Faust's)."""
        keys = self._index_keys()
        if keys is not None:
            return iter(keys)
        return iter([k for k, _ in self._state.items()])  # a list: mypyc builds one for a generator anyway

    def __len__(self) -> int:
        """The windows held here; with a key index, the keys (Faust's ``len()``)."""
        keys = self._index_keys()
        if keys is not None:
            return len(keys)
        return sum(1 for _ in self._state.items())

    async def wait_callbacks(self) -> None:
        """Until every ``async`` on_window_close started so far has finished (tests, shutdown)."""
        while self._state.callbacks:
            await asyncio.gather(*list(self._state.callbacks), return_exceptions=True)

    def __repr__(self) -> str:
        return f"<WindowedTable {self.name} {self.window!r} grace={self.grace} relative_to={self.relative_mode}>"


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class WindowedView:
    """What ``wt.items()``/``keys()``/``values()`` return: iterating gives every window held here;
    ``now()``, ``current()`` and ``delta(d)`` pick one window per key (Faust's windowed views)."""

    def __init__(self, table: WindowedTable, event: Event | None, kind: str) -> None:
        self._table, self._event, self._kind = table, event, kind

    def __iter__(self) -> Iterator[Any]:
        if self._table.key_index_table is not None:  # Faust's: one entry per key, its window at the view's time
            if self._kind == "keys":
                return iter(self._table._index_keys() or ())
            event = self._event if self._event is not None else current_event()
            return self._per_key(lambda ws: ws.value(event))
        pairs = self._table._state.items()
        if self._kind == "keys":
            return iter([k for k, _ in pairs])
        if self._kind == "values":
            return iter([v for _, v in pairs])
        return pairs

    def _per_key(self, read: Callable[[WindowSet], Any]) -> Iterator[Any]:
        event = self._event if self._event is not None else current_event()
        indexed = self._table._index_keys()
        keys = indexed if indexed is not None else dict.fromkeys([k for (k, _), _ in self._table._state.items()])
        for key in keys:
            try:
                value = read(WindowSet(self._table, key, event))
            except KeyError:
                continue
            yield key if self._kind == "keys" else value if self._kind == "values" else (key, value)

    def now(self) -> Iterator[Any]:
        return self._per_key(lambda ws: ws.now())

    def current(self, event: Event | None = None) -> Iterator[Any]:
        return self._per_key(lambda ws: ws.current(event))

    def delta(self, d: Seconds, event: Event | None = None) -> Iterator[Any]:
        return self._per_key(lambda ws: ws.delta(d, event))


def windowed(table: Table, window: Any, grace: Seconds, on_window_close: WindowCloseCallback | None) -> WindowedTable:
    """Make ``table`` windowed (once): the implementation of ``tumbling()``/``hopping()``."""
    existing: _WindowState | None = getattr(table, "_windowed", None)
    if existing is not None:
        raise TopologyError(
            f"table {table.name!r} is already windowed ({existing.window!r}); keep the WindowedTable "
            "that tumbling()/hopping() returned and use its relative_to_*() views"
        )
    if not isinstance(window, HoppingWindow):
        raise TopologyError(
            f"table {table.name!r}: using_window() takes a TumblingWindow, HoppingWindow or "
            f"SlidingWindow, got {window!r}"
        )
    grace_s = seconds(grace)
    if grace_s < 0:
        raise ValueError(f"window grace must be >= 0, got {grace!r}")
    if table.is_global:
        raise TopologyError(f"global table {table.name!r} cannot be windowed")
    state = _WindowState(table, window, grace_s, on_window_close)
    table._windowed = state
    changelog = table.changelog_topic.config
    for key, value in windowed_changelog_configs(window, grace_s).items():
        changelog.setdefault(key, value)  # the table's extra_topic_configs win
    return WindowedTable(state)


# Kafka Streams' windowstore.changelog.additional.retention.ms: slack for clock drift between the
# broker (which deletes by its clock) and the record timestamps windows are kept by
CHANGELOG_ADDITIONAL_RETENTION_MS = 86_400_000


def windowed_changelog_configs(window: HoppingWindow, grace: float) -> dict[str, str]:
    """A windowed table's changelog: compacted (latest value per window) and deleted by time (Faust's
    ``compact,delete``), its ``retention.ms`` a window's whole life, start to expiry (size +
    max(expires, grace)), plus a day as Kafka Streams adds. Faust's retention is ``expires`` alone,
    which deletes a window's records before the window expires when expires < size."""
    life_ms = _ms(window.size) + max(_ms(window.expires), _ms(grace))
    return {
        "cleanup.policy": "compact,delete",
        "retention.ms": str(life_ms + CHANGELOG_ADDITIONAL_RETENTION_MS),
    }


def tumbling(
    table: Table,
    size: Seconds,
    expires: Seconds | None = None,
    *,
    grace: Seconds = 0.0,
    on_window_close: WindowCloseCallback | None = None,
) -> WindowedTable:
    return windowed(
        table, TumblingWindow(seconds(size), None if expires is None else seconds(expires)), grace, on_window_close
    )


def hopping(
    table: Table,
    size: Seconds,
    step: Seconds,
    expires: Seconds | None = None,
    *,
    grace: Seconds = 0.0,
    on_window_close: WindowCloseCallback | None = None,
) -> WindowedTable:
    return windowed(
        table,
        HoppingWindow(seconds(size), seconds(step), None if expires is None else seconds(expires)),
        grace,
        on_window_close,
    )
