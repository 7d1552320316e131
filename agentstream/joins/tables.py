"""Joins with tables: stream-table, stream-GlobalTable, and table-table (a read-only view).

Stream-table (``stream.join(table)`` / ``left_join``), Kafka Streams' KStream-KTable join:

* The table should be declared ``app.Table(name).from_topic(topic)``: the join then adds ``topic``
  to the joining agent's sub-topology, and the task applies its records to the table (a value
  replaces the key's value, ``None`` deletes it) interleaved with the stream's records in
  timestamp order. A stream record therefore sees the table *as of its own time* in that task
  (on equal timestamps, the topic whose name sorts first goes first), which makes the results
  deterministic for replayed input, up to ``max_task_idle`` (a lagging input that is not waited
  for is read later). The table keeps only the latest value per key (not versioned): an
  out-of-order table record overwrites a newer one, as in Kafka Streams' default stores.
* A table without ``from_topic`` (written by another agent, Faust style) is only looked up: the
  join sees whatever that agent has written by then, in no defined order with the stream.
* The lookup key is the record key (re-encoded with the table's key codec); the table must be
  co-partitioned with the stream (partition counts are checked when the topology is built; the
  key *bytes* must be equal on both topics too: ``group_by`` encodes the new key with Faust's raw
  keys by default, as any Kafka client writes a table topic (UTF-8 keys); for a table topic with
  JSON keys pass ``group_by(..., key_serializer="json")``). A ``key=``
  extractor would look in the wrong partition, so it is refused: ``stream.group_by(fn).join(table)``.
* Only the joining agent keeps a ``from_topic`` table up to date (one agent may join it; a table
  nobody joins stays empty): to share one table between agents, use a GlobalTable.
* Inner join: a record without a value in the table (or with a ``None`` key) gives nothing;
  left join: ``(value, None)``. Updates of the table emit nothing (the stream drives the join).

Stream-GlobalTable (``stream.join(global_table, key=lambda v: v.customer_id)``): every worker
holds the whole table, so no co-partitioning and any key. ``app.GlobalTable(name).from_topic(t)``
uses ``t`` itself as the changelog (Kafka Streams' GlobalKTable): restored in full before the
worker's agents start, then followed continuously; so lookups see the table as loaded *now*,
which is not synchronised with the stream's time (as in Kafka Streams).

Table-table (``table_a.join(table_b)``): a :class:`JoinedTable`, a read-only view computed on
every read from both tables' current contents, so it reflects a change of either side at once
and needs no store or changelog of its own. It emits no change stream; to react to changes,
join a stream with the table instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..events import Event
from ..exceptions import TopologyError
from ..tables.rows import Rows
from ..tables.table import TableNotReady
from ..transport.partitioner import default_partition

if TYPE_CHECKING:
    from ..tables.table import Table
    from ..topics import Topic

__all__ = ["from_topic", "TableJoin", "GlobalTableJoin", "JoinedTable", "lookup"]


def from_topic(table: Table, topic: Topic) -> Table:
    """Keep ``table`` equal to the latest value per key of ``topic`` (Kafka Streams' ``table(topic)``).

    The table takes the topic's key and value codecs. A GlobalTable uses the topic as its
    changelog (no copy); a partitioned table is updated by the task of the agent that joins it
    and keeps its own changelog, so the table partition matches the task's progress.
    """
    if table._windowed is not None:
        raise TopologyError(f"table {table.name!r} is windowed; a windowed table cannot be read from a topic")
    if table.source_topic is not None:
        raise TopologyError(f"table {table.name!r} already reads topic {table.source_topic.name!r}")
    table.key_codec = topic.key_codec
    table.value_codec = topic.value_codec
    if table.is_global:
        own = table.changelog_topic
        if table.app.topics.get(own.name) is own:
            del table.app.topics[own.name]
        table.changelog_topic = topic
    elif table._partitions is None and topic._partitions is not None:
        table.changelog_topic.partitions = topic._partitions
    table.source_topic = topic
    return table


def lookup(table: Table, key: Any, partition: int | None = None) -> tuple[bool, Any]:
    """``(found, value)`` of ``key``: in ``partition`` for a partitioned table, anywhere for a global one.

    A global table is searched in the key's default partition first, then in the others, so a
    table topic written with explicit partitions (or another partitioner) still finds its keys.
    """
    if key is None:
        return False, None
    kb = table._key_dumps(key)
    parts = table.parts
    if not table.is_global:
        if partition is None:
            try:
                return table._partition_for(kb, False).get_bytes(kb)
            except TableNotReady:
                return False, None
        part = parts.get(partition)
        if part is None:
            raise TableNotReady(f"table {table.name!r} partition {partition} is not on this worker")
        return part.get_bytes(kb)
    if not parts:
        raise TableNotReady(f"global table {table.name!r} is not loaded on this worker (is a worker running?)")
    first = default_partition(kb, table.partitions)
    part = parts.get(first)
    if part is not None:
        found, value = part.get_bytes(kb)
        if found:
            return True, value
    for number, part in parts.items():
        if number != first:
            found, value = part.get_bytes(kb)
            if found:
                return True, value
    return False, None


class TableJoin:
    """Stream-table join over a co-partitioned table (see the module docstring)."""

    def __init__(self, table: Table, kind: str) -> None:
        self.table = table
        self.inner = kind == "inner"
        source = table.source_topic
        self.right_topics = frozenset({source.name}) if source is not None else frozenset()

    def on_right(self, event: Event) -> list[Event]:
        kb = event.message.key
        if kb is None:
            return []  # a table record needs a key
        part = self.table.parts.get(event.message.partition)
        if part is None:
            raise TableNotReady(f"table {self.table.name!r} partition {event.message.partition} is not on this worker")
        part.set(kb, event.value)  # None: a tombstone deletes the key
        return []

    def on_left(self, event: Event) -> list[Event]:
        found, value = lookup(self.table, event.key, event.message.partition)
        if not found:
            if self.inner:
                return []
            value = None
        return [Event(event.key, (event.value, value), event.message, event.tp)]


class GlobalTableJoin:
    """Stream-GlobalTable join: ``key(value)`` (default: the record key) looked up in the whole table."""

    right_topics: frozenset[str] = frozenset()

    def __init__(self, table: Table, kind: str, key: Any) -> None:
        from ..streams import _key_function

        self.table = table
        self.inner = kind == "inner"
        self.key = None if key is None else _key_function(key)[0]

    def on_right(self, event: Event) -> list[Event]:  # pragma: no cover - a global join has no source
        return []

    def on_left(self, event: Event) -> list[Event]:
        key = event.key if self.key is None else self.key(event.value)
        found, value = lookup(self.table, key)
        if not found:
            if self.inner:
                return []
            value = None
        return [Event(event.key, (event.value, value), event.message, event.tp)]


class JoinedTable(Rows):
    """``table_a.join(table_b)``: ``view[key] == (a_value, b_value)``, read-only, always current.

    Inner: keys in both tables; left: keys of ``a`` (``b_value`` None when missing); outer: keys
    of either (the missing side None). Reads route like the tables' own: inside an agent, the
    partition of the record being handled; outside, the key's partition (if this worker holds it).
    """

    def __init__(self, left: Table, right: Table, kind: str) -> None:
        for t in (left, right):
            if t._windowed is not None:
                raise TopologyError(f"table {t.name!r} is windowed; joining windowed tables is not supported")
        if not left.is_global and not right.is_global and left.partitions != right.partitions:
            raise TopologyError(
                f"tables {left.name!r} ({left.partitions} partitions) and {right.name!r} ({right.partitions} "
                "partitions) are not co-partitioned, so a key's rows live in different tasks. Fix: give them "
                "the same partitions=, and fill both from streams repartitioned by the same key (group_by)"
            )
        self.left, self.right, self.kind = left, right, kind
        self.name = f"{left.name}-{kind}-{right.name}"

    def _row(self, key: Any) -> tuple[bool, tuple[Any, Any]]:
        lf, lv = lookup(self.left, key)
        if not lf and self.kind != "outer":
            return False, (None, None)
        rf, rv = lookup(self.right, key)
        if not rf and self.kind == "inner":
            return False, (None, None)
        if not lf and not rf:
            return False, (None, None)
        return True, (lv, rv)

    def __getitem__(self, key: Any) -> tuple[Any, Any]:
        found, row = self._row(key)
        if not found:
            raise KeyError(key)
        return row

    def get(self, key: Any, default: Any = None) -> Any:
        found, row = self._row(key)
        return row if found else default

    def __contains__(self, key: object) -> bool:
        return self._row(key)[0]

    def items(self) -> Iterator[tuple[Any, tuple[Any, Any]]]:
        """Rows of the partitions this worker holds."""
        left = dict(self.left.items())
        right = dict(self.right.items())
        for k, lv in left.items():
            if k in right:
                yield k, (lv, right[k])
            elif self.kind != "inner":
                yield k, (lv, None)
        if self.kind == "outer":
            for k, rv in right.items():
                if k not in left:
                    yield k, (None, rv)

    def __repr__(self) -> str:
        return f"<JoinedTable {self.left.name} {self.kind} join {self.right.name}>"
