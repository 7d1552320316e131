"""One final result per window, as Kafka Streams' ``suppress(untilWindowCloses(unbounded()))``.

.. code-block:: python

    views = app.Table("views", default=int).tumbling(60, grace=10)
    finals = views.final_results("views-final")      # a Topic of WindowFinal records

    @app.agent(finals)
    async def store(stream):
        async for final in stream:                  # exactly one per key and window
            print(final.key, final.start, final.end, final.value)

A windowed table with final results keeps a **suppression buffer**: a companion table
``<table>-suppress`` (changelog ``<app>-<table>-suppress-changelog``, same partitions, written by
the same task) holding, per window not yet emitted, the window's end and latest value. When the
partition's stream time reaches ``end + grace`` (the moment the table starts refusing the
window's records as late) the window's :class:`WindowFinal` is sent to the topic and its buffer
entry deleted:

* ``exactly_once``: the send and the buffer's tombstone are in the task's transaction, with the
  record that moved stream time and its offset: a crash aborts all of them, the next owner
  restores the buffer and stream time as committed and closes the window again. One final each.
* ``at_least_once``: the buffer entry is deleted only once the broker acknowledged the final
  (and not if a window of the same key and start was buffered meanwhile: a session can start
  again at a closed one's start), and that deletion is committed with a later offset: a crash between the two leaves the entry,
  which the next owner emits again after its restore (a duplicate after a crash, never none).

Stream time is restored with the windowed table (its reserved entry), so a window that closed
but whose final was not acknowledged is emitted by whoever owns the partition next, as soon as
the partition is restored (at_least_once) or at its first record (exactly_once, where a restored
buffer holds no closed window: emission and stream time commit together).

The interface a window kind plugs into (session windows do, as tumbling, hopping and sliding
ones): :func:`declare_final_results` with the kind's stream time per table partition and the set
of futures its commit waits for, then, by partition number and in the task that writes the table,
:meth:`FinalResults.written` (a record's window writes, then stream time: the common path), or
the three calls it is made of: :meth:`FinalResults.updated` (a window got a value; its end may
change, as a session's does when it grows), :meth:`FinalResults.removed` (a window is gone
without a final: deleted by the app, or merged into another session) and
:meth:`FinalResults.advance` (the partition's close time moved: emit every window with
``end + grace <= time``). Windows are named by key bytes and start (one window per key and
start, which sessions keep too: a session whose start moves, when an earlier record extends it or
it is merged into an earlier one, is ``removed`` under its old start and ``updated`` under the
new one, in the same record's writes).

Which window closes next: with a memory store, a heap by close time; with a persistent
(RocksDB) buffer, the windowed tables' :class:`~agentstream.tables.window_index.StoreIndex` in
the buffer's own store (store-only entries, never in the changelog, rebuilt at activation), so the
worker's memory does not grow with the open windows. An entry whose window closes at another time
now (a session grew) or is gone is dropped when it comes due.

Session tables (:mod:`agentstream.tables.sessions`) declare theirs with ``end_inclusive=True``:
a session ``[start, end]`` holds its last record's time, so it closes once stream time *passes*
``end + grace`` (their ``grace_ms`` is the session's gap + grace, Kafka Streams' close time) and
its final is stamped with ``end`` itself.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import struct
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..codecs import Codec
from ..exceptions import TopologyError
from ..models.record import Record
from ..runtime import runtime_for
from .cache import MISS
from .query import live_entries
from .window_index import StoreIndex
from .windows import parse_window_key, window_key

if TYPE_CHECKING:
    from ..topics import Topic
    from .partition import TablePartition
    from .table import Table

log = logging.getLogger(__name__)

__all__ = ["FinalResults", "WindowFinal", "BUFFER_SUFFIX", "declare_final_results"]

BUFFER_SUFFIX = "-suppress"
"""The suppression buffer is the table ``<table name>-suppress``."""

_END = struct.Struct(">q")


class WindowFinal(Record, include_metadata=False):
    """The final value of one window of one key, sent once the window closed.

    ``start``/``end`` are epoch seconds: ``[start, end)`` for a tumbling, hopping or sliding window;
    ``[start, end]`` for a session, the times of its first and last record. ``value`` is the window's value as the
    table's value codec stores it (a Record value arrives as its fields unless the reading topic
    declares a typed WindowFinal subclass)."""

    key: Any
    start: float
    end: float
    value: Any


class _BufferCodec:
    """The buffer's values: ``(end_ms, window value)``, stored as 8 bytes of end then the table's
    encoding of the value (so the buffer holds whatever the table can hold)."""

    def __init__(self, inner: Codec) -> None:
        self.inner = inner

    def dumps(self, obj: Any) -> bytes | None:
        end_ms, value = obj
        raw = self.inner.dumps(value)
        return _END.pack(end_ms) + (b"" if raw is None else bytes(raw))

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < _END.size:
            raise ValueError(f"not a suppression-buffer value (too short): {data[:20]!r}")
        (end_ms,) = _END.unpack_from(data, 0)
        return end_ms, self.inner.loads(data[_END.size :])


class _PartBuffer:
    """The not-yet-emitted windows of one buffer partition by close time. Derived from the
    buffer's data, so rebuilt whenever the partition object or its epoch changes.

    Memory store (``index`` None): a min-heap of ``(close, buffer key)`` and ``close_of``, the close
    time of every window in it (a heap entry whose close time is not its window's is stale, skipped).
    Persistent store: the close order is a :class:`~agentstream.tables.window_index.StoreIndex` in the
    buffer's own store (memory flat in the number of open windows); an entry is current when its
    window is buffered with that close time and not in ``unindexed``: the windows whose final was
    taken (sent and not yet acknowledged, or not sent) while their buffered entry stays, which the
    heap's ``close_of`` leaves out. ``unindexed`` holds finals in flight and failed ones only."""

    __slots__ = ("part", "epoch", "heap", "close_of", "index", "unindexed")

    def __init__(self, part: TablePartition) -> None:
        self.part = part
        self.epoch: int = part.epoch
        self.heap: list[tuple[int, bytes]] = []
        self.close_of: dict[bytes, int] = {}  # buffer key -> close time in the heap (stale heap entries skipped)
        self.index: StoreIndex | None = StoreIndex(part) if getattr(part.store, "persistent", False) else None
        self.unindexed: set[bytes] = set()


def _buffered_end(part: TablePartition, bk: bytes) -> int | None:
    """The end of the window buffered under ``bk`` (None: none is), decoding nothing else."""
    value: Any = part.cache.dirty.get(bk, MISS)
    if value is not MISS:
        return None if value is None else int(value[0])
    raw = part.pending.get(bk, MISS)
    if raw is MISS:
        raw = part.store.get(bk)
    if raw is None or len(raw) < _END.size:
        return None
    return int(_END.unpack_from(raw, 0)[0])


class FinalResults:
    """The suppression buffer and the final-results topic of one windowed table."""

    def __init__(
        self,
        table: Table,
        topic: Topic,
        grace_ms: int,
        *,
        stream_time: Callable[[TablePartition], int | None],
        callbacks: set[asyncio.Future[Any]],
        end_inclusive: bool = False,
    ) -> None:
        """``stream_time(table partition)``: its stream time in ms (None before the first record);
        ``callbacks``: where the sends are tracked, the set the commit waits for in its step 0 (the
        windowed table's async close callbacks); ``end_inclusive``: windows are ``[start, end]``
        (sessions), closed once stream time passes ``end + grace_ms``, not when it reaches it."""
        self.table = table
        self.topic = topic
        self.grace_ms = grace_ms
        self.end_inclusive = end_inclusive
        # stream times are whole ms: "passes end + grace" is "reaches end + grace + 1"
        self._close_after_ms = grace_ms + 1 if end_inclusive else grace_ms
        self._stream_time = stream_time
        self._callbacks = callbacks
        self.buffer: Table = table.app.Table(
            f"{table.name}{BUFFER_SUFFIX}",
            key_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=table._partitions,
            help=f"suppression buffer of {table.name}'s final results (windows not yet emitted)",
        )
        self.buffer.value_codec = _BufferCodec(table.value_codec)
        self.buffer.on_recover(self._recovered)
        self.buffer._index_entries = self.index_entries  # a persistent buffer's close index is not its keys
        self._parts: dict[int, _PartBuffer] = {}
        self.emitted = 0  # finals handed to the producer by this process
        self.errors = 0  # finals whose send failed (left in the buffer: emitted again after a restore)

    # -- the buffer's partitions ---------------------------------------------------------------------
    def _part(self, partition: int) -> _PartBuffer:
        part = runtime_for(self.table.app).partitions.get(self.buffer.name, {}).get(partition)
        if part is None:  # the worker opens every table's partitions together: this one came too late
            raise TopologyError(
                f"table {self.table.name!r}: final_results() was called after the worker started, so its "
                f"suppression buffer {self.buffer.name!r} has no partition {partition} here and no final could "
                "be kept. Fix: call final_results() where the windowed table is declared (at import time)"
            )
        pb = self._parts.get(partition)
        if pb is not None and pb.part is part and pb.epoch == part.epoch:
            return pb
        pb = _PartBuffer(part)
        index = pb.index
        # A store index is written for a partition that takes writes: one built before (which
        # emits nothing) is rebuilt when the partition becomes active, which bumps its epoch.
        indexing = index is None or part.ready
        for k, value, decoded in live_entries(part):
            end_ms = value[0] if decoded else _END.unpack_from(value, 0)[0]
            close = end_ms + self._close_after_ms
            if index is None:
                pb.close_of[k] = close
                pb.heap.append((close, k))
            elif indexing:
                index.add(close, k)  # an entry an earlier run left is the same store key
        if index is None:
            heapq.heapify(pb.heap)
        else:
            index.done_adding()
        self._parts[partition] = pb
        return pb

    def index_entries(self, part: TablePartition) -> int:
        """Entries the close index keeps in the buffer partition's store (what a key count leaves out)."""
        pb = self._parts.get(part.partition)
        return pb.index.stored() if pb is not None and pb.part is part and pb.index is not None else 0

    # -- what a window kind calls ----------------------------------------------------------------------
    def written(
        self,
        partition: int,
        kb: bytes,
        values: Mapping[tuple[float, float], Any],
        stream_ms: int | None,
        closed_ms: int = -1,
    ) -> None:
        """A record's writes to the windows of ``values`` (``(start, end) -> value``; the table
        took those still open at ``stream_ms`` and not closed by the wall clock, ending after
        ``closed_ms``), then stream time ``stream_ms``: buffer the taken ones, emit what closed."""
        if stream_ms is not None and values:
            pb = self._part(partition)
            grace = self._close_after_ms
            for (start, end), value in values.items():
                end_ms = round(end * 1000)
                if end_ms + grace > stream_ms and end_ms > closed_ms:
                    self._buffer(pb, kb, round(start * 1000), end_ms, value)
        self.advance(partition, stream_ms)

    def updated(self, partition: int, kb: bytes, start_ms: int, end_ms: int, value: Any) -> None:
        """Window ``[start, end)`` of key ``kb`` now has ``value`` (not closed: the table took it)."""
        self._buffer(self._part(partition), kb, start_ms, end_ms, value)

    def _buffer(self, pb: _PartBuffer, kb: bytes, start_ms: int, end_ms: int, value: Any) -> None:
        bk = window_key(kb, start_ms / 1000)
        close = end_ms + self._close_after_ms
        index = pb.index
        if index is None:
            pb.part.set(bk, (end_ms, value))
            if pb.close_of.get(bk) != close:
                pb.close_of[bk] = close
                heapq.heappush(pb.heap, (close, bk))
            return
        # a window already buffered with this close time has its entry (unless its final was taken)
        if bk in pb.unindexed or _buffered_end(pb.part, bk) != end_ms:
            pb.unindexed.discard(bk)
            index.add(close, bk)
        pb.part.set(bk, (end_ms, value))

    def removed(self, partition: int, kb: bytes, start_ms: int) -> None:
        """Window starting ``start`` of key ``kb`` is gone without a final (deleted, merged away)."""
        pb = self._part(partition)
        bk = window_key(kb, start_ms / 1000)
        if pb.index is None:
            if pb.close_of.pop(bk, None) is not None:
                pb.part.set(bk, None)
        elif bk not in pb.unindexed and _buffered_end(pb.part, bk) is not None:
            pb.part.set(bk, None)  # its index entry is dropped when it comes due

    def advance(self, partition: int, time_ms: int | None) -> int:
        """Emit the final of every buffered window of ``partition`` with ``end + grace <= time_ms``
        (``<``, for ``end_inclusive`` windows; ``time_ms``: the partition's stream time). O(1) when none is due. Returns how many were emitted."""
        if time_ms is None:
            return 0
        pb = self._part(partition)
        if pb.index is not None:
            due = self._due_stored(pb, time_ms)
        elif not pb.heap or pb.heap[0][0] > time_ms:
            return 0
        else:
            due = self._due_heap(pb, time_ms)
        if not due:
            return 0
        part = pb.part
        eos = bool(self.buffer.eos)
        if not eos and pb.index is not None:
            pb.unindexed.update(bk for bk, _, _ in due)  # buffered until acknowledged: not due again
        if eos:
            for bk, _, _ in due:
                part.set(bk, None)  # in the same transaction as the sends below
        self._emit(pb, due, eos)
        return len(due)

    def _due_heap(self, pb: _PartBuffer, time_ms: int) -> list[tuple[bytes, int, Any]]:
        part = pb.part
        due: list[tuple[bytes, int, Any]] = []
        heap, close_of = pb.heap, pb.close_of
        while heap and heap[0][0] <= time_ms:
            close, bk = heapq.heappop(heap)
            if close_of.get(bk) != close:
                continue  # superseded (the window's end moved) or removed
            del close_of[bk]
            found, entry = part.get_bytes(bk)
            if not found:
                continue
            due.append((bk, entry[0], entry[1]))
        return due

    def _due_stored(self, pb: _PartBuffer, time_ms: int) -> list[tuple[bytes, int, Any]]:
        """:meth:`_due_heap` with the close order in the store: an entry whose window is gone,
        closes at another time now, or was taken already is dropped."""
        assert pb.index is not None
        part = pb.part
        after = self._close_after_ms
        unindexed = pb.unindexed
        due: list[tuple[bytes, int, Any]] = []
        for close, bk in pb.index.due_ends(time_ms):
            if bk in unindexed:
                continue  # taken already
            found, entry = part.get_bytes(bk)
            if found and entry[0] == close - after:  # else removed, or superseded (the window's end moved)
                due.append((bk, entry[0], entry[1]))
        return due

    # -- emission ---------------------------------------------------------------------------------------
    def _emit(self, pb: _PartBuffer, due: list[tuple[bytes, int, Any]], eos: bool) -> None:
        """Send the finals from a task tracked with the table's async close callbacks, so the commit
        of the record that closed the windows waits for it (commit step 0)."""
        future = asyncio.ensure_future(self._send(pb, due, eos))
        self._callbacks.add(future)
        future.add_done_callback(self._callbacks.discard)

    async def _send(self, pb: _PartBuffer, due: list[tuple[bytes, int, Any]], eos: bool) -> None:
        part = pb.part
        kloads = self.table.key_codec.loads
        last = 0 if self.end_inclusive else 1  # ms from the end to the window's last instant
        sent: list[tuple[bytes, int, Any, Any]] = []
        for bk, end_ms, value in due:
            kb, start = parse_window_key(bk)
            key = kloads(kb)
            try:
                delivery = await self.topic.send(
                    key=key,
                    value=WindowFinal(key=key, start=start, end=end_ms / 1000, value=value),
                    timestamp=max(0, end_ms - last) / 1000,  # the window's last instant, whatever record closed it
                )
            except Exception as exc:
                self._failed(pb, bk, end_ms, value, eos, exc)
                continue
            sent.append((bk, end_ms, value, delivery))
            self.emitted += 1
        if eos:
            return  # deleted already: the transaction carries both or neither
        for bk, end_ms, value, delivery in sent:
            try:
                await delivery
            except Exception as exc:
                self._failed(pb, bk, end_ms, value, eos, exc)
                continue
            # acknowledged: only now may the buffer forget it (at_least_once: never none), unless a
            # window of the same key and start was buffered since (a session a record started or
            # extended back to the closed one's start): that entry is the newer window's
            if pb.index is None:
                newer = bk in pb.close_of
            else:
                newer = bk not in pb.unindexed
                pb.unindexed.discard(bk)
            if part.ready and not newer:
                part.set(bk, None)

    def _failed(self, pb: _PartBuffer, bk: bytes, end_ms: int, value: Any, eos: bool, exc: BaseException) -> None:
        """A final that was not sent stays buffered (exactly_once: written back, in the same
        transaction), so the partition's next owner, or this worker after its next restore, sends it."""
        self.errors += 1
        part = pb.part
        if eos and part.ready:
            part.set(bk, (end_ms, value))
            if pb.index is not None:
                pb.unindexed.add(bk)  # buffered without a current entry, as the heap leaves it
        kb, start = parse_window_key(bk)
        log.error(
            "table %s: the final result of key %r window [%s, %s) was not sent to %s (%r); it stays in the "
            "suppression buffer and is sent after the partition's next restore",
            self.table.name,
            kb,
            start,
            end_ms / 1000,
            self.topic.name,
            exc,
        )

    async def _recovered(self) -> None:
        """After a restore: emit what closed before the crash but was never acknowledged
        (at_least_once). Under exactly_once a write needs the task's transaction: the partition's
        next record does it (and a committed buffer holds no closed window there)."""
        if self.buffer.eos:
            return
        for partition, part in sorted(self.buffer.parts.items()):
            if not part.ready:
                continue
            table_part = self.table.parts.get(partition)
            if table_part is None or not table_part.ready:
                continue
            n = self.advance(partition, self._stream_time(table_part))
            if n:
                log.info("table %s partition %d: %d final results due after restore", self.table.name, partition, n)


def declare_final_results(
    table: Table,
    topic: Any,
    grace_ms: int,
    *,
    stream_time: Callable[[TablePartition], int | None],
    callbacks: set[asyncio.Future[Any]],
    end_inclusive: bool = False,
) -> FinalResults:
    """Declare ``table``'s final results on ``topic`` (a Topic, a topic name, or None for
    ``<table>-final``); the other arguments are :class:`FinalResults`'."""
    app = table.app
    if topic is None or isinstance(topic, str):
        topic = app.topic(
            topic or f"{table.name}-final",
            key_type=table.key_type,
            key_serializer=table.key_serializer,
            value_type=WindowFinal,
        )
    return FinalResults(
        table, topic, grace_ms, stream_time=stream_time, callbacks=callbacks, end_inclusive=end_inclusive
    )
