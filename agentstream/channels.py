"""In-memory channels (Faust's ``app.channel()``): a queue inside one worker process.

Agents over a channel are not part of the topology (no partitions, no offsets, no commit): they
start with the worker as background tasks and handle what ``channel.send()`` puts in, in this
process only. That matches Faust, where a channel is a local buffer; use a topic when records
must survive a crash or be shared between workers.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .agents.agent import Agent, AgentFun
from .clock import clock_for
from .events import Event
from .exceptions import TopologyError
from .streams import InProcessStream, SplitPoint, Stream
from .transport.message import Message

if TYPE_CHECKING:
    from .types import AppT as App  # the App's interface: app.py imports this module

__all__ = ["Channel", "ChannelAgent"]


class Channel:
    """``app.channel(value_type=..., maxsize=...)``: ``await channel.send(value=...)``; agents iterate it."""

    def __init__(
        self,
        app: App,
        *,
        key_type: Any = None,
        value_type: Any = None,
        maxsize: int | None = None,
        name: str | None = None,
    ) -> None:
        self.app = app
        self.key_type = key_type
        self.value_type = value_type
        self.maxsize = maxsize or 0
        self.name = name or f"<channel-{uuid.uuid4().hex[:8]}>"
        self._queue: asyncio.Queue[Event] | None = None
        self._offsets = itertools.count()

    @property
    def queue(self) -> asyncio.Queue[Event]:
        if self._queue is None:  # made on first use, so it belongs to the running loop
            self._queue = asyncio.Queue(self.maxsize)
        return self._queue

    def _event(
        self, key: Any, value: Any, timestamp: float | None, headers: Sequence[tuple[str, bytes]] | None
    ) -> Event:
        ts = int((clock_for(self.app).time() if timestamp is None else timestamp) * 1000)
        message = Message(self.name, 0, next(self._offsets), ts, 0, key, value, None, -1, -1, tuple(headers or ()))
        return Event(key, value, message)

    async def send(
        self,
        *,
        key: Any = None,
        value: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
        **kwargs: Any,
    ) -> Event:
        """Put a value in the channel (waits while a ``maxsize`` channel is full)."""
        event = self._event(key, value, timestamp, headers)
        await self.queue.put(event)
        return event

    async def put(self, value: Any = None, *, key: Any = None) -> Event:
        return await self.send(key=key, value=value)

    async def get(self, *, timeout: float | None = None) -> Any:
        """The next value (Faust's ``channel.get()``)."""
        event = await asyncio.wait_for(self.queue.get(), timeout)
        return event.value

    def empty(self) -> bool:
        return self.queue.empty()

    def stream(self) -> Stream:
        """A stream over this channel (for code outside agents)."""
        return InProcessStream(_ChannelInput(self))

    def __repr__(self) -> str:
        return f"<Channel {self.name}>"


class _ChannelInput:
    """StreamInput over a channel's queue: acks need no bookkeeping (nothing is committed)."""

    stage = 0

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    async def next_event(self, timeout: float | None = None) -> Event | None:
        try:
            return await asyncio.wait_for(self.channel.queue.get(), timeout)
        except TimeoutError:
            return None

    def ack(self, event: Event) -> None:
        return None

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        return point


class ChannelAgent(Agent):
    """An agent over a :class:`Channel`: runs ``concurrency`` instances as worker background tasks."""

    def __init__(
        self, app: App, fun: AgentFun, *, channel: Channel, name: str, sink: Sequence[Any] = (), concurrency: int = 1
    ) -> None:
        if concurrency < 1:
            raise TopologyError(f"agent {name!r}: concurrency must be >= 1, got {concurrency}")
        self.app = app
        self.fun = fun
        self.name = name
        self.topics = []
        self.patterns = []
        self._channel = channel
        self.sinks = list(sink)
        self.concurrency = concurrency
        self.splits = []
        self.discovered = True
        self.__doc__ = fun.__doc__
        self.__name__ = getattr(fun, "__name__", name)
        self.__wrapped__ = fun
        self._asks: dict[int, asyncio.Future[Any]] = {}

    @property
    def channel(self) -> Any:  # a Channel, not a Topic
        return self._channel

    async def run_instances(self) -> None:
        """Started by the worker (a startup task): the agent's instances until the worker stops."""
        await asyncio.gather(
            *(self.run(InProcessStream(_ChannelInput(self._channel))) for _ in range(self.concurrency))
        )

    async def _deliver(self, value: Any, event: Event | None) -> None:
        await super()._deliver(value, None)
        if event is not None and event.message.topic == self._channel.name:
            fut = self._asks.pop(event.message.offset, None)
            if fut is not None and not fut.done():
                fut.set_result(value)

    async def send(
        self,
        *,
        key: Any = None,
        value: Any = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
        timestamp: float | None = None,
    ) -> Any:
        return await self._channel.send(key=key, value=value, headers=headers, timestamp=timestamp)

    async def ask(
        self, value: Any = None, *, key: Any = None, partition: int | None = None, timeout: float | None = 30.0
    ) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        event = self._channel._event(key, value, None, None)
        self._asks[event.message.offset] = fut
        try:
            await self._channel.queue.put(event)
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._asks.pop(event.message.offset, None)

    def __repr__(self) -> str:
        return f"<ChannelAgent {self.name} channel={self._channel.name}>"
