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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..events import Event
from ..tables.joined import JoinedTable, from_topic, lookup
from ..tables.partition import TableNotReady

if TYPE_CHECKING:
    from ..tables.table import Table

__all__ = ["from_topic", "TableJoin", "GlobalTableJoin", "JoinedTable", "lookup"]


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

    def __init__(self, table: Table, kind: str, key: Callable[[Any], Any] | None) -> None:
        self.table = table
        self.inner = kind == "inner"
        self.key = key

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
