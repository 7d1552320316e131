"""The app's topology: sub-topologies built from the agents, split at repartition topics.

Each agent contributes one sub-topology per stage: stage 0 reads the agent's own topics and
ends at its first ``group_by``/``through``; stage *n* reads that split point's topic. The split
points are found by running each agent function once against a probe stream that stops it at
its first ``__anext__`` (agent functions only declare stream operations before iterating).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .events import Event
from .exceptions import TopologyError
from .streams import SplitPoint, Stream

if TYPE_CHECKING:
    from .agents.agent import Agent
    from .topics import Topic
    from .types import AppT as App  # the App's interface: app.py imports this module

log = logging.getLogger(__name__)

__all__ = ["SubTopology", "Topology", "discover_splits"]


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


class _ProbeDone(BaseException):
    """Stops an agent function at its first ``__anext__`` during discovery."""


class _ProbeInput:
    """A stream input that records split points and never yields a record."""

    stage = 0
    probing = True  # joins register their extra source topics only when they see this

    def __init__(self, app: App, agent: Agent) -> None:
        self.app = app
        self.agent = agent
        self.points: list[SplitPoint] = []

    async def next_event(self, timeout: float | None = None) -> Event | None:
        raise _ProbeDone()

    def ack(self, event: Event) -> None:  # pragma: no cover - nothing is ever handed out
        pass

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        if index > len(self.points):
            self.app._resolve_split(self.agent, point)
            self.points.append(point)
        return self.points[index - 1]


async def discover_splits(app: App, agent: Agent, timeout: float = 2.0) -> list[SplitPoint]:
    """Run ``agent`` up to its first ``__anext__`` and return the split points it declared."""
    from .joins import reset_join_sources

    reset_join_sources(agent)
    probe = _ProbeInput(app, agent)
    result: Any = agent.fun(Stream(probe))
    try:
        if inspect.isasyncgen(result):
            await asyncio.wait_for(result.__anext__(), timeout)
        elif inspect.isawaitable(result):
            await asyncio.wait_for(result, timeout)
    except _ProbeDone:
        pass
    except TimeoutError:
        log.warning(
            "agent %s did not iterate its stream within %.1fs of starting; assuming it has no group_by/through",
            agent.name,
            timeout,
        )
    except StopAsyncIteration:
        pass
    except Exception as exc:
        raise TopologyError(f"agent {agent.name!r} raised while its topology was discovered: {exc!r}") from exc
    finally:
        if inspect.isasyncgen(result):
            try:
                await result.aclose()
            except BaseException:
                pass
        elif inspect.iscoroutine(result):
            result.close()
    return probe.points


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
