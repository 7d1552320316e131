"""Joins: stream-table, stream-GlobalTable, stream-stream (windowed) and table-table.

Faust never had them; the semantics are Kafka Streams', the ergonomics Faust's:

.. code-block:: python

    customers = app.GlobalTable("customers").from_topic(customers_topic)
    prices = app.Table("prices").from_topic(prices_topic)          # co-partitioned with orders

    @app.agent(orders)
    async def enrich(stream):
        async for order, customer in stream.left_join(customers, key=lambda o: o["customer_id"]):
            ...
        # or: stream.join(prices)                                    -> (order, price)
        # or: stream.join(payments, within=timedelta(minutes=5))    -> (order, payment)

    view = table_a.join(table_b)                                     # view[k] == (a, b)

See :mod:`.core` for how both sides of a join meet in one task, :mod:`.tables` for the table
joins and :mod:`.windowed` for the stream-stream semantics (what is emitted when, lateness).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..durations import Seconds, to_seconds
from ..exceptions import TopologyError
from ..tables.joined import JoinedTable, from_topic, lookup
from ..tables.table import Table
from ..topics import Topic
from .core import JoinInput, JoinSource, join_sources, joined_tables, register, reset_join_sources
from .tables import GlobalTableJoin, TableJoin
from .windowed import StreamStreamJoin

if TYPE_CHECKING:
    from ..streams import Stream

__all__ = [
    "JoinedTable",
    "JoinSource",
    "StreamStreamJoin",
    "from_topic",
    "join_sources",
    "joined_tables",
    "join_stream",
    "lookup",
    "reset_join_sources",
]

KINDS = ("inner", "left", "outer")
_METHOD = {"inner": "join", "left": "left_join", "outer": "outer_join"}


def _ms(value: Seconds, what: str) -> int:
    secs = to_seconds(value)
    if secs < 0:
        raise TopologyError(f"join {what} must be >= 0, got {value!r}")
    return round(secs * 1000)


def join_stream(
    stream: Stream,
    other: Any,
    kind: str,
    *,
    within: Seconds | None = None,
    grace: Seconds | None = None,
    key: Callable[[Any], Any] | None = None,
    name: str | None = None,
) -> Stream:
    """The implementation of ``Stream.join``/``left_join``/``outer_join``: a joined stream of pairs.

    ``key`` is already a function (``Stream.join`` turns a field or a name into one)."""

    if kind not in KINDS:
        raise ValueError(f"join kind must be one of {KINDS}, got {kind!r}")
    method = _METHOD[kind]
    inp: Any = stream._input
    agent = getattr(inp, "agent", None)
    if isinstance(other, JoinedTable):
        raise TopologyError(
            f"stream.{method}() of a table-table join view is not supported; join the tables one by one"
        )
    if isinstance(other, Table):
        if within is not None or grace is not None:
            raise TopologyError(f"stream.{method}(table {other.name!r}): within=/grace= are for joins of two streams")
        if kind == "outer":
            raise TopologyError(
                f"stream.outer_join(table {other.name!r}): a stream-table join is inner or left "
                "(stream.join / stream.left_join), as in Kafka Streams"
            )
        if other._windowed is not None:
            raise TopologyError(f"stream.{method}(): table {other.name!r} is windowed; joining it is not supported")
        joiner: Any
        if other.is_global:
            what = f"stream.{method}(global table {other.name!r})"
            register(stream, None, [], what)
            joiner = GlobalTableJoin(other, kind, key)
        else:
            what = f"stream.{method}(table {other.name!r})"
            if key is not None:
                raise TopologyError(
                    f"{what} with key=: the lookup key must be the record key, because table partition p holds "
                    f"only the keys of partition p. Fix: repartition first, stream.group_by(key_fn, name=...)."
                    f"{method}({other.name}), or make {other.name!r} a GlobalTable"
                )
            src = other.source_topic
            register(stream, None if src is None else JoinSource(src, what, [other]), [other], what)
            joiner = TableJoin(other, kind)
    elif isinstance(other, (Topic, str)):
        if isinstance(other, str):
            app = getattr(agent, "app", None)
            if app is None:
                raise TopologyError(f"stream.{method}({other!r}): pass the Topic object (app.topic(name))")
            other = app.topic(other)
        topic: Topic = other
        what = f"stream.{method}({topic.name!r}, within=...)"
        if within is None:
            raise TopologyError(
                f"{what}: a join of two streams needs within= (seconds or a timedelta): records "
                "join when their timestamps are at most that far apart"
            )
        if key is not None:
            raise TopologyError(
                f"{what} with key=: streams join on their record keys; re-key the stream first "
                "with stream.group_by(key_fn, name=...)"
            )
        if isinstance(inp, JoinInput):
            raise TopologyError(f"{what} after another join: make the stream-stream join first, then join tables")
        table = _buffer_table(topic, agent, name)
        register(stream, JoinSource(topic, what, [table]), [table], what)
        joiner = StreamStreamJoin(topic.app, table, topic.name, kind, _ms(within, "within"), _ms(grace or 0, "grace"))
    else:
        hint = " (pass the topic the other stream reads)" if hasattr(other, "_input") else ""
        raise TopologyError(f"stream.{method}() takes a Table, a GlobalTable or a Topic, got {other!r}{hint}")
    foreign: frozenset[str] = frozenset()
    if agent is not None:
        foreign = frozenset(s.topic.name for s in join_sources(agent, stream._splits)) - joiner.right_topics
    return type(stream)(JoinInput(stream, joiner, foreign), (), stream._splits)


def _buffer_table(topic: Topic, agent: Any, name: str | None) -> Table:
    """The internal table holding both sides of a stream-stream join (created once, at discovery)."""

    app = topic.app
    owner = getattr(agent, "name", "stream")
    table_name = name or f"{owner}-join-{topic.name}"
    existing = app.tables.get(table_name)
    if existing is not None:
        return existing
    table = Table(
        app,
        table_name,
        partitions=topic._partitions,
        key_serializer="raw",
        value_serializer="raw",
        help=f"join buffer of agent {owner} with {topic.name}",
    )
    app._add_table(table)
    return table
