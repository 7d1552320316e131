"""The app's topology: sub-topologies built from the agents, split at repartition topics.

Each agent contributes one sub-topology per stage: stage 0 reads the agent's own topics and
ends at its first ``group_by``/``through``; stage *n* reads that split point's topic. The split
points are found from the agent's first instance, started before the worker joins the group: it
runs its preamble once and waits at its first ``__anext__`` for records (:func:`discover_splits`);
the worker's task adopts it later, so no agent code runs for discovery alone.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from .error_handling import ErrorAnswer, answer_of
from .events import Event, streams_in_hand
from .exceptions import TopologyError
from .streams import SplitPoint, Stream

if TYPE_CHECKING:
    from .agents.agent import Agent
    from .topics import Topic
    from .types import AppT as App  # the App's interface: app.py imports this module

log = logging.getLogger(__name__)

__all__ = ["FirstInput", "FirstInstance", "SubTopology", "Topology", "discover_splits"]


@dataclass
class SubTopology:
    id: int
    agent: Agent
    stage: int
    source_topic_objects: list[Topic]
    sink_topics: list[str] = field(default_factory=list)
    joins: list[str] = field(default_factory=list)  # how the stage's joins were written (messages)
    # the stage joins a table or another stream: its join state and stream time are per task, so
    # concurrency=1's one instance runs per task here, not one shared by the worker's tasks
    joined: bool = False

    @property
    def source_topics(self) -> list[str]:
        return [t.name for t in self.source_topic_objects]

    def describe(self) -> str:
        sinks = f" -> {', '.join(self.sink_topics)}" if self.sink_topics else ""
        joins = f" [{'; '.join(self.joins)}]" if self.joins else ""
        return (
            f"sub-topology {self.id}: {', '.join(self.source_topics)} -> agent {self.agent.name} "
            f"(stage {self.stage}){joins}{sinks}"
        )


class Topology:
    """All sub-topologies of an app, and which of them read each topic."""

    def __init__(self, subtopologies: list[SubTopology]) -> None:
        self.subtopologies = subtopologies
        self.by_topic: dict[str, list[SubTopology]] = {}
        for st in subtopologies:
            for name in st.source_topics:
                self.by_topic.setdefault(name, []).append(st)

    @property
    def source_topics(self) -> list[str]:
        return sorted(self.by_topic)

    def check_copartitioning(self, counts: dict[str, int]) -> None:
        """Inputs of one sub-topology meet in one task, so they need equal partition counts."""
        for st in self.subtopologies:
            seen = {name: counts[name] for name in st.source_topics if name in counts}
            if len(set(seen.values())) > 1:
                detail = ", ".join(f"{n} has {c}" for n, c in sorted(seen.items()))
                if st.joins:
                    raise TopologyError(_join_copartition_message(st, detail))
                raise TopologyError(
                    f"agent {st.agent.name!r} reads topics that are not co-partitioned ({detail}); "
                    "records with the same key would meet in different tasks. Fix: give the topics "
                    "the same partition count, or group_by() one side so it is repartitioned"
                )

    def describe(self) -> str:
        return "\n".join(st.describe() for st in self.subtopologies)

    @classmethod
    def build(cls, agents: list[Agent]) -> Topology:
        from .joins import join_sources, joined_tables

        subs: list[SubTopology] = []
        for agent in agents:
            for stage in range(agent.stages):
                sinks = []
                if stage < len(agent.splits):
                    t = agent.splits[stage].topic
                    assert t is not None
                    sinks.append(t.name)
                if stage == agent.stages - 1:
                    sinks.extend(getattr(s, "name", repr(s)) for s in agent.sinks)
                # A join's other topic is read by the joining stage's task itself (agentstream.joins).
                topics = list(agent.stage_topics(stage))
                for src in join_sources(agent, stage):
                    if all(t.name != src.topic.name for t in topics):
                        topics.append(src.topic)
                st = SubTopology(len(subs), agent, stage, topics, sinks)
                st.joins = sorted({what for what, _ in joined_tables(agent, stage)})
                st.joined = bool(st.joins or join_sources(agent, stage))
                _check_join_partitions(st, joined_tables(agent, stage))
                subs.append(st)
        return cls(subs)


def _join_copartition_message(st: SubTopology, detail: str) -> str:
    return (
        f"agent {st.agent.name!r} makes {', '.join(st.joins)} over topics that are not co-partitioned "
        f"({detail}); a key's records on the two sides would meet in different tasks, so the join would miss "
        "them. Fix: give the topics the same partition count, or repartition one side by the join key "
        "first: stream.group_by(key_fn, name=..., partitions=N).join(...) (N = the other side's count)"
    )


def _check_join_partitions(st: SubTopology, tables: list[tuple[str, Any]]) -> None:
    """At build time, from the declared counts: a join's inputs and tables must be co-partitioned."""
    if not st.joins:
        return
    seen = {t.name: t.partitions for t in st.source_topic_objects}
    if len(set(seen.values())) > 1:
        raise TopologyError(_join_copartition_message(st, ", ".join(f"{n} has {c}" for n, c in sorted(seen.items()))))
    count = next(iter(seen.values()))
    for what, table in tables:
        if table.partitions != count:
            raise TopologyError(
                f"agent {st.agent.name!r} makes {what}, but table {table.name!r} has {table.partitions} partitions "
                f"and the joined stream {', '.join(sorted(seen))} {count}: table partition p must hold the keys of "
                f"stream partition p. Fix: declare the table with partitions={count} (its changelog topic "
                f"{table.changelog_topic.name!r} must have {count} partitions too), or repartition the stream "
                f"with group_by(..., partitions={table.partitions})"
            )


class FirstInput:
    """The stream input of an agent's first instance, started before the worker joins the group.

    Until partitions are assigned it hands out nothing: the instance runs its preamble (the code
    before ``async for``) and waits at its first ``__anext__``. The split points it declares by
    then are the agent's topology; a split declared after discovery ended (late in the preamble,
    or inside the loop) is a :class:`TopologyError` naming it, never silently missed. Once a task
    adopts the instance (:meth:`bind`), its streams read the task's input directly."""

    def __init__(self, app: App, agent: Agent) -> None:
        self.app = app
        self.agent = agent
        self.points: list[SplitPoint] = []
        self.frozen = False  # discovery ended: the topology is built from ``points``
        self.asked = asyncio.Event()  # the instance asked for its first record
        self._bound = asyncio.Event()
        self._target: Any = None
        self._out_of_order = False

    @property
    def probing(self) -> bool:
        """Joins made while discovery runs register their sources (agentstream.joins)."""
        return not self.frozen

    @property
    def stage(self) -> int:
        # every split the instance declares is upstream of it: it runs the agent's last stage
        return len(self.points) if self._target is None else int(self._target.stage)

    @property
    def partitions(self) -> Any:
        return getattr(self._target, "partitions", ())

    async def next_event(self, timeout: float | None = None) -> Event | None:
        if self._target is None:
            self.asked.set()
            if timeout is None:
                await self._bound.wait()
            else:
                try:
                    await asyncio.wait_for(self._bound.wait(), timeout)
                except TimeoutError:
                    return None
        event: Event | None = await self._target.next_event(timeout)
        return event

    def ack(self, event: Event) -> None:
        self._target.ack(event)

    def acks_out_of_order(self) -> None:
        self._out_of_order = True
        if self._target is not None and hasattr(self._target, "acks_out_of_order"):
            self._target.acks_out_of_order()

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        if index > len(self.points):
            if self.frozen:
                raise TopologyError(late_split_message(self.agent, point, len(self.points)))
            self.app._resolve_split(self.agent, point)
            self.points.append(point)
        return self.points[index - 1]

    def bind(self, target: Any, hand: list[Stream]) -> None:
        """Partitions are assigned: read ``target`` (a task or the agent's shared input)."""
        self._target = target
        if self._out_of_order and hasattr(target, "acks_out_of_order"):
            target.acks_out_of_order()
        for stream in hand:
            if stream._input is cast(Any, self):
                stream._rebind(target)
        self._bound.set()


def late_split_message(agent: Agent, point: SplitPoint, known: int) -> str:
    return (
        f"agent {agent.name!r} made {point.kind}({point.name!r}) as its split point #{known + 1} after its "
        f"topology was fixed (split points known: {known}); the topology is found when the worker starts, "
        "from the stream operations the agent's first instance makes before it first iterates its stream. Fix: make group_by()/through() before the `async for`"
    )


class FirstInstance:
    """An agent's first instance: started by discovery, adopted by the first task of the agent's
    last stage in this worker (it is that task's instance: its preamble ran once, at discovery)."""

    def __init__(self, app: App, agent: Agent) -> None:
        self.agent = agent
        self.input = FirstInput(app, agent)
        self.hand: list[Stream] = []  # every stream the instance makes (streams_in_hand)
        self.context = contextvars.copy_context()
        self.context.run(streams_in_hand.set, self.hand)
        stream_class: Any = app.settings.stream_class or Stream
        stream = self.context.run(stream_class, self.input)
        self.task: asyncio.Task[None] = asyncio.get_running_loop().create_task(agent.run(stream), context=self.context)
        self.task.add_done_callback(self._done)
        self.on_fatal: Any = None  # set by the worker: a late split point stops it at once
        self.adopted = False
        self.restarts = 0  # runs before this one that failed before their first record (discovery)

    def failed(self) -> Exception | None:
        """What the instance raised before asking for its first record (None: it asked, or runs)."""
        task = self.task
        if self.input.asked.is_set() or not task.done() or task.cancelled():
            return None
        exc = task.exception()
        return exc if isinstance(exc, Exception) else None

    def _done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self.adopted:  # adopted: the task's instance handles what it raised
            return
        exc = task.exception()
        if isinstance(exc, TopologyError) and self.input.frozen and self.on_fatal is not None:
            log.error("agent %s: %s", self.agent.name, exc)
            self.on_fatal(exc)

    def adopt(self, target: Any, hand: list[Stream]) -> asyncio.Task[None]:
        """Give the instance to its task: its streams read ``target``; ``hand`` becomes its hand."""
        self.adopted = True
        hand[:] = self.hand
        self.hand = hand
        self.context.run(streams_in_hand.set, hand)
        self.input.bind(target, hand)
        return self.task

    async def close(self) -> None:
        """Never adopted (the worker stops, or got no partition of the agent's last stage)."""
        if not self.task.done():
            self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        if not self.task.cancelled() and (exc := self.task.exception()) is not None:
            log.warning("agent %s raised before its first record (no task of it ran here): %r", self.agent.name, exc)


DISCOVERY_TIMEOUT = 2.0
"""Seconds discovery waits for an agent's first instance to reach its first ``async for``."""


async def discover_splits(app: App, agent: Agent, timeout: float | None = None) -> FirstInstance:
    """Start ``agent``'s first instance and wait (up to ``timeout``) until it asks for its first
    record; the split points it declared by then are its topology (``instance.input.points``).

    The preamble runs once, here, and never again for this instance: the worker's task adopts it.
    An exception in the preamble is the agent's error: the instance is restarted here as the task
    would restart it (``agent_restart_backoff``, up to ``agent_restart_max`` times, each logged
    with the agent's name), so a transient failure at start does not hide a later ``group_by``;
    the last failed run goes to the task, whose error policy goes on from that count. A
    :class:`TopologyError` (a declaration the app must fix) fails the start."""
    if timeout is None:
        timeout = DISCOVERY_TIMEOUT
    settings = app.settings
    restarts = 0
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + DISCOVERY_RESTARTS_FOR
    while True:
        first = await _start_first(app, agent, timeout)
        first.restarts = restarts
        exc = first.failed()
        if exc is None or restarts >= settings.agent_restart_max or answer_of(settings.on_agent_error) is FAIL:
            break  # on_agent_error='stop': the task's policy stops the worker on this error (no restart)
        restarts += 1
        delay = min(settings.agent_restart_backoff * 2 ** (restarts - 1), MAX_DISCOVERY_BACKOFF)
        if loop.time() + delay > give_up_at:
            # the worker waits for discovery before it joins the group: past this, the task that
            # adopts the failed run goes on restarting it under the same policy and count
            break
        log.warning(
            "agent %s raised before its first record: %s: %s; restart %d/%d in %.2fs (setting agent_restart_max)",
            agent.name,
            type(exc).__name__,
            exc,
            restarts,
            settings.agent_restart_max,
            delay,
        )
        await asyncio.sleep(delay)
    if not first.task.done() and not first.input.asked.is_set():
        log.warning(
            "agent %s did not iterate its stream within %.1fs of starting; its topology is the %d split "
            "point(s) it made by then (a group_by/through made later stops the worker with an error naming it)",
            agent.name,
            timeout,
            len(first.input.points),
        )
    return first


MAX_DISCOVERY_BACKOFF = 30.0  # the task's MAX_RESTART_DELAY
DISCOVERY_RESTARTS_FOR = 10.0
"""Seconds discovery restarts a first instance whose preamble raised (the worker joins the group
after discovery; with the default backoff, agent_restart_max's 10 restarts would take ~100 s)."""
FAIL = ErrorAnswer.FAIL


async def _start_first(app: App, agent: Agent, timeout: float) -> FirstInstance:
    """One start of the first instance, waited for up to ``timeout`` (it asked, ended or is slow)."""
    from .joins import reset_join_sources

    reset_join_sources(agent)
    first = FirstInstance(app, agent)
    asked = asyncio.ensure_future(first.input.asked.wait())
    try:
        await asyncio.wait({first.task, asked}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the start was cancelled: nothing will adopt the instance
        first.task.cancel()
        raise
    finally:
        asked.cancel()
    first.input.frozen = True
    if first.task.done() and not first.task.cancelled():
        exc = first.task.exception()
        if isinstance(exc, TopologyError):
            raise exc
    return first


async def adopt_partition_counts(app: App, transport: Any) -> None:
    """Faust's rule for topics that already exist: a source topic is read with the partition count
    it has (the declared count is only used to create it), and so is a ``group_by`` repartition
    topic whose count the app does not pin (``group_by(partitions=)``). Internal topics otherwise
    (changelogs, pinned repartition topics) stay strict: the transport refuses a mismatch
    (:class:`PartitionCountMismatch`).

    Co-partitioning with the tables is insisted on where it matters: per sub-topology, after the
    split points. The stage that runs an agent's body (its last; the one after its last
    ``group_by``/``through``) writes table partition ``p`` from input partition ``p``, so an
    existing input of such a stage must have the tables' count; a topic read only before a split
    point is just forwarded to the repartition topic, whatever its count. Run after
    :meth:`App.discover` (the split points); undiscovered agents count as one stage."""

    body_inputs = {t.name: agent.name for agent in app.agents.values() for t in agent.stage_topics(agent.stages - 1)}
    unpinned = {
        point.topic.name
        for agent in app.agents.values()
        for point in agent.splits
        if point.kind == "group_by" and point.partitions is None and point.topic is not None and point.topic.internal
    }
    table_counts = {name: table.partitions for name, table in app.tables.items() if not table.is_global}
    for topic in list(app.topics.values()):
        if (topic.internal and topic.name not in unpinned) or getattr(topic, "pattern", None) is not None:
            continue
        existing = await transport.partition_count(topic.name)
        if existing is None or existing == topic.partitions:
            continue
        clash = sorted(n for n, c in table_counts.items() if c != existing)
        if topic.name in body_inputs and clash:
            tables = f"{', '.join(repr(n) for n in clash)} have {table_counts[clash[0]]}"
            if topic.name in unpinned:
                raise TopologyError(
                    f"repartition topic {topic.name!r} exists with {existing} partitions, but the app's table(s) "
                    f"{tables}: agent {body_inputs[topic.name]!r} writes table partition p from its partition p, "
                    f"so they must be co-partitioned. Fix: pin the count with group_by(..., partitions="
                    f"{table_counts[clash[0]]}) (a new count needs a new repartition topic: delete this one "
                    "once it is consumed), or declare the tables with partitions="
                    f"{existing}"
                )
            raise TopologyError(
                f"topic {topic.name!r} exists with {existing} partitions, but the app's table(s) {tables}: "
                f"agent {body_inputs[topic.name]!r} reads the topic and writes table partition p from topic "
                f"partition p, so they must be co-partitioned. Fix: declare the tables with partitions={existing} "
                f"(app.Table(..., partitions={existing}), or set topic_partitions={existing}), or repartition the "
                f"stream with group_by(..., partitions={table_counts[clash[0]]}) before it touches the table"
            )
        if topic._partitions is not None:
            log.warning(
                "topic %s exists with %d partitions (declared %d): using %d, as Faust does",
                topic.name,
                existing,
                topic._partitions,
                existing,
            )
        topic.partitions = existing


async def warn_legacy_agent_topics(app: App, transport: Any) -> None:
    """An agent declared without a topic reads Faust's ``<id>-<module>.<function>``; agentstream
    named it ``<id>-<function>`` before. When that older topic exists, its records are not read
    by this app any more: say so, once per agent, with the way to read it."""
    legacy: dict[str, str] = getattr(app, "legacy_agent_topics", {})
    for agent in app.agents.values():
        for topic in agent.topics:
            old = legacy.get(topic.name)
            if old is None or old == topic.name or old in app.topics:
                continue
            if await transport.partition_count(old) is not None:
                log.warning(
                    "agent %s reads %s (Faust's name for an agent declared without a topic); the topic %s "
                    "(agentstream's name for it before) exists and is not read: to drain it, declare the agent "
                    "on both, @app.agent(app.topic(%r, %r))",
                    agent.name,
                    topic.name,
                    old,
                    topic.name,
                    old,
                )


async def autodiscover(app: App) -> None:
    """Import the modules the ``autodiscover`` setting lists, so their agents are declared."""
    from .autodiscover import autodiscover_modules

    names = autodiscover_modules(app)
    if names:
        log.info("autodiscover imported %d module(s): %s", len(names), ", ".join(names))


async def _existing_topics(transport: Any) -> list[str]:
    """Names of the topics on the broker (for patterns)."""
    names: list[str] = await transport.list_topics()
    return names


async def resolve_patterns(app: App, transport: Any) -> None:
    """``app.topic(pattern=...)``: an agent reads the existing topics whose names match, found here,
    when the worker starts (internal topics, ``__``-prefixed and the app's own, never match)."""
    import re

    agents = [a for a in app.agents.values() if getattr(a, "patterns", None)]
    if not agents:
        return
    names = [n for n in await _existing_topics(transport) if not n.startswith("__")]
    for agent in agents:
        for group in agent.patterns:
            regex = re.compile(str(group.pattern))
            matched = [
                n
                for n in names
                if regex.fullmatch(n)
                and not (n.startswith(f"{app.id}-") and (n.endswith("-changelog") or n.endswith("-repartition")))
            ]
            if not matched:
                log.warning(
                    "agent %s: no existing topic matches pattern %r; it reads nothing until a worker "
                    "starts after such a topic exists",
                    agent.name,
                    group.pattern,
                )
            for name in matched:
                if any(t.name == name for t in agent.topics):
                    continue
                if name in app.topics:
                    agent.topics.append(app.topics[name])
                elif all(t.name != name for t in agent.topics):
                    opts = {k: v for k, v in getattr(group, "options", {}).items() if k != "partitions"}
                    agent.topics.append(app.topic(name, **opts))
            log.info("agent %s: pattern %r matches %s", agent.name, group.pattern, matched)
