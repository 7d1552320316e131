"""Tables: dict-like views over partitioned state stores, every change sent to a changelog.

A write inside an agent goes to the partition of the record being handled (the task's partition
number), so a table is partitioned exactly like the stream that updates it. Writes land in a
write-back cache; at commit the cache goes to the changelog, and only once the producer has
confirmed delivery are the values written to the local store. The store therefore never holds
a value the changelog lacks, which is what makes replaying the changelog tail after a crash
give back exactly the changelog's state.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .. import codecs
from ..events import current_event
from ..exceptions import SerializationError, TopologyError
from ..runtime import current_runtime, current_task, runtime_for
from ..transport.partitioner import default_partition
from .partition import TableNotReady, TablePartition

if TYPE_CHECKING:
    from ..app import App
    from ..topics import Topic
    from ..joins import JoinedTable
    from .windowed import WindowedTable

log = logging.getLogger(__name__)
_NO_KEY = object()
_IMMUTABLE_KEYS = (str, int, bytes)  # exact types: memoising their encoding is safe

__all__ = ["Table", "TablePartition", "TableNotReady"]

class Table:
    """``app.Table(name, default=int)``: a partitioned, changelog-backed dict (Faust's Table)."""

    is_global = False
    _windowed: Any = None  # the shared window state once tumbling()/hopping() was called
    source_topic: "Topic | None" = None  # set by from_topic(): the table mirrors this topic
    eos = False  # set by the TableManager under processing_guarantee='exactly_once'
    _writer_subtopology: int | None = None  # exactly_once: the one sub-topology allowed to write

    def __init__(
        self,
        app: "App",
        name: str,
        *,
        default: Callable[[], Any] | None = None,
        partitions: int | None = None,
        key_type: Any = None,
        value_type: Any = None,
        key_serializer: str | None = "json",
        value_serializer: str | None = None,
        store: str | None = None,
        help: str | None = None,
        on_window_close: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.app = app
        self.on_window_close = on_window_close  # used once windowed (Faust puts it here)
        self.name = name
        self.default = default
        self._partitions = partitions
        self.store_url = store
        self.help = help or ""
        self.key_codec = codecs.codec_for(key_type, None if key_type is not None else key_serializer)
        self.value_codec = codecs.codec_for(value_type, value_serializer if value_type is None else None)
        self.changelog_topic: "Topic" = app.topic(
            f"{app.id}-{name}-changelog", partitions=partitions, key_serializer="raw", value_serializer="raw",
            internal=True, compacted=True,
        )
        self._key_codec_dumps = self.key_codec.dumps
        self._last_key: Any = _NO_KEY
        self._last_kb = b""

    def _key_dumps(self, key: Any) -> bytes:
        # A read-modify-write (``t[k] = t[k] + 1``) encodes the same key twice in a row: remember
        # the last one. Only for immutable key types, so a mutated key is never served stale.
        if key is self._last_key:
            return self._last_kb
        try:
            kb = self._key_codec_dumps(key)
        except SerializationError as exc:
            hint = (" (keys of a topic without key_type arrive as bytes: declare the topic with key_type=str, "
                    "or give the table key_type=bytes)") if isinstance(key, (bytes, bytearray)) else ""
            raise SerializationError(f"table {self.name!r} cannot encode key {key!r}: {exc}{hint}") from exc
        if kb is None:
            raise KeyError("a table key cannot be None")
        if type(key) in _IMMUTABLE_KEYS:
            self._last_key, self._last_kb = key, kb
        return kb

    @property
    def partitions(self) -> int:
        return self.changelog_topic.partitions

    @property
    def parts(self) -> dict[int, TablePartition]:
        """This worker's partitions of the table: runtime state, kept in the app's runtime context."""
        return runtime_for(self.app).table_partitions(self.name)

    # -- routing ---------------------------------------------------------------------------------
    def _partition_for(self, key_bytes: bytes, write: bool) -> TablePartition:
        event = current_event()
        if event is not None and not self.is_global:
            number = event.message.partition
        else:
            number = default_partition(key_bytes, self.partitions)
        rt = current_runtime.get()  # inlined runtime_for(): this runs for every table read and write
        if rt is None or rt.app is not self.app:
            rt = runtime_for(self.app)
        parts = rt.partitions.get(self.name)
        part: TablePartition | None = None if parts is None else parts.get(number)
        if part is None:
            raise TableNotReady(
                f"table {self.name!r} partition {number} is not on this worker"
                + ("" if event is not None else "; outside an agent, ask the worker that owns the key")
            )
        return part

    def _claim(self, part: TablePartition) -> None:
        """exactly_once: attribute the partition's writes to the current task's transaction.

        Two sub-topologies writing one table would put one partition's changelog into two
        transactions that commit separately (a lost update or a double count after a crash),
        so like Kafka Streams (a store belongs to one sub-topology) that is refused.
        """
        task = current_task.get()
        if task is not None and part.writer == task.id:
            return
        if task is None:
            raise TopologyError(
                f"table {self.name!r} was written outside an agent (timer, task or web view) under "
                "processing_guarantee='exactly_once', where every table write must belong to the transaction "
                "of the record that caused it. Fix: write tables from agents only, or use at_least_once"
            )
        owner = self._writer_subtopology
        if owner is None:
            self._writer_subtopology = owner = task.id.subtopology
        if owner != task.id.subtopology:
            raise TopologyError(
                f"table {self.name!r} is written by two sub-topologies ({owner} and {task.id.subtopology}, agent "
                f"{task.agent.name!r}) under processing_guarantee='exactly_once'; each task commits its own "
                "transaction, so one table partition cannot take writes from two. Fix: write the table from "
                "one agent stage (send to that stage instead), or use at_least_once"
            )
        part.writer = task.id

    def _send_changelog(self, part: TablePartition, entries: list[tuple[int, bytes, Any]]) -> None:
        """Queue changelog records (sent at commit time by the manager's producer)."""
        dumps = self.value_codec.dumps
        for _, key, value in entries:
            raw = None if value is None else dumps(value)
            part.pending[key] = raw
        manager = runtime_for(self.app).tables
        if manager is not None:
            manager.queue_send(part, [(k, part.pending[k]) for _, k, _ in entries])

    # -- dict API ---------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        kb = self._key_dumps(key)
        found, value = self._partition_for(kb, False).get_bytes(kb)
        if found:
            return value
        if self.default is not None:
            return self.default()
        raise KeyError(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        kb = self._key_dumps(key)
        self._partition_for(kb, True).set(kb, value)

    def __delitem__(self, key: Any) -> None:
        kb = self._key_dumps(key)
        part = self._partition_for(kb, True)
        found, _ = part.get_bytes(kb)
        if not found:
            raise KeyError(key)
        part.set(kb, None)

    def __contains__(self, key: object) -> bool:
        kb = self._key_dumps(key)
        try:
            return self._partition_for(kb, False).get_bytes(kb)[0]
        except TableNotReady:
            return False

    def get(self, key: Any, default: Any = None) -> Any:
        kb = self._key_dumps(key)
        try:
            found, value = self._partition_for(kb, False).get_bytes(kb)
        except TableNotReady:
            return default
        return value if found else default

    def pop(self, key: Any, *default: Any) -> Any:
        try:
            value = self[key] if key in self else None
            if key not in self:
                raise KeyError(key)
            del self[key]
            return value
        except KeyError:
            if default:
                return default[0]
            raise

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, other: Any = (), **kwargs: Any) -> None:
        items = other.items() if hasattr(other, "items") else other
        for k, v in list(items) + list(kwargs.items()):
            self[k] = v

    # -- windowing ---------------------------------------------------------------------------------
    def tumbling(self, size: Any, expires: Any = None, *, grace: Any = 0.0,
                 on_window_close: Callable[[Any, Any], Any] | None = None) -> "WindowedTable":
        """This table as a :class:`~agentstream.tables.windowed.WindowedTable` of ``size``-second windows."""
        from .windowed import tumbling

        return tumbling(self, size, expires, grace=grace, on_window_close=on_window_close or self.on_window_close)

    def hopping(self, size: Any, step: Any, expires: Any = None, *, grace: Any = 0.0,
                on_window_close: Callable[[Any, Any], Any] | None = None) -> "WindowedTable":
        """This table as a WindowedTable of ``size``-second windows starting every ``step`` seconds."""
        from .windowed import hopping

        return hopping(self, size, step, expires, grace=grace,
                       on_window_close=on_window_close or self.on_window_close)

    # -- joins (agentstream.joins) ---------------------------------------------------------------
    def from_topic(self, topic: "Topic") -> "Table":
        """Keep this table equal to the latest value per key of ``topic`` (Kafka Streams' KTable);
        ``stream.join(table)`` then reads ``topic`` in the joining task, in timestamp order."""
        from ..joins import from_topic

        return from_topic(self, topic)

    def join(self, other: "Table") -> "JoinedTable":
        """A read-only view: ``view[k] == (self[k], other[k])`` for keys in both tables."""
        from ..joins import join_tables

        return join_tables(self, other, "inner")

    def left_join(self, other: "Table") -> "JoinedTable":
        """A read-only view over this table's keys: ``(self[k], other.get(k))``."""
        from ..joins import join_tables

        return join_tables(self, other, "left")

    def outer_join(self, other: "Table") -> "JoinedTable":
        """A read-only view over the keys of either table (the missing side None)."""
        from ..joins import join_tables

        return join_tables(self, other, "outer")

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every key of the partitions this worker holds (cache and pending writes included)."""
        if self._windowed is not None:  # keys are (key, (start, end)), like Faust's windowed tables
            yield from self._windowed.items()
            return
        kloads, vloads = self.key_codec.loads, self.value_codec.loads
        for part in list(self.parts.values()):
            overlay: dict[bytes, Any] = {}
            for k, raw in part.pending.items():
                overlay[k] = None if raw is None else vloads(raw)
            for _, k, v in part.cache.entries():
                overlay[k] = v
            for k, raw in part.store.items():
                if k in overlay:
                    continue
                yield kloads(k), vloads(raw)
            for k, v in overlay.items():
                if v is not None:
                    yield kloads(k), v

    def keys(self) -> Iterator[Any]:
        return (k for k, _ in self.items())

    def values(self) -> Iterator[Any]:
        return (v for _, v in self.items())

    def as_dict(self) -> dict[Any, Any]:
        return dict(self.items())

    def __iter__(self) -> Iterator[Any]:
        return self.keys()

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    def __repr__(self) -> str:
        return f"<Table {self.name} partitions={self.partitions}>"


class GlobalTable(Table):
    """Every worker holds every partition (restored before agents start); reads see all keys."""

    is_global = True


class SetTable(Table):
    """A table of sets (Faust's SetTable): ``table[k].add(x)`` is written back automatically."""

    def __init__(self, app: "App", name: str, **kwargs: Any) -> None:
        kwargs.setdefault("default", set)
        super().__init__(app, name, **kwargs)
        self.value_codec = _SetCodec()

    def __getitem__(self, key: Any) -> Any:
        return _ManagedSet(self, key, super().__getitem__(key))


class SetGlobalTable(SetTable, GlobalTable):
    """A table of sets held in full by every worker (Faust's SetGlobalTable)."""


class _SetCodec:
    def dumps(self, obj: Any) -> bytes | None:
        return codecs.get("json").dumps(sorted(obj, key=repr))

    def loads(self, data: bytes | None) -> set[Any]:
        return set(codecs.get("json").loads(data) or ())


class _ManagedSet(set):  # type: ignore[type-arg]
    """A set that writes itself back to its table on every change."""

    def __init__(self, table: Table, key: Any, items: Any) -> None:
        super().__init__(items or ())
        self._table, self._key = table, key

    def _save(self) -> None:
        Table.__setitem__(self._table, self._key, set(self))

    def add(self, item: Any) -> None:
        super().add(item)
        self._save()

    def discard(self, item: Any) -> None:
        super().discard(item)
        self._save()

    def remove(self, item: Any) -> None:
        super().remove(item)
        self._save()

    def update(self, *others: Any) -> None:
        super().update(*others)
        self._save()

    def clear(self) -> None:
        super().clear()
        self._save()
