"""What every join shares: the join sources registry, the joined stream's input, result events.

How a join sees both sides
--------------------------
A join is deterministic only if both sides reach it in one task, in timestamp order: a task with
several input partitions hands out the buffered record with the lowest timestamp (and waits up to
``max_task_idle`` for a lagging input). So ``stream.join(payments, within=...)`` (and a join with a
table declared ``from_topic(topic)``) makes the other topic an additional *source of the joining
agent's sub-topology*: the agent is written over its own topic only (``@app.agent(orders)``), and
the join call, made before the agent first iterates, is seen by the agent's first instance, which
discovers the split points (:func:`agentstream.topology.discover_splits`). The alternative, making the agent
declare ``@app.agent([orders, payments])`` and splitting by topic, gives the same task but makes
every agent over the pair handle the other side's records itself; registering the source keeps
the Faust-style ``async for order, payment in stream.join(payments, within=...)``.

A joined stream is a :class:`~agentstream.streams.Stream` over a :class:`JoinInput`: the input
pulls raw records from the task, applies the operations made before the join (``filter``...) to
the joining side only, feeds the other side's records to the join state (those records are never
yielded), and hands out one result event per join result. A source record is acknowledged when
the last result it produced is (at once when it produced none), in order, so its offset is never
committed before its results were handled.
"""

from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..events import Event, set_current_event
from ..exceptions import AgentError, TopologyError
from ..transport.message import Message

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..streams import SplitPoint, Stream, StreamInput
    from ..tables.table import Table
    from ..topics import Topic

__all__ = ["JoinSource", "JoinInput", "Joiner", "join_sources", "reset_join_sources", "result_event"]


@dataclass
class JoinSource:
    """A topic a join adds to one stage of an agent, and the tables that must match its partitions."""

    topic: Topic
    what: str  # how the join was written, for error messages: "stream.join(payments, within=300.0s)"
    tables: list[Table] = field(default_factory=list)


_SOURCES: weakref.WeakKeyDictionary[Agent, dict[int, list[JoinSource]]] = weakref.WeakKeyDictionary()
_TABLE_REQUIREMENTS: weakref.WeakKeyDictionary[Agent, dict[int, list[tuple[str, Table]]]] = weakref.WeakKeyDictionary()
_WRITERS: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, int, str]]] = weakref.WeakKeyDictionary()
"""App -> name of a table a join writes (from_topic tables, join buffers) -> (agent, stage, join):
one writer only. Keyed by app and table name (names are unique within an app)."""


def join_sources(agent: Agent, stage: int) -> list[JoinSource]:
    """The topics joins add to ``agent``'s ``stage``-th sub-topology (found at discovery)."""
    return list(_SOURCES.get(agent, {}).get(stage, ()))


def joined_tables(agent: Agent, stage: int) -> list[tuple[str, Table]]:
    """``(join description, table)`` for every partitioned table a join of that stage reads."""
    return list(_TABLE_REQUIREMENTS.get(agent, {}).get(stage, ()))


def reset_join_sources(agent: Agent) -> None:
    """Forget what an earlier discovery found (the first instance registers everything again)."""
    _SOURCES.pop(agent, None)
    _TABLE_REQUIREMENTS.pop(agent, None)
    writers = _WRITERS.get(agent.app, {})
    for table_name, (name, _, _) in list(writers.items()):
        if name == agent.name:
            del writers[table_name]


def _agent_of(inp: Any) -> Agent | None:
    return getattr(inp, "agent", None)


def register(stream: Stream, source: JoinSource | None, tables: list[Table], what: str) -> None:
    """Record a join for topology building (during discovery) or check it against the topology.

    Only discovery registers (``probing`` is set on the first instance's input until the topology
    is fixed); a task checks that the agent makes
    the same join it made at discovery, like :meth:`StreamTask.split` does for split points.
    """
    inp: Any = stream._input
    agent = _agent_of(inp)
    if agent is None:
        return
    stage = stream._splits
    if getattr(inp, "probing", False):
        if agent.concurrency != 1:
            raise TopologyError(
                f"agent {agent.name!r}: {what} needs its records in timestamp order, one at a time; "
                f"remove concurrency={agent.concurrency} (joins run with concurrency=1)"
            )
        if source is not None:
            found = _SOURCES.setdefault(agent, {}).setdefault(stage, [])
            if any(s.topic.name == source.topic.name for s in found):
                raise TopologyError(
                    f"agent {agent.name!r} joins topic {source.topic.name!r} twice in one stage; "
                    "join it once and reuse the joined stream"
                )
            if stage == 0 and source.topic.name in {t.name for t in agent.topics}:
                raise TopologyError(
                    f"agent {agent.name!r}: {what} joins the agent's own topic {source.topic.name!r}; "
                    "a self-join is not supported (read the topic once and join it with another)"
                )
            found.append(source)
            for table in source.tables:
                writer = _WRITERS.setdefault(table.app, {}).setdefault(table.name, (agent.name, stage, what))
                if writer[:2] != (agent.name, stage):
                    raise TopologyError(
                        f"agent {agent.name!r} makes {what}, but agent {writer[0]!r} already makes {writer[2]}: "
                        f"the joining task keeps table {table.name!r} up to date from topic "
                        f"{source.topic.name!r}, so only one agent may join it. Fix: join it in one agent, "
                        "declare one table per agent, or use a GlobalTable"
                    )
        reqs = _TABLE_REQUIREMENTS.setdefault(agent, {}).setdefault(stage, [])
        for table in tables:
            reqs.append((what, table))
        return
    if source is not None and agent.discovered:
        known = {s.topic.name for s in join_sources(agent, stage)}
        if source.topic.name not in known:
            raise AgentError(
                f"agent {agent.name!r} made {what} at stage {stage}, but its topology (found when the "
                f"worker started) joins {sorted(known) or 'nothing'} there; an agent must make the same "
                "stream operations every time it runs"
            )


def result_event(key: Any, value: Any, like: Event, timestamp_ms: int | None = None, message: Any = None) -> Event:
    """A join result: ``value`` (a pair) with the record position of ``like`` (or ``message``).

    The result carries the join's output time (Kafka Streams: the larger of the two record
    times), which sends made while handling it use, so event time flows downstream.
    """
    m = like.message if message is None else message
    if timestamp_ms is not None and timestamp_ms != m.timestamp_ms:
        m = Message(
            m.topic, m.partition, m.offset, timestamp_ms, m.timestamp_type, m.key, m.value, None, -1, -1, m.headers
        )
    return Event(key, value, m, like.tp if message is None else None)


class Joiner(Protocol):
    """One join's logic; ``right_topics`` are the topics whose records it consumes."""

    right_topics: frozenset[str]

    def on_left(self, event: Event) -> list[Event]:
        """Results for a record of the joining stream (empty: nothing to emit)."""
        ...

    def on_right(self, event: Event) -> list[Event]:
        """Results for a record of the other side (its state is updated)."""
        ...


class _Pending:
    """A source record and how many of its results are still unacknowledged."""

    __slots__ = ("event", "remaining")

    def __init__(self, event: Event, remaining: int) -> None:
        self.event = event
        self.remaining = remaining


class JoinInput:
    """The :class:`StreamInput` of a joined stream (see the module docstring)."""

    def __init__(self, parent: Stream, joiner: Joiner, foreign: frozenset[str]) -> None:
        self._inner: StreamInput = parent._input
        self._processors = parent._processors
        self._joiner = joiner
        self._right = joiner.right_topics
        self._foreign = foreign  # topics other joins of this stage consume: passed through raw
        self.stage = parent._input.stage
        self.agent = _agent_of(parent._input)
        self.probing: bool = bool(getattr(parent._input, "probing", False))
        self._out: deque[Event] = deque()
        self._origin: dict[int, _Pending] = {}
        self._order: deque[_Pending] = deque()

    async def next_event(self, timeout: float | None = None) -> Event | None:
        out = self._out
        while not out:
            event = await self._inner.next_event(timeout)
            if event is None:
                return None
            topic = event.message.topic
            if topic in self._right:
                results = self._joiner.on_right(event)
            elif topic in self._foreign:
                results = [event]
            else:
                if not await self._keep(event):
                    continue
                results = self._joiner.on_left(event)
            pending = _Pending(event, len(results))
            self._order.append(pending)
            for r in results:
                self._origin[id(r)] = pending
            out.extend(results)
            if not results:
                self._release()
        return out.popleft()

    async def _keep(self, event: Event) -> bool:
        """The operations made before the join, for the joining side only."""
        for proc in self._processors:
            keep = proc(event)
            if not isinstance(keep, bool):
                keep = await keep
            if not keep:
                self._order.append(_Pending(event, 0))
                self._release()
                return False
        set_current_event(event)
        return True

    def ack(self, event: Event) -> None:
        pending = self._origin.pop(id(event), None)
        if pending is None:
            return
        pending.remaining -= 1
        self._release()

    def _release(self) -> None:
        """Acknowledge fully handled source records, oldest first."""
        order = self._order
        while order and order[0].remaining <= 0:
            self._inner.ack(order.popleft().event)

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        raise TopologyError(
            f"{point.kind}({point.name!r}) after a join is not supported: join after repartitioning "
            "(stream.group_by(...).join(...)), or send the joined values to a topic yourself and read "
            "that topic in another agent"
        )
