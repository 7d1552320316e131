"""What a harness run did, in the app's own terms: the :class:`HarnessAssertions` mixin of
:class:`~agentstream.testing.AppHarness`.

- ``h.yielded("agent")``: the values an agent yielded (``h.yields("agent")``: with the record in hand);
- ``h.sent("topic")``: the records sent to a topic (decoded key and value, timestamp in epoch
  seconds, partition, offset, headers), in the order they were appended; ``h.sent()``: every topic,
  table changelogs included (decoded with the table's codecs);
- ``h.table("t")``: a dict snapshot, with ``.windows(key)`` / ``.window(key, at)`` for windowed tables;
- ``h.dead_letters()``: the records the dead-letter policy set aside, with the error that sent them there;
- ``h.monitor``: Faust's :class:`~agentstream.sensors.Monitor` counters for the run.

Everything is recorded from the moment the worker starts; yields, records and dead letters stay
readable after the ``async with`` block (tables are read inside it, while the worker holds them). Recording costs the app nothing it would notice: yields are captured by one
more sink on each agent (a plain function; the agent's own sinks run as before) and sends by the
memory broker's journal (its append order across partitions, which per-partition logs cannot give).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..error_handling import strip_error_headers
from ..events import current_event
from ..ids import seed_ids
from ..transport.base import TP
from ..transport.memory import MemoryTransport, Record
from ..transport.memory.broker import MemoryBroker

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..app import App
    from ..sensors import Monitor
    from ..tables.table import Table
    from ..topics import Topic

__all__ = ["HarnessAssertions", "SentRecord", "Yielded", "DeadLetter", "TableContents"]

WindowRange = tuple[float, float]
Headers = tuple[tuple[str, bytes], ...]

ERROR_HEADER = "agentstream-error"  # the headers agentstream.worker.errors puts on a dead letter
STAGE_HEADER = "agentstream-error-stage"
SOURCE_HEADER = "agentstream-source"
_SOURCE = re.compile(r"^(?P<topic>.*)\[(?P<partition>\d+)\]@(?P<offset>\d+)$")


def _header(headers: Headers, name: str) -> bytes | None:
    for k, v in headers:
        if k == name:
            return v
    return None


@dataclass(frozen=True, slots=True)
class SentRecord:
    """One record on a topic: key and value decoded with the topic's codecs (raw bytes when the
    topic is not the app's or they do not decode), ``timestamp`` in epoch seconds."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: float
    headers: Headers = ()

    def header(self, name: str) -> bytes | None:
        """The first header called ``name`` (None: none)."""
        return _header(self.headers, name)


@dataclass(frozen=True, slots=True)
class Yielded:
    """One value an agent yielded, with the record it was handling then (None outside one)."""

    agent: str
    value: Any
    key: Any = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record the dead-letter policy set aside: its raw key and value, where it came from and why.

    ``error`` is ``"ExceptionType: message"``, ``stage`` is ``"decode"``, ``"agent"`` or ``"produce"``;
    ``headers`` are the record's own (the error headers are read into the fields)."""

    key: bytes | None
    value: bytes | None
    error: str
    stage: str
    topic: str
    partition: int
    offset: int
    timestamp: float
    headers: Headers = ()

    @property
    def error_type(self) -> str:
        """The exception's class name (``"ValueError"``)."""
        return self.error.split(":", 1)[0]


class TableContents(dict[Any, Any]):
    """What ``h.table(name)`` returns: the table's contents as a dict (a snapshot), and for a
    windowed table (keys ``(key, (start, end))``) reads by key and time."""

    def __init__(self, table: Table, late_before: int = 0) -> None:
        super().__init__(table.as_dict())
        self.name: str = table.name
        self._state: Any = table._windowed  # None: not windowed
        self._default: Callable[[], Any] | None = table.default
        self._late_before = late_before

    @property
    def windowed(self) -> bool:
        return self._state is not None

    def _windowed_state(self) -> Any:
        if self._state is None:
            raise TypeError(f"table {self.name!r} is not windowed: read it as a dict")
        return self._state

    def windows(self, key: Any) -> dict[WindowRange, Any]:
        """``{(start, end): value}`` of every live window of ``key``, earliest start first."""
        self._windowed_state()
        return dict(sorted((w, v) for (k, w), v in self.items() if k == key))

    def window(self, key: Any, at: float | WindowRange) -> Any:
        """The value of ``key`` at time ``at`` (epoch seconds): the latest-starting window that
        contains it, as Faust's ``table[key].current()``; or the window ``at=(start, end)``. A window
        with no value reads as the table's default (a KeyError without one). A session table: the
        session of ``key`` with ``start <= at <= end`` (or the session ``at=(start, end)``)."""
        state = self._windowed_state()
        if getattr(state, "is_session", False):  # the session of ``key`` containing ``at``, or that session
            for (k, w), v in self.items():
                if k == key and (w == at if isinstance(at, tuple) else w[0] <= at <= w[1]):
                    return v
            if self._default is None:
                raise KeyError((key, at))
            return self._default()
        if isinstance(at, tuple):
            window = state.window_range(at[0])
        else:
            window = state.window_range(state.window.current(at)[0])
        try:
            return self[(key, window)]
        except KeyError:
            if self._default is None:
                raise
            return self._default()

    def stream_time(self, key: Any) -> float | None:
        """The stream time of ``key``'s table partition now (None before its first write):
        windows ending at or before ``stream_time - grace`` take no more records."""
        return self._windowed_state().stream_time(key)  # type: ignore[no-any-return]

    @property
    def late_dropped(self) -> int:
        """Records dropped in this run because every window they belonged to had closed."""
        return int(self._windowed_state().late_dropped) - self._late_before


@dataclass
class _Recording:
    """What the harness recorded during one run."""

    broker: MemoryBroker
    journal: list[Record]
    dead_letter_topic: str
    yields: list[Yielded] = field(default_factory=list)
    sinks: dict[Agent, Callable[[Any], None]] = field(default_factory=dict)
    monitor: Monitor | None = None
    late_before: dict[str, int] = field(default_factory=dict)  # windowed tables' late counts at the start


def _yield_sink(agent: Agent, yields: list[Yielded]) -> Callable[[Any], None]:
    name = agent.name

    def record(value: Any) -> None:
        event = current_event()
        if event is None:
            yields.append(Yielded(name, value))
        else:
            yields.append(Yielded(name, value, event.key, event.topic, event.partition, event.offset, event.timestamp))

    return record


class HarnessAssertions:
    """Readings of a harness run (mixed into :class:`~agentstream.testing.AppHarness`)."""

    app: App
    seed: int = 0
    """Seeds the ids the runtime would draw at random (``agent.ask()``'s reply topic and correlation
    ids), so that two runs give the same records, headers included."""
    _recording: _Recording | None = None

    # -- called by the harness ------------------------------------------------------------------
    def _start_recording(self) -> None:
        """Start the journal of sends and the yield capture, and seed the app's ids (before the
        worker starts)."""
        seed_ids(self.app, self.seed)
        transport = self.app.transport
        assert isinstance(transport, MemoryTransport)
        broker = transport.broker
        journal: list[Record] = []
        broker.journal = journal
        rec = self._recording = _Recording(broker, journal, self.app.settings.dead_letter_topic)
        for table in self.app.tables.values():
            if table._windowed is not None:  # the count lives on the declaration: an app may run twice
                rec.late_before[table.name] = table._windowed.late_dropped
        for agent in self.app.agents.values():
            sink = rec.sinks[agent] = _yield_sink(agent, rec.yields)
            agent.sinks = [sink, *agent.sinks]  # first: a yield counts even when a later sink fails

    def _stop_recording(self) -> None:
        """Hand the agents back their own sinks and the app its own sensors; the readings stay."""
        seed_ids(self.app, None)
        rec = self._recording
        if rec is None:
            return
        rec.broker.journal = None
        for agent, sink in rec.sinks.items():
            agent.sinks = [s for s in agent.sinks if s is not sink]
        rec.sinks.clear()
        if rec.monitor is not None:
            self.app.sensors.remove(rec.monitor)

    def _recorded(self) -> _Recording:
        if self._recording is None:
            raise RuntimeError("nothing recorded yet: read the harness inside or after `async with AppHarness(app)`")
        return self._recording

    # -- agents -----------------------------------------------------------------------------------
    def yields(self, agent: str | Agent) -> list[Yielded]:
        """What ``agent`` yielded, in order, with the record it was handling each time."""
        name = agent if isinstance(agent, str) else agent.name
        if name not in self.app.agents:
            raise KeyError(f"app {self.app.id!r} has no agent {name!r} (agents: {list(self.app.agents)})")
        return [y for y in self._recorded().yields if y.agent == name]

    def yielded(self, agent: str | Agent) -> list[Any]:
        """The values ``agent`` yielded, in order (``ctx.results`` of ``agent.test_context()``)."""
        return [y.value for y in self.yields(agent)]

    # -- topics -------------------------------------------------------------------------------------
    def sent(self, topic: str | Topic | None = None, *, committed: bool = False) -> list[SentRecord]:
        """The records appended to ``topic`` (every topic: None) since the worker started, in append
        order, by the app or the test. ``committed=True`` leaves out records of open or aborted
        transactions (what a read_committed consumer sees)."""
        rec = self._recorded()
        name = None if topic is None else topic if isinstance(topic, str) else topic.name
        if name is not None and name not in rec.broker.topics:
            raise KeyError(f"no topic {name!r} on the harness's broker (topics: {sorted(rec.broker.topics)})")
        records: Iterator[Record] = (r for r in rec.journal if name is None or r.topic == name)
        if committed:
            records = (r for r in records if self._is_committed(rec.broker, r))
        return [self._decoded(r) for r in records]

    @staticmethod
    def _is_committed(broker: MemoryBroker, r: Record) -> bool:
        part = broker.partition(TP(r.topic, r.partition))
        return r.offset < part.stable_end() and r.offset not in part.aborted

    def _decoded(self, r: Record) -> SentRecord:
        key, value = r.key, r.value
        try:
            key, value = self._decode(r.topic, key, value)
        except Exception:  # not in the topic's format (a test's raw bytes, stream time): as stored
            key, value = r.key, r.value
        return SentRecord(r.topic, r.partition, r.offset, key, value, r.timestamp_ms / 1000, tuple(r.headers or ()))

    def _decode(self, topic: str, key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
        """With the codecs of the app's topic, or of the table whose changelog it is (a windowed
        table's keys read as ``(key, (start, end))``)."""
        for table in self.app.tables.values():
            if table.changelog_topic.name == topic:
                state = table._windowed
                decoded: Any = key
                if key is not None and getattr(state, "is_session", False):
                    kb, window = state.split_key(key)
                    decoded = (table.key_codec.loads(kb), window)
                elif key is not None and state is not None:
                    kb, start = state.parse_window_key(key)
                    decoded = (table.key_codec.loads(kb), state.window_range(start))
                elif key is not None:
                    decoded = table.key_codec.loads(key)
                return decoded, None if value is None else table.value_codec.loads(value)
        t = self.app.topics.get(topic)
        if t is None:
            return key, value
        return (
            None if key is None else t.key_codec.loads(key),
            None if value is None else t.value_codec.loads(value),
        )

    # -- tables -------------------------------------------------------------------------------------
    def table(self, name: str) -> TableContents:
        """The table's contents now, as a dict (windowed: ``(key, (start, end))`` keys, and
        ``.windows(key)``, ``.window(key, at)``, ``.stream_time(key)``, ``.late_dropped``)."""
        try:
            table = self.app.tables[name]
        except KeyError:
            raise KeyError(f"app {self.app.id!r} has no table {name!r} (tables: {sorted(self.app.tables)})") from None
        late_before = self._recording.late_before.get(name, 0) if self._recording is not None else 0
        return TableContents(table, late_before)

    # -- errors -------------------------------------------------------------------------------------
    def dead_letters(self) -> list[DeadLetter]:
        """The records the ``dead-letter`` policy copied to the app's dead-letter topic, in order."""
        rec = self._recorded()
        out = []
        for r in rec.journal:
            if r.topic != rec.dead_letter_topic:
                continue
            headers = tuple(r.headers or ())
            source = (_header(headers, SOURCE_HEADER) or b"").decode()
            m = _SOURCE.match(source)
            own = tuple(strip_error_headers(headers))  # the policy's (agentstream's and KIP-1034's) are fields
            out.append(
                DeadLetter(
                    r.key,
                    r.value,
                    (_header(headers, ERROR_HEADER) or b"").decode(errors="replace"),
                    (_header(headers, STAGE_HEADER) or b"").decode(),
                    m["topic"] if m else source,
                    int(m["partition"]) if m else -1,
                    int(m["offset"]) if m else -1,
                    r.timestamp_ms / 1000,
                    own,
                )
            )
        return out

    # -- sensors ------------------------------------------------------------------------------------
    @property
    def monitor(self) -> Monitor:
        """Faust's Monitor counters (``messages_received_total``, ``messages_sent_by_topic``...) for
        this run, from the first time it is read (read it before sending to count everything).
        Records handled are counted at commits, which the harness makes whenever the app settles."""
        rec = self._recorded()
        if rec.monitor is None:
            from ..sensors import Monitor

            rec.monitor = Monitor()
            self.app.sensors.add(rec.monitor)
        return rec.monitor
