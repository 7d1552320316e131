"""Table-table joins (``table_a.join(table_b)``: a read-only :class:`JoinedTable` view),
``Table.from_topic`` and the key lookup both they and the stream joins use.

These live beside the Table (``tables.table`` imports this module) because they need nothing but
tables; the stream joins built on them are in :mod:`agentstream.joins` (see its
:mod:`~agentstream.joins.tables` for the semantics of every join with a table).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..exceptions import TopologyError
from ..transport.partitioner import default_partition
from .partition import TableNotReady
from .rows import Rows

if TYPE_CHECKING:
    from ..topics import Topic
    from .table import Table

__all__ = ["JoinedTable", "from_topic", "lookup"]


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
