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
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .agents.agent import Agent, AgentFun
from .clock import clock_for
from .events import Event
from .exceptions import TopologyError
from .runtime import current_clock
from .streams import InProcessStream, SplitPoint, Stream
from .topics import Topic, prepare_headers
from .transport.base import TP, Consumer
from .transport.message import Message

if TYPE_CHECKING:
    from .types import AppT as App  # the App's interface: app.py imports this module

__all__ = ["Channel", "ChannelAgent", "stream_of"]


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
        event: Event = self.app.create_event(key, value, None, message)  # the app's Event setting
        return event

    async def send(
        self,
        *,
        key: Any = None,
        value: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
        **kwargs: Any,
    ) -> Event:
        """Put a value in the channel (waits while a ``maxsize`` channel is full); ``headers`` a
        mapping or ``(name, value)`` pairs."""
        event = self._event(key, value, timestamp, prepare_headers(headers))
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
        timestamp: float | None = None,
        headers: Any = None,
        schema: Any = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        callback: Callable[[Any], Any] | None = None,
        reply_to: Any = None,
        correlation_id: str | None = None,
        force: bool = False,
    ) -> Any:
        """Put a value in the agent's channel. A channel holds values, not bytes (as Faust's): the
        serializers have nothing to encode; ``callback(event)`` runs once the value is in; ``reply_to``
        is refused (a channel agent answers :meth:`ask` only)."""
        if reply_to is not None:
            raise TypeError(f"agent {self.name!r} reads a channel: reply_to= is not taken; use ask()")
        event = await self._channel.send(key=key, value=value, headers=prepare_headers(headers), timestamp=timestamp)
        if callback is not None:
            result = callback(event)
            if asyncio.iscoroutine(result):
                await result
        return event

    async def ask(
        self,
        value: Any = None,
        *,
        key: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
        reply_to: Any = None,
        correlation_id: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """What the agent yields for ``value`` (waits as Faust does unless ``timeout`` is given)."""
        if reply_to is not None:
            raise TypeError(f"agent {self.name!r} reads a channel: its replies come back in process, not to reply_to=")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        event = self._channel._event(key, value, timestamp, prepare_headers(headers))
        self._asks[event.message.offset] = fut
        try:
            await self._channel.queue.put(event)
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._asks.pop(event.message.offset, None)

    def __repr__(self) -> str:
        return f"<ChannelAgent {self.name} channel={self._channel.name}>"


def stream_of(source: Any) -> Stream:
    """``app.stream(source)`` (Faust's): a stream over a channel, a topic, a stream (itself), or
    any iterable or async iterable (each item a value, keyless)."""
    if isinstance(source, Stream):
        return source
    if isinstance(source, Channel):
        return source.stream()
    if isinstance(source, Topic):
        return InProcessStream(_TopicInput(source))
    if hasattr(source, "__aiter__") or hasattr(source, "__iter__"):
        return InProcessStream(_IterableInput(source))
    raise TypeError(f"app.stream() takes a topic, channel, stream or (async) iterable, got {source!r}")


class _IterableInput:
    """StreamInput over an iterable or async iterable: its items are the values."""

    stage = 0

    def __init__(self, source: Any) -> None:
        self._source = source
        self._items: AsyncIterator[Any] | None = None
        self._offsets = itertools.count()

    async def next_event(self, timeout: float | None = None) -> Event | None:
        items = self._items
        if items is None:
            src = self._source
            items = self._items = aiter(src) if hasattr(src, "__aiter__") else _as_async(iter(src))
        try:
            value = await current_clock().wait_for(anext(items), timeout)
        except TimeoutError:
            return None
        message = Message(
            "<iterable>", 0, next(self._offsets), int(current_clock().time() * 1000), 0, None, value, None, -1, -1, ()
        )
        return Event(None, value, message)

    def ack(self, event: Event) -> None:
        return None

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        return point


async def _as_async(items: Iterator[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


class _TopicInput:
    """``app.stream(topic)`` / ``topic.stream()`` outside an agent: every partition of the topic,
    read by this process alone from the earliest offset (Faust's ``auto_offset_reset``), decoded
    with the topic's codecs. No consumer group and no commits: an agent (``@app.agent(topic)``)
    is how a worker shares a topic's partitions and commits its progress."""

    stage = 0

    def __init__(self, topic: Topic) -> None:
        self.topic = topic
        self.channel = topic  # what the stream's ``channel`` names (Faust's stream.channel)
        self._consumer: Consumer | None = None
        self._fetched: deque[Message] = deque()

    async def _start(self) -> Consumer:
        app = self.topic.app
        members = list(getattr(self.topic, "members", ()) or (self.topic,))
        counts = await app.transport.ensure_topics([t.spec() for t in members])
        consumer = app.transport.consumer(group_id=None, **app.consumer_settings())
        await consumer.start()
        consumer.assign([TP(t.name, p) for t in members for p in range(counts[t.name])])
        self._consumer = consumer
        return consumer

    async def next_event(self, timeout: float | None = None) -> Event | None:
        consumer = self._consumer or await self._start()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        fetched = self._fetched
        while not fetched:
            wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - loop.time()))
            for records in (await consumer.getmany(timeout_ms=int(wait * 1000))).values():
                fetched.extend(records)
            if not fetched and deadline is not None and loop.time() >= deadline:
                return None
        message = fetched.popleft()
        topic = self.topic
        key = None if message.key is None else topic.key_codec.loads(message.key)
        value = None if message.value is None else topic.value_codec.loads(message.value)
        event: Event = topic.app.create_event(key, value, None, message)  # the app's Event setting
        return event

    def ack(self, event: Event) -> None:
        return None

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        raise TopologyError(
            f"group_by()/through() on app.stream({self.topic.name!r}) need an agent: "
            f"@app.agent(app.topic({self.topic.name!r})) reads the topic as part of the topology"
        )

    async def stop(self) -> None:
        """Stop the consumer (the stream's owner may call it; the worker's stop does not know it)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()
