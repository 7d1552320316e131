"""``agent.test_context()``: one agent run in-process, without a broker.

Values are handed straight to one agent instance, and ``put`` returns only when the agent asks
for the next one (depth-first, like a worker). What it sends goes to a private ``memory://``
broker (read back with ``sent(topic)``); its tables are memory stores. Part of the agents
package, below the whole-app harness (:mod:`agentstream.testing`), which uses its helpers.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..clock import clock_for
from ..events import Event
from ..exceptions import WorkerStopped
from ..streams import InProcessStream, SplitPoint, streams_in_hand
from ..topics import Topic
from ..transport.memory import MemoryTransport
from ..transport.message import Message
from ..transport.partitioner import default_partition

if TYPE_CHECKING:
    from ..app import App
    from .agent import Agent

__all__ = ["AgentTestContext", "AgentResults", "use_memory", "read_topic"]


class AgentResults(dict[int, Any]):
    """Faust's ``ctx.results``: a dict from the running count of values the agent produced (its
    yields; for an agent that does not yield, the values it took) to each value, so with one value
    per record ``results[event.message.offset]`` is that record's. Equal to a list of its values in
    order too (``ctx.results == [42]``), as agentstream's earlier list was."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return list(self.values()) == other
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def add(self, value: Any) -> None:
        self[len(self)] = value


def use_memory(app: App, name: str) -> tuple[Any, Any]:
    """Point ``app`` at a private memory broker and memory stores; returns what to restore."""
    saved = (app.settings, app._transport)
    app.settings = app.settings.replace(broker=f"memory://{name}", store="memory://")
    app._transport = None
    return saved


class AgentTestContext:
    """``async with agent.test_context() as ctx: event = await ctx.put(value, key=...)``."""

    stage = 0

    def __init__(self, agent: Agent, *, partition: int | None = None) -> None:
        self.agent = agent
        self.app = cast("App", agent.app)  # agents know the App by its interface (types.AppT)
        self.partition = partition  # None: each record goes to the partition its key maps to
        self.results = AgentResults()
        # Faust records what a non-yielding agent took (it has no yields to record)
        self._record_taken = not inspect.isasyncgenfunction(getattr(agent, "fun", None))
        self.acked: list[Event] = []
        self._offset = 0
        self._slot: asyncio.Queue[Event] = asyncio.Queue(maxsize=1)
        self._asked = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._saved: tuple[Any, Any] | None = None
        self._closing = False

    # -- StreamInput ------------------------------------------------------------------------
    async def next_event(self, timeout: float | None = None) -> Event | None:
        self._asked.set()
        if self._closing:
            raise WorkerStopped("test context closed")
        try:
            if timeout is None:
                event = await self._slot.get()
            else:
                event = await clock_for(self.app).wait_for(self._slot.get(), timeout)
        except TimeoutError:
            return None
        if self._record_taken:
            self.results.add(event.value)
        return event

    def ack(self, event: Event) -> None:
        self.acked.append(event)

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        # The harness runs the whole agent in one place: group_by/through re-key in memory.
        return point

    # -- test API ---------------------------------------------------------------------------------
    async def __aenter__(self) -> AgentTestContext:
        self._saved = use_memory(self.app, f"agent-test-{uuid.uuid4().hex[:8]}")
        await self.app.transport.ensure_topics([t.spec() for t in self.app.topics.values()])
        for table in self.app.tables.values():
            from ..tables.store import MemoryStore
            from ..tables.table import TablePartition

            for p in range(table.partitions):
                part = TablePartition(table, p, MemoryStore(), None, 0)
                part.activate()
                table.parts[p] = part
        self._runner = asyncio.ensure_future(self._run())
        return self

    async def _run(self) -> None:
        streams_in_hand.set([])  # as a stream task does: every stream the agent makes registers (event.ack())
        stream = InProcessStream(self)

        async def deliver(value: Any) -> None:
            self.results.add(value)

        sinks = self.agent.sinks
        self.agent.sinks = list(sinks) + [deliver]
        try:
            await self.agent.run(stream)
        except WorkerStopped:
            pass
        finally:
            self.agent.sinks = sinks

    async def put(
        self,
        value: Any = None,
        *,
        key: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] = (),
    ) -> Event:
        """Hand one record to the agent; returns after the agent has fully handled it.

        The record is on ``partition``, else the context's, else the one its key maps to (the
        topic's key encoding and Kafka's partitioner, as a producer would put it; 0 when keyless),
        so table reads by key find what the agent wrote. Its message holds the key and value
        encoded by the topic's codecs, as a consumer would read them (``event.forward`` sends those)."""
        ts = int((clock_for(self.app).time() if timestamp is None else timestamp) * 1000)
        if partition is None:
            partition = self.partition
        if partition is None:
            partition = self._partition_of(key)
        if isinstance(headers, Mapping):
            headers = list(headers.items())
        channel = self.agent.channel
        raw_key, raw_value = channel.encode(key, value) if isinstance(channel, Topic) else (key, value)
        message = Message(
            channel.name, partition, self._offset, ts, 0, raw_key, raw_value, None, -1, -1, tuple(headers)
        )
        self._offset += 1
        event = self.app.create_event(key, value, None, message)  # of the app's Event setting
        await self._asked.wait()
        self._asked.clear()
        await self._slot.put(event)
        await self._wait_asked()
        return event

    def _partition_of(self, key: Any) -> int:
        if key is None:
            return 0
        topic = self.agent.channel
        kb = key if isinstance(key, bytes) else topic.key_codec.dumps(key)
        return 0 if kb is None else default_partition(kb, topic.partitions)

    async def _wait_asked(self) -> None:
        waiter = asyncio.ensure_future(self._asked.wait())
        assert self._runner is not None
        done, _ = await asyncio.wait({waiter, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        if self._runner in done:
            waiter.cancel()
            exc = self._runner.exception()
            if exc is not None:
                raise exc

    def sent(self, topic: str) -> list[tuple[Any, Any]]:
        """(key, value) pairs the agent sent to ``topic``, decoded with the topic's codecs."""
        return read_topic(self.app, topic)

    async def __aexit__(self, *exc: Any) -> None:
        self._closing = True
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        for table in self.app.tables.values():
            table.parts.clear()
        await self.app.stop_clients()
        assert self._saved is not None
        self.app.settings, self.app._transport = self._saved


def read_topic(app: App, topic: str) -> list[tuple[Any, Any]]:
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    t = app.topics.get(topic)
    out = []
    for m in transport.read_topic(topic):
        if t is None:
            out.append((m.key, m.value))
        else:
            out.append(
                (
                    None if m.key is None else t.key_codec.loads(m.key),
                    None if m.value is None else t.value_codec.loads(m.value),
                )
            )
    return out
