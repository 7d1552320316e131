"""Reading table partitions as they stand: what ``Table.items()``, windowed tables and the web's
interactive queries share.

A partition's live contents are its write-back cache over the changelog writes not yet in the
store over the store itself; :func:`live_entries` is the one place that merge is written. The
rest reads a table through its public face (local partitions, key encoding and partition, window
geometry, key counts) so a reader above the tables layer never touches a partition's cache,
pending writes or store, nor a window state's internals.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .partition import TablePartition


class QueryableTable(Protocol):
    """What this module reads of :class:`agentstream.tables.table.Table` (which imports it)."""

    name: str
    is_global: bool
    key_codec: Any
    value_codec: Any
    _windowed: Any

    @property
    def parts(self) -> dict[int, TablePartition]: ...

    def _key_dumps(self, key: Any) -> bytes: ...

    def _home_partition(self, key_bytes: bytes) -> int: ...


__all__ = [
    "STREAM_TIME_KEY",
    "WINDOW_INDEX_PREFIX",
    "WINDOW_INDEX_END",
    "WindowInfo",
    "live_entries",
    "local_partitions",
    "standby_partitions",
    "encode_key",
    "key_partition",
    "window_info",
    "is_session",
    "sessions",
    "decode_entry",
    "stream_time",
    "window_at",
    "get",
    "key_count",
    "sliced",
]

STREAM_TIME_KEY = b"\xff\xff\xff\xffagentstream.stream-time"
"""Reserved store key of a windowed partition's stream time: a 2**32-1 length prefix no window key
can have, so it sorts last. :func:`live_entries` leaves it out unless asked."""

WINDOW_INDEX_PREFIX = b"\xff\xff\xff\xfe"
"""Reserved prefix of a windowed partition's expiry index in a persistent store
(:mod:`agentstream.tables.window_index`): a length prefix no window key can have, sorting after every
window key (and Faust's JSON keys) and before the stream-time entry. Store-only entries: never in the
changelog, never in :func:`live_entries`. A stream-stream join's buffer keeps its record index under
sub-prefixes of it (its table's ``_index_entries`` is set)."""
WINDOW_INDEX_END = b"\xff\xff\xff\xff"

SLICE_SECONDS = 0.002  # a scan gives the loop back after this long
T = TypeVar("T")
WindowRange = tuple[float, float]


def live_entries(part: TablePartition, *, reserved: bool = False) -> Iterator[tuple[bytes, Any, bool]]:
    """``(key bytes, value, decoded)`` of every live entry: cache over pending writes over the store.

    ``decoded`` says ``value`` is a Python value (from the cache) rather than stored bytes;
    deleted keys are left out, and so is the stream-time entry unless ``reserved``; the store-only
    index entries of a windowed partition or a join buffer (the reserved index range) always are.
    """
    overlay: dict[bytes, tuple[Any, bool]] = {k: (raw, False) for k, raw in part.pending.items()}
    for k, v in part.cache.entries():
        overlay[k] = (v, True)
    store = part.store
    scan: Iterable[tuple[bytes, bytes]]
    table = part.table
    if getattr(table, "_windowed", None) is not None or getattr(table, "_index_entries", None) is not None:
        scan = itertools.chain(store.items(None, WINDOW_INDEX_PREFIX), store.items(WINDOW_INDEX_END, None))
    else:
        scan = store.items()
    for k, raw in scan:
        if k not in overlay and (reserved or k != STREAM_TIME_KEY):
            yield k, raw, False
    for k, (v, decoded) in overlay.items():
        if v is not None and (reserved or k != STREAM_TIME_KEY):
            yield k, v, decoded


# -- the table's public face -----------------------------------------------------------------------
def local_partitions(table: QueryableTable) -> list[TablePartition]:
    """The partitions this worker serves ``table`` from (active ones; every one of a global table)."""
    parts = table.parts
    return [parts[p] for p in sorted(parts) if parts[p].active or table.is_global]


def standby_partitions(table: QueryableTable) -> list[int]:
    """The partition numbers this worker holds as a standby replica only."""
    return sorted(p for p, part in table.parts.items() if not part.active and not table.is_global)


def encode_key(table: QueryableTable, key: Any) -> bytes:
    """The key's store bytes (the table's key codec); raises what the codec raises."""
    return table._key_dumps(key)


def key_partition(table: QueryableTable, key_bytes: bytes) -> int:
    """The partition the key's bytes belong to (where ``table[key]`` reads and writes)."""
    return table._home_partition(key_bytes)


@dataclass(frozen=True)
class WindowInfo:
    """A windowed table's geometry, in seconds."""

    kind: str  # "tumbling", "hopping" or "session"
    size: float
    step: float
    expires: float
    grace: float
    gap: float | None = None  # session windows: the inactivity gap (size, step and expires are 0)


def is_session(table: QueryableTable) -> bool:
    """Whether the table has session windows (``table.session(gap)``)."""
    return bool(getattr(table._windowed, "is_session", False))


def window_info(table: QueryableTable) -> WindowInfo | None:
    """The table's windows, or None when it is not windowed."""
    state = table._windowed
    if state is None:
        return None
    if is_session(table):
        return WindowInfo("session", 0.0, 0.0, 0.0, state.grace, state.window.gap)
    w = state.window
    return WindowInfo("tumbling" if w.step == w.size else "hopping", w.size, w.step, w.expires, state.grace)


def decode_entry(
    table: QueryableTable, key_bytes: bytes, value: Any, decoded: bool
) -> tuple[Any, WindowRange | None, Any]:
    """``(key, window range or None, value)`` of an entry from :func:`live_entries`; raises when
    the bytes do not decode with the table's codecs."""
    state = table._windowed
    if state is None:
        key, window = table.key_codec.loads(key_bytes), None
    elif is_session(table):
        kb, window = state.split_key(key_bytes)
        key = table.key_codec.loads(kb)
    else:
        kb, start = state.parse_window_key(key_bytes)
        key, window = table.key_codec.loads(kb), state.window_range(start)
    return key, window, value if decoded else table.value_codec.loads(value)


def stream_time(table: QueryableTable, part: TablePartition) -> float | None:
    """A windowed table partition's stream time in epoch seconds (None before its first write)."""
    state = table._windowed
    if state is None:
        return None
    ms = state.windows(part).stream_ms
    return None if ms is None else ms / 1000


def window_at(table: QueryableTable, at: float) -> WindowRange:
    """The window a read at time ``at`` (epoch seconds) looks in; raises ValueError/OverflowError
    for times no window key can hold."""
    state = table._windowed
    if state is None:
        raise ValueError(f"table {table.name!r} is not windowed")
    start, end = state.window.current(at)
    try:
        state.window_key(b"", start)  # a time the key format cannot hold fails here, not at the store
    except struct.error as exc:
        raise ValueError(str(exc)) from exc
    return start, end


def get(
    table: QueryableTable, part: TablePartition, key_bytes: bytes, window: WindowRange | None = None
) -> tuple[bool, Any]:
    """``(found, value)`` of a key (of one window of a windowed table) in a local partition."""
    if window is not None:
        key_bytes = table._windowed.window_key(key_bytes, window[0])
    return part.get_bytes(key_bytes)


def sessions(table: QueryableTable, part: TablePartition, key_bytes: bytes) -> dict[WindowRange, Any]:
    """``{(start, end): value}`` of the live sessions of a key in a local partition of a session
    table, earliest first (empty for a key without one)."""
    return table._windowed.sessions_in(part, key_bytes)  # type: ignore[no-any-return]


# -- key counts ----------------------------------------------------------------------------------------
def memory_usage(part: TablePartition) -> tuple[tuple[str, int], ...]:
    """Bytes the partition's store holds in memory, by kind, sorted (RocksDB's ``memory_usage``);
    empty for a store that does not say (the memory store: its size is the Python heap's)."""
    report = getattr(part.store, "memory_usage", None)
    if report is None:
        return ()
    try:
        return tuple(sorted(report().items()))
    except Exception:  # a store closed under the reader: no figure
        return ()


def key_count(part: TablePartition) -> int:
    """Keys in a partition, unflushed writes included, without scanning (never blocks).

    Memory stores count exactly. A RocksDB store answers RocksDB's ``estimate-num-keys`` (what Kafka
    Streams' ``approximateNumEntries`` reports): it counts an overwritten key again until a compaction
    merges the copies, so it may run high. An exact count would cost either a scan (about a second per
    million keys, repeated whenever the partition changes) or a look-up of every written key at each
    commit; the status page and ``/metrics`` take the estimate instead, and cost nothing per record.
    """
    store = part.store
    n = len(store)
    overlay: dict[bytes, bool] = {k: raw is not None for k, raw in part.pending.items()}
    for k, v in part.cache.entries():
        overlay[k] = v is not None
    for k, live in overlay.items():
        in_store = k in store
        if live and not in_store:
            n += 1
        elif not live and in_store:
            n -= 1
    indexed = getattr(part.table, "_index_entries", None)
    if indexed is not None:
        n -= indexed(part)  # a join buffer's store-only index entries
    windowed = part.table._windowed
    if windowed is not None:
        n -= windowed.index_entries(part)  # the expiry index's store-only entries
        if part.get_bytes(STREAM_TIME_KEY)[0]:
            n -= 1
    return max(n, 0)


async def sliced(items: Iterable[T], budget: float = SLICE_SECONDS) -> AsyncIterator[T]:
    """Iterate ``items``, yielding to the event loop whenever ``budget`` seconds have passed, so a
    long scan never stalls processing for more than a couple of milliseconds."""
    clock = time.perf_counter
    deadline = clock() + budget
    n = 0
    for item in items:
        yield item
        n += 1
        if n & 63 == 0 and clock() >= deadline:
            await asyncio.sleep(0)
            deadline = clock() + budget
