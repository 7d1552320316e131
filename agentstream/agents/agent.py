"""The ``@app.agent`` decorator object: the agent function, its source topics, sinks and the
split points its stream operations declare; plus ``send``/``cast``/``ask`` to talk to it.

One *instance* of the agent function runs per task, iterating a stream fed by that task only, so
ordering and offsets stay per partition. With ``concurrency=N`` given (Faust's mode, not
``isolated_partitions``), exactly N instances run in the worker, each with its own stream over all
the agent's tasks there, as Faust's N actors (:mod:`agentstream.worker.actors`; under exactly_once,
and in a joining stage, each task runs N instances sharing N slots, :mod:`agentstream.worker.slots`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Union

from ..events import Event, current_event
from ..exceptions import TopologyError
from ..streams import SplitPoint, Stream
from ..topics import observe_send, prepare_headers, report_delivery
from .replies import CORRELATION_ID, REPLY_TO, allowed_reply_to, reply_topic_allowed

if TYPE_CHECKING:
    from ..topics import Topic
    from ..types import AppT as App  # the App's interface: app.py imports this module
    from .test_context import AgentTestContext

log = logging.getLogger(__name__)

AgentFun = Callable[[Stream], Awaitable[None] | AsyncIterator[Any]]
Sink = Union["Topic", "Agent", Callable[[Any], Any]]

__all__ = ["Agent", "AgentFun", "ReplyPromise"]


class Agent:
    """What ``@app.agent(topic)`` returns; calling conventions follow Faust's."""

    def __init__(
        self,
        app: App,
        fun: AgentFun,
        *,
        topics: Sequence[Topic],
        name: str,
        sink: Sequence[Sink] = (),
        concurrency: int | None = None,
        patterns: Sequence[Topic] = (),
        isolated_partitions: bool = False,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise TopologyError(f"agent {name!r}: concurrency must be >= 1, got {concurrency}")
        if isolated_partitions and concurrency not in (None, 1):
            raise TopologyError(
                f"agent {name!r}: isolated_partitions=True needs concurrency=1 (one instance per partition)"
            )
        self.patterns = list(patterns)  # app.topic(pattern=...): resolved to topics when the worker starts
        if not topics and not self.patterns:
            raise TopologyError(f"agent {name!r} has no source topic")
        self.app = app
        self.fun = fun
        self.name = name
        self.help = (getattr(fun, "__doc__", None) or "").strip()  # Faust's help=: `agentstream agents` shows it
        self.topics = list(topics)
        self.sinks = list(sink)
        self.concurrency = 1 if concurrency is None else concurrency
        self.isolated_partitions = isolated_partitions
        # Faust's concurrency=N: N instances share the worker's partitions, so at most N records are
        # in flight for the agent in this worker (worker/actors.py). Without concurrency= (or with
        # isolated_partitions) each task runs its own instance: partitions are handled in parallel.
        self.max_in_flight: int | None = None if concurrency is None or isolated_partitions else concurrency
        self.splits: list[SplitPoint] = []
        self.discovered = False
        self.__doc__ = fun.__doc__
        self.__name__ = getattr(fun, "__name__", name)
        self.__wrapped__ = fun

    def __call__(self, stream: Stream) -> Awaitable[None] | AsyncIterator[Any]:
        """Call the agent function directly (Faust allows it; the harness uses it)."""
        return self.fun(stream)

    @property
    def channel(self) -> Topic:
        return self.topics[0]

    def stage_topics(self, stage: int) -> list[Topic]:
        """Source topics of the agent's ``stage``-th sub-topology (0 = its own topics)."""
        if stage == 0:
            return self.topics
        topic = self.splits[stage - 1].topic
        assert topic is not None
        return [topic]

    @property
    def stages(self) -> int:
        return len(self.splits) + 1

    # -- running -------------------------------------------------------------------------------
    async def run(self, stream: Stream) -> None:
        """Drive one instance: yielded values go to sinks and to the asker, then the agent resumes."""
        result = self.fun(stream)
        if inspect.isasyncgen(result):
            async for value in result:
                await self._deliver(value, current_event())  # whichever stream yielded it
        elif inspect.isawaitable(result):
            await result
        else:
            raise TopologyError(
                f"agent {self.name!r}: the function must be `async def` and iterate its stream; "
                f"it returned {type(result).__name__}"
            )

    async def _deliver(self, value: Any, event: Event | None) -> None:
        for sink in self.sinks:
            if isinstance(sink, Agent):
                await sink.send(value=value)
            elif hasattr(sink, "send") and (hasattr(sink, "value_codec") or not callable(sink)):  # topic, channel
                await sink.send(value=value)
            else:
                res = sink(value)
                if inspect.isawaitable(res):
                    await res
        if event is not None:
            reply_to = allowed_reply_to(self.app, event)  # the app's reply topics or reply_topics only
            if reply_to is not None:
                cid = event.header(CORRELATION_ID) or b""
                data = None if value is None else self.app.reply_codec.dumps(value)
                producer = await self.app.start_producer()
                topic = reply_to.decode()
                headers: list[tuple[str, bytes]] | None = [(CORRELATION_ID, cid)]
                sensors = self.app.sensors
                states: dict[Any, Any] = {}
                if sensors:  # Faust's send hooks (a tracing sensor adds the handling span's context)
                    states, headers = observe_send(self.app, topic, None, data, None, None, headers)
                delivery = await producer.send(topic, None, data, headers=headers)
                if states:
                    report_delivery(self.app, delivery, states)

    # -- talking to the agent -----------------------------------------------------------------
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
        """Send to the agent's (first) topic; Faust's ``agent.send``. Returns the record's delivery.

        ``headers`` a mapping or ``(name, value)`` pairs; ``reply_to`` (an agent, a topic or a topic
        name) asks the agent to send what it yields for this record there, with ``correlation_id``
        (a new one when not given) in the reply's ``Faust-Ag-CorrelationId`` header; the other
        arguments are :meth:`Topic.send`'s (``callback`` is called here too: Faust drops it)."""
        if reply_to is not None:
            headers = self._request_headers(headers, reply_to, correlation_id or uuid.uuid4().hex)
        return await self.channel.send(
            key=key,
            value=value,
            partition=partition,
            timestamp=timestamp,
            headers=headers,
            schema=schema,
            key_serializer=key_serializer,
            value_serializer=value_serializer,
            callback=callback,
            force=force,
        )

    def _reply_topic(self, reply_to: Any) -> str:
        """The topic ``reply_to`` names; warns when this app's agents would not answer on it."""
        topic_name = _topic_name(reply_to)
        if not reply_topic_allowed(self.app, topic_name):
            log.warning(
                "agent %r: reply_to=%r is not a reply topic of app %r, so this app's agents will not answer "
                "there; allow it with the reply_topics setting (reply_topics=%r), or use agent.ask()",
                self.name,
                topic_name,
                self.app.settings.id,
                topic_name,
            )
        return topic_name

    def _request_headers(self, headers: Any, reply_to: Any, correlation_id: str) -> list[tuple[str, bytes]]:
        """``headers`` with Faust's request headers added (reply_to's topic, the correlation id);
        warns when this app's agents would not answer on that topic."""
        topic_name = self._reply_topic(reply_to)
        return [
            *(prepare_headers(headers) or ()),
            (REPLY_TO, topic_name.encode()),
            (CORRELATION_ID, correlation_id.encode()),
        ]

    async def cast(
        self,
        value: Any = None,
        *,
        key: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
    ) -> None:
        """Send without waiting for a reply (Faust's ``agent.cast``)."""
        await self.send(key=key, value=value, partition=partition, timestamp=timestamp, headers=headers)

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
        """Send and wait for the value the agent yields for this request; as Faust's, it waits as
        long as that takes unless ``timeout`` (seconds) is given (then ``asyncio.TimeoutError``).

        The reply comes back on this process's reply topic: ``reply_to`` may name it (Faust's
        ``app.conf.reply_to`` role); another topic is refused (TypeError, saying to use
        :meth:`ask_nowait` and read the reply there)."""
        replies = await self.app.replies()
        if reply_to is not None and _topic_name(reply_to) != replies.topic_name:
            raise TypeError(
                f"agent {self.name!r}: ask(reply_to={_topic_name(reply_to)!r}) waits for the reply on this "
                f"process's reply topic {replies.topic_name!r}; to have the reply sent elsewhere use "
                "ask_nowait(reply_to=...) and read it there"
            )
        if correlation_id is None:
            correlation_id, fut = replies.expect()
        else:
            fut = asyncio.get_running_loop().create_future()
            replies.expect_promise(correlation_id, fut)
        request = self._request_headers(headers, replies.topic_name, correlation_id)
        sensors = self.app.sensors
        asked = sensors.on_ask_start(self, correlation_id) if sensors else None  # a tracing sensor's ask span
        error: BaseException | None = None
        try:
            await self.channel.send(key=key, value=value, partition=partition, timestamp=timestamp, headers=request)
            return await asyncio.wait_for(fut, timeout)
        except BaseException as exc:
            error = exc
            raise
        finally:
            replies.forget(correlation_id)
            if asked:
                sensors.on_ask_end(self, asked, error)

    async def ask_nowait(
        self,
        value: Any = None,
        *,
        key: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
        reply_to: Any = None,
        correlation_id: str | None = None,
        force: bool = False,
    ) -> ReplyPromise:
        """Faust's ``agent.ask_nowait``: send a request whose reply goes to ``reply_to`` (a topic
        name, a Topic or an Agent; required, as in Faust) and return its :class:`ReplyPromise`
        at once. The promise resolves when ``reply_to`` is this process's reply topic
        (``(await app.replies()).topic_name``, what :meth:`ask` uses); for another topic, read the
        reply there (its ``Faust-Ag-CorrelationId`` header is ``promise.correlation_id``). As in
        Faust any topic may be named; an agentstream agent answers only on the app's reply topics and
        those the ``reply_topics`` setting allows (a warning says so here)."""
        if reply_to is None:
            raise TypeError("Missing reply_to argument")
        topic_name = self._reply_topic(reply_to)
        promise = ReplyPromise(topic_name, correlation_id or uuid.uuid4().hex)
        replies = getattr(self.app, "_replies", None)  # this process's reply reader, when started
        if replies is not None and replies.topic_name == topic_name:
            replies.expect_promise(promise.correlation_id, promise)
        request_headers = [
            *(prepare_headers(headers) or ()),
            (REPLY_TO, topic_name.encode()),
            (CORRELATION_ID, promise.correlation_id.encode()),
        ]
        await self.send(
            key=key, value=value, partition=partition, headers=request_headers, timestamp=timestamp, force=force
        )
        return promise

    def add_sink(self, sink: Sink) -> None:
        """Faust's ``agent.add_sink``: one more place for what the agent yields (a topic, an agent,
        a channel or a function); a sink already there is not added twice."""
        if sink not in self.sinks:
            self.sinks.append(sink)

    def stream(self, **kwargs: Any) -> Stream:
        """Faust's ``agent.stream()``: a new stream over the agent's channel, for code outside the
        agent (the channel's own ``stream()``: a Channel's, or a Topic's where topics have one)."""
        make = getattr(self.channel, "stream", None)
        if make is None:
            raise TopologyError(
                f"agent {self.name!r}: its channel {self.channel!r} makes no stream outside a worker; "
                "iterate the agent's topic from an agent instead"
            )
        stream: Stream = make(**kwargs)
        return stream

    async def map(
        self, values: Any, key: Any = None, reply_to: Any = None, timeout: float | None = None
    ) -> AsyncIterator[Any]:
        """Faust's ``agent.map``: ask the agent about every value, yield the replies as they arrive."""
        async for reply in self._ask_all([(key, v) for v in await _collect(values)], timeout, reply_to):
            yield reply

    async def kvmap(self, items: Any, reply_to: Any = None, timeout: float | None = None) -> AsyncIterator[Any]:
        """Faust's ``agent.kvmap``: like :meth:`map` over ``(key, value)`` pairs (a mapping or pairs)."""
        pairs = list(items.items()) if hasattr(items, "items") else await _collect(items)
        async for reply in self._ask_all([(k, v) for k, v in pairs], timeout, reply_to):
            yield reply

    async def join(self, values: Any, key: Any = None, reply_to: Any = None, timeout: float | None = None) -> list[Any]:
        """Faust's ``agent.join``: ask about every value, return the replies in the values' order."""
        asks = [self.ask(v, key=key, reply_to=reply_to, timeout=timeout) for v in await _collect(values)]
        return list(await asyncio.gather(*asks))

    async def kvjoin(self, items: Any, reply_to: Any = None, timeout: float | None = None) -> list[Any]:
        pairs = list(items.items()) if hasattr(items, "items") else await _collect(items)
        return list(await asyncio.gather(*(self.ask(v, key=k, reply_to=reply_to, timeout=timeout) for k, v in pairs)))

    async def _ask_all(
        self, pairs: list[tuple[Any, Any]], timeout: float | None, reply_to: Any = None
    ) -> AsyncIterator[Any]:
        futures = [asyncio.ensure_future(self.ask(v, key=k, reply_to=reply_to, timeout=timeout)) for k, v in pairs]
        try:
            for fut in asyncio.as_completed(futures):
                yield await fut
        finally:
            for fut in futures:
                fut.cancel()

    def test_context(self, **kwargs: Any) -> AgentTestContext:
        """An in-process harness for this agent alone (:mod:`agentstream.agents.test_context`)."""
        from .test_context import AgentTestContext  # on first use: `import agentstream` stays light

        return AgentTestContext(self, **kwargs)

    def __repr__(self) -> str:
        return f"<Agent {self.name} topics={[t.name for t in self.topics]} splits={[s.name for s in self.splits]}>"


class ReplyPromise(asyncio.Future[Any]):
    """Faust's ``ReplyPromise``: the future reply of :meth:`Agent.ask_nowait`, with the topic the
    reply goes to and the request's correlation id."""

    def __init__(self, reply_to: str, correlation_id: str) -> None:
        super().__init__()
        self.reply_to = reply_to
        self.correlation_id = correlation_id


def _topic_name(target: Any) -> str:
    """A reply destination's topic name: a name, a Topic, or an Agent (its channel)."""
    if isinstance(target, str):
        return target
    if isinstance(target, Agent):
        return target.channel.name
    name = getattr(target, "name", None)
    if isinstance(name, str) and name:
        return name
    raise ValueError(f"reply_to must be a topic name, a Topic or an Agent, got {target!r}")


async def _collect(values: Any) -> list[Any]:
    """A list of an iterable or an async iterable (Faust's map/join take either)."""
    if hasattr(values, "__aiter__"):
        return [v async for v in values]
    return list(values)
