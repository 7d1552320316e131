"""Streams: what an agent iterates.

A stream pulls records straight from its task's partition group (no queue between them), so
the next record is taken only when the agent asks for it: depth-first, and the previous record
is acknowledged (its offset becomes committable) at exactly that moment.

Stream operations that change partitioning (``group_by``, ``through``) are *split points*: the
agent's sub-topology ends there. A task that reads the agent's source does not run the agent: it
runs the operations the agent made before the split and forwards each record to the split topic
(:func:`upstream_processors`, Faust's passive drainer); the agent body runs in the tasks of its
last stage, where the stream resumes after the split with the earlier operations applied upstream.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mypy_extensions import mypyc_attr

from .durations import to_seconds
from .events import Event, set_current_event, streams_in_hand
from .exceptions import TopologyError
from .joins import join_stream
from .runtime import current_clock, current_runtime

if TYPE_CHECKING:
    from .topics import Topic

__all__ = [
    "Acked",
    "Stream",
    "StreamInput",
    "PolledInput",
    "SplitPoint",
    "InHand",
    "streams_in_hand",
    "upstream_processors",
]

Processor = Callable[[Event], bool | Awaitable[bool]]
_NOTHING_DONE: list[Event] = []  # poll_event's argument when there is nothing to acknowledge (never filled)


@dataclass
class SplitPoint:
    """A ``group_by``/``through`` in an agent's code: where one sub-topology hands over to the next."""

    kind: str  # "group_by" or "through"
    name: str
    key: Callable[[Any], Any] | None
    topic: Topic | None = None  # resolved by the app (repartition topic or the through topic)
    partitions: int | None = None
    key_serializer: str | None = None  # group_by: the new key's encoding (None: the app's, raw by default)
    faust_name: str | None = None  # Faust's name for the split (``Model.field``): topic_naming='faust'
    # the operations between the previous split point (or the source) and this one, as the agent's
    # first instance made them: the upstream stage runs these and the forwarder, not the agent body
    processors: tuple[Processor, ...] = ()


class StreamInput(Protocol):
    """Where a stream's records come from: a task's partition group (or the harness's channel)."""

    stage: int

    async def next_event(self, timeout: float | None = None) -> Event | None:
        """The next decoded event; None when ``timeout`` passed first."""
        ...

    def ack(self, event: Event) -> None:
        """The event is fully handled: its offset + 1 may be committed."""
        ...

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        """Register or look up the agent's ``index``-th split point (1-based)."""
        ...


class PolledInput:
    """A stream input with a synchronous pull besides ``next_event``: a stream task
    (:class:`agentstream.worker.task.StreamTask` extends this class). The stream calls it once
    per record; in the compiled build that is a native call, not a Python one."""

    def poll_event(self, done: list[Event]) -> Event | None:
        """Acknowledge ``done`` (and empty it), then give the next record if one is buffered and
        may go now; None sends the stream to ``next_event`` (nothing ready, or a wait)."""
        raise NotImplementedError


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class Stream:
    """An async iterator of values (Faust's ``Stream``); ``events()``/``items()`` give more."""

    def __init__(self, input: StreamInput, processors: tuple[Processor, ...] = (), splits: int = 0) -> None:
        self._input = input
        self._processors = processors
        self._splits = splits
        self._pending: list[Event] = []
        self.current_event: Event | None = None
        # A task's synchronous fast path (StreamTask.poll_event): a ready record without a coroutine.
        # It acknowledges the list of events it is given (and empties it) first.
        self._poll: PolledInput | None = input if isinstance(input, PolledInput) else None
        self._ack = input.ack
        hand = streams_in_hand.get()
        if hand is not None:
            hand.append(self)

    def _rebind(self, input: StreamInput) -> None:
        """Read ``input`` from now on (the agent's first instance, started at discovery, gets its
        task's input once partitions are assigned: its streams then take the task's fast path)."""
        self._input = input
        self._poll = input if isinstance(input, PolledInput) else None
        self._ack = input.ack

    def __class_getitem__(cls, item: Any) -> Any:
        """``StreamT[float]``/``faust.Stream[Request]`` in annotations: the parameter is documentation."""
        return cls

    @property
    def active_partitions(self) -> set[Any]:
        """The partitions this stream's task reads (Faust's ``stream.active_partitions``)."""
        return set(getattr(self._input, "partitions", ()) or ())

    def in_hand(self) -> list[Event]:
        """The records handed out (or being filtered) and not acknowledged yet."""
        return list(self._pending)

    # -- iteration -------------------------------------------------------------------------
    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> Any:
        """The per-record path, the only copy of it: ack what was handed out last, then take
        the next record (without a coroutine below this one when the task has it ready)."""
        pending = self._pending
        poll = self._poll
        if poll is not None and not self._processors:
            event = poll.poll_event(pending)  # acks (and empties) pending in the same call
            if event is not None:
                self.current_event = event
                set_current_event(event)
                pending.append(event)
                return event.value
        elif pending:
            ack = self._ack
            for done in pending:
                ack(done)
            pending.clear()
        return (await self._wait_next()).value

    async def _advance(self) -> Event:
        """:meth:`__anext__` giving the event (``events()``, ``items()``): it is the current event."""
        await self.__anext__()
        event = self.current_event
        assert event is not None
        return event

    async def _wait_next(self) -> Event:
        """The next record when none was ready (or the stream has processors): waits for it."""
        event: Event | None
        if self._processors:
            event = await self._pull()
        else:
            event = await self._input.next_event()
            self.current_event = event
            set_current_event(event)
        assert event is not None  # no timeout given: the input waits for a record
        self._pending.append(event)
        return event

    def ack_pending(self) -> None:
        """Acknowledge what was handed out last; called when the agent asks for more."""
        if self._pending:
            ack = self._ack
            for event in self._pending:
                ack(event)
            self._pending.clear()

    async def _pull(self, timeout: float | None = None, keep_pending: bool = False) -> Event | None:
        """Next event that passes every processor; events dropped on the way are acked at once."""
        inp = self._input
        processors = self._processors
        poll = self._poll
        while True:
            event = None if poll is None else poll.poll_event(_NOTHING_DONE)
            if event is None:
                event = await inp.next_event(timeout)
            if event is None:
                return None
            keep: Any = True
            try:
                for proc in processors:
                    keep = proc(event)
                    if not isinstance(keep, bool):
                        keep = await keep
                    if not keep:
                        break
            except BaseException:
                self._pending.append(event)  # an operation raised on it: the record is in hand
                raise
            if keep:
                self.current_event = event
                set_current_event(event)
                return event
            inp.ack(event)

    def events(self) -> AsyncIterator[Event]:
        return _Events(self)

    def items(self) -> AsyncIterator[tuple[Any, Any]]:
        return _Items(self)

    def take(self, max_: int, within: Any) -> AsyncIterator[list[Any]]:
        """Batches of up to ``max_`` values, yielded early when ``within`` seconds pass after the first.

        The batch's records are acknowledged when the agent asks for the next batch.
        """
        return _Values(_Batches(self, max_, within))

    def take_events(self, max_: int, within: Any) -> AsyncIterator[list[Event]]:
        """Like :meth:`take`, with the events (key, value, message) instead of the values."""
        return _Batches(self, max_, within)

    def take_with_timestamp(self, max_: int, within: Any, timestamp_field_name: str) -> AsyncIterator[list[Any]]:
        """Like :meth:`take`; a dict value also gets the record's timestamp (seconds, Faust's
        ``message.timestamp``) under ``timestamp_field_name``. Other values are given unchanged."""
        return _Values(_Batches(self, max_, within), timestamp_field_name or None)

    def noack_take(self, max_: int, within: Any) -> AsyncIterator[list[Event]]:
        """Faust's: batches of up to ``max_`` *events* (as :meth:`take_events`) on :meth:`noack`:
        the records stay unacknowledged until the agent acknowledges each (``event.ack()``,
        ``stream.ack(event)``)."""
        return _Batches(self.noack(), max_, within)

    def add_processor(self, processor: Callable[[Any], Any]) -> None:
        """Faust's ``stream.add_processor(fun)``: every value this stream gives is first replaced
        by ``fun(value)`` (sync or async), in the order the processors were added."""

        def _process(event: Event) -> bool | Awaitable[bool]:
            result = processor(event.value)
            if inspect.isawaitable(result):
                return _set_value(event, result)
            event.value = result
            return True

        self._processors = self._processors + (_process,)

    def channel_named(self, name: str) -> Any:
        """The app's topic ``name`` (``event.send("name")`` resolves names through the stream)."""
        app = getattr(getattr(self._input, "agent", None), "app", None)
        if app is None:
            runtime = current_runtime.get()
            app = None if runtime is None else runtime.app
        if app is None:
            raise LookupError(f"no app to resolve topic {name!r}: pass the topic object (app.topic({name!r}))")
        return app.topic(name)

    def _echo_topic(self, name: str) -> Any:
        """``echo("name")``: as Faust's, a topic derived from the stream's source topic (its types and
        serializers) named ``name``; the app's topic of that name when the stream has no source topic."""
        agent = getattr(self._input, "agent", None)
        sources = getattr(agent, "topics", None) or []
        if sources and name not in sources[0].app.topics and hasattr(sources[0], "derive"):
            return sources[0].derive(topics=[name])
        return self.channel_named(name)

    def enumerate(self, start: int = 0) -> AsyncIterator[tuple[int, Any]]:
        """``(i, value)`` for each value, ``i`` counting from ``start``."""
        return _Enumerated(self, start)

    # -- operations --------------------------------------------------------------------------
    def _derive(self, *extra: Processor) -> Stream:
        return type(self)(self._input, self._processors + extra, self._splits)

    def filter(self, fun: Callable[[Any], Any]) -> Stream:
        """Keep values for which ``fun`` (sync or async) is true; dropped records are acked at once."""
        if inspect.iscoroutinefunction(fun):

            async def _afilter(event: Event) -> bool:
                return bool(await fun(event.value))

            return self._derive(_afilter)
        return self._derive(lambda event: bool(fun(event.value)))

    def group_by(
        self,
        key: Any,
        *,
        name: str | None = None,
        partitions: int | None = None,
        key_serializer: str | None = None,
        topic: Topic | None = None,
    ) -> Stream:
        """Re-key the stream through the repartition topic ``<app>-<name>-repartition``.

        The new key is encoded with ``key_serializer`` (default: the app's, Faust's ``raw``: str
        as UTF-8), the encoding tables and table topics use, so a join or a table write after the
        group_by finds the key in the partition any Kafka client would put it in."""
        keyfn, field_name = _key_function(key)
        point_name = name or (topic.name if topic is not None else None) or field_name
        if point_name is None:
            raise TopologyError(
                "group_by() with a callable key needs a name: stream.group_by(fn, name='by_x') "
                "names the repartition topic <app>-by_x-repartition"
            )
        return self._split(
            SplitPoint(
                "group_by",
                point_name,
                keyfn,
                topic=topic,
                partitions=partitions,
                key_serializer=key_serializer,
                faust_name=name or _faust_ident(key),
            )
        )

    def echo(self, *channels: Any) -> Stream:
        """Faust's ``stream.echo(topic, ...)``: also send every value (with its key) to ``channels``
        (topics, channels or agents, or topic names: the app's topics of those names, created on
        first use when the worker did not), then pass it on unchanged."""
        named = [c for c in channels if isinstance(c, str)]
        for c in channels:
            if not isinstance(c, str) and not hasattr(c, "send"):
                raise TopologyError(f"echo() needs topics, topic names, channels or agents, got {c!r}")
        targets = [self._echo_topic(c) if isinstance(c, str) else c for c in channels]
        undeclared = [t for t in targets if getattr(t, "name", None) in named]

        async def _echo(event: Event) -> bool:
            while undeclared:  # a topic first named here: created as app.send creates one
                await undeclared.pop().maybe_declare()
            for c in targets:
                await c.send(key=event.key, value=event.value)
            return True

        return self._derive(_echo)

    def ack(self, event: Event) -> Acked:
        """Acknowledge ``event`` now instead of when the agent asks for the next record (Faust's
        ``stream.ack``); false when it was not pending (already acknowledged). Faust's is a
        coroutine: the result is also awaitable (``await stream.ack(event)`` gives the same bool)."""
        return Acked(self._ack_now(event))

    def _ack_now(self, event: Event) -> bool:
        for i, pending in enumerate(self._pending):
            if pending is event:
                del self._pending[i]
                self._input.ack(event)
                return True
        return False

    @property
    def channel(self) -> Any:
        """Faust's ``stream.channel``: the topic or channel this stream reads (an agent's stream:
        the agent's; None for a stream over an iterable)."""
        source = self._input
        channel = getattr(source, "channel", None)
        if channel is None:
            channel = getattr(getattr(source, "agent", None), "channel", None)
        return channel

    def noack(self) -> Stream:
        """Faust's ``stream.noack()``: records are acknowledged only by ``stream.ack(event)``, so an
        offset is committed only past records the agent acknowledged itself."""
        _out_of_order(self._input)  # a task (or a tee/combine over tasks): acks may now come in any order
        stream = _NoAckStream(self._input, self._processors, self._splits)
        # This stream's record in hand (if any) is acknowledged when the new stream takes its first
        # record: as when the agent asks this stream for the next one, never before.
        stream._parent = self
        return stream

    def tee(self, n: int = 2) -> tuple[Stream, ...]:
        """``n`` streams that each see every value of this one (Faust's ``stream.tee``); a record is
        acknowledged when every copy has moved past it. Iterate the copies concurrently."""
        if n < 1:
            raise ValueError("tee(n): n must be >= 1")
        tee = _Tee(self, n)
        return tuple(type(self)(_TeeInput(tee, i)) for i in range(n))

    def combine(self, *streams: Stream) -> Stream:
        """One stream of the values of this and ``streams``, in the order they arrive (Faust's
        ``stream.combine`` / ``s1 & s2``); each record is acknowledged on its own stream."""
        return type(self)(_CombinedInput((self, *streams)))

    def __and__(self, other: Stream) -> Stream:
        return self.combine(other)

    def through(self, topic: Topic | str) -> Stream:
        """Forward every record to ``topic`` and continue from that topic (a new sub-topology)."""
        name = topic if isinstance(topic, str) else topic.name
        return self._split(SplitPoint("through", name, None, topic=None if isinstance(topic, str) else topic))

    # -- joins (agentstream.joins: semantics and how both sides meet in one task) ----------------
    def join(
        self, other: Any, *, within: Any = None, grace: Any = None, key: Any = None, name: str | None = None
    ) -> Stream:
        """Inner join: a stream of ``(value, other_value)``.

        ``other`` is a Table (co-partitioned; ideally ``from_topic``), a GlobalTable (``key=`` picks
        the lookup key from the value) or a Topic (``within=`` seconds/timedelta, ``grace=``: a
        windowed stream-stream join whose buffers are changelogged)."""
        return join_stream(self, other, "inner", within=within, grace=grace, key=_join_key(key), name=name)

    def left_join(
        self, other: Any, *, within: Any = None, grace: Any = None, key: Any = None, name: str | None = None
    ) -> Stream:
        """Like :meth:`join`, but a record without a match still gives ``(value, None)``."""
        return join_stream(self, other, "left", within=within, grace=grace, key=_join_key(key), name=name)

    def outer_join(self, other: Any, *, within: Any = None, grace: Any = None, name: str | None = None) -> Stream:
        """Stream-stream only: unmatched records of either side give ``(value, None)``/``(None, value)``."""
        return join_stream(self, other, "outer", within=within, grace=grace, name=name)

    def _split(self, point: SplitPoint) -> Stream:
        index = self._splits + 1
        point.processors = self._processors  # kept when this call registers the split point
        resolved = self._input.split(index, point)
        stage = self._input.stage
        if index <= stage:
            # This task reads the split topic itself: the earlier operations ran upstream.
            return type(self)(self._input, (), index)
        return type(self)(self._input, self._processors + (_forwarder(resolved),), index)

    def __repr__(self) -> str:
        return f"<Stream stage={self._input.stage} splits={self._splits}>"


@mypyc_attr(native_class=False)  # a plain Python class: awaitable and usable as a bool
class Acked:
    """What :meth:`Stream.ack` gives: true when the call acknowledged the event. Awaiting it
    gives the same bool, so Faust's ``await stream.ack(event)`` works beside ``stream.ack(event)``."""

    __slots__ = ("acked",)

    def __init__(self, acked: bool) -> None:
        self.acked = acked

    def __bool__(self) -> bool:
        return self.acked

    def __eq__(self, other: object) -> bool:
        return self.acked == (other.acked if isinstance(other, Acked) else other)

    def __hash__(self) -> int:
        return hash(self.acked)

    def __await__(self) -> Generator[Any, None, bool]:
        return _at_once(self.acked)

    def __repr__(self) -> str:
        return repr(self.acked)


def _at_once(value: bool) -> Generator[Any, None, bool]:
    """An awaitable's generator that finishes at once with ``value`` (it never suspends)."""
    yield from ()
    return value


class _NoAckStream(Stream):
    """A stream whose records stay in hand until ``stream.ack(event)``."""

    _parent: Stream | None = None  # the stream noack() was called on: its record in hand goes at our first

    async def __anext__(self) -> Any:
        return (await self._advance()).value  # never Stream.__anext__'s ack of the last record

    async def _advance(self) -> Event:
        parent = self._parent
        if parent is not None:
            self._parent = None
            parent.ack_pending()
        event = await self._pull() if self._processors else await self._input.next_event()
        assert event is not None
        if not self._processors:
            self.current_event = event
            set_current_event(event)
        self._pending.append(event)
        return event

    def ack_pending(self) -> None:
        return None  # only stream.ack(event) acknowledges


TEE_MAX_BUFFERED = 1000
"""Records one copy of ``stream.tee(n)`` may hold unread: a copy read faster waits for it there
(each buffered record is also unacknowledged at the source, so a copy that never reads would
otherwise grow its buffer by every record the others take)."""


class _Tee:
    """The shared head of ``stream.tee(n)``: pulls each record once, hands it to every copy."""

    def __init__(self, source: Stream, n: int) -> None:
        self.source = source
        self.buffers: list[list[Event]] = [[] for _ in range(n)]
        self.room = asyncio.Event()  # set when a full copy took a record: the others may pull again
        self.room.set()
        self.acks: dict[int, int] = {}  # id(event) -> copies that acknowledged it
        self.taken: dict[int, Event] = {}  # pulled from the source, not acknowledged by every copy yet
        self.released = False  # the agent failed and release() ran: the copies end
        self.puller: asyncio.Task[Any] | None = None  # the asyncio task waiting in a source pull
        self.n = n
        self.lock = asyncio.Lock()

    async def next_event(self, i: int, timeout: float | None) -> Event | None:
        if self.released:
            # a copy the failed agent left running (asyncio.gather does not cancel the others):
            # its ``async for`` ends here, so it takes no records the restarted agent should get
            raise StopAsyncIteration
        buffers = self.buffers
        while not buffers[i]:
            if any(len(b) >= TEE_MAX_BUFFERED for b in buffers):
                # another copy is that far behind: pulling more would only grow its buffer
                self.room.clear()
                try:
                    await asyncio.wait_for(self.room.wait(), timeout)
                except TimeoutError:
                    return None
                if self.released:
                    raise StopAsyncIteration
                continue
            async with self.lock:
                if not buffers[i] and not await self._fill(timeout):
                    return None
        event = buffers[i].pop(0)
        if len(buffers[i]) == TEE_MAX_BUFFERED - 1:
            self.room.set()
        return event

    async def _fill(self, timeout: float | None) -> bool:
        """Under the lock: pull the source's next record into every copy's buffer. False: the
        timeout passed first."""
        if self.released:
            raise StopAsyncIteration
        # Remembered so release() can cancel a copy the failed agent left running while it
        # waits here: a record is taken and returned within one step, so a waiting pull
        # holds none, and a cancelled one takes none the restarted agent should get.
        self.puller = asyncio.current_task()
        try:
            event = await self.source._pull(timeout)
        finally:
            self.puller = None
        if event is None:
            return False
        self.acks[id(event)] = 0
        self.taken[id(event)] = event
        for buffer in self.buffers:
            buffer.append(event)
        return True

    def ack(self, event: Event) -> None:
        seen = self.acks.get(id(event))
        if seen is None:
            return
        if seen + 1 >= self.n:
            del self.acks[id(event)]
            del self.taken[id(event)]
            self.source._input.ack(event)
        else:
            self.acks[id(event)] = seen + 1

    def held(self) -> list[Event]:
        """Records taken from the source that not every copy has acknowledged (in a copy's hand
        or still in its buffer)."""
        return list(self.taken.values())

    def release(self) -> None:
        """The agent failed and the error policy handled :meth:`held`: acknowledge them at the
        source and forget the copies' buffers (the restarted agent makes a new tee)."""
        self.released = True
        taken = self.held()
        puller = self.puller
        if puller is not None and puller is not asyncio.current_task():
            puller.cancel()
        self.taken.clear()
        self.acks.clear()
        for buffer in self.buffers:
            buffer.clear()
        self.room.set()  # a copy waiting for room ends (released)
        for event in taken:
            self.source._input.ack(event)


class _TeeInput:
    def __init__(self, tee: _Tee, i: int) -> None:
        self.tee = tee
        self.i = i
        self.stage = tee.source._input.stage

    @property
    def partitions(self) -> Any:
        return getattr(self.tee.source._input, "partitions", ())

    async def next_event(self, timeout: float | None = None) -> Event | None:
        return await self.tee.next_event(self.i, timeout)

    def held(self) -> list[Event]:
        return self.tee.held()

    def release(self) -> None:
        self.tee.release()

    def ack(self, event: Event) -> None:
        self.tee.ack(event)

    def acks_out_of_order(self) -> None:
        """A copy's records are acknowledged out of order (noack): so are the source's."""
        _out_of_order(self.tee.source._input)

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        raise TopologyError("group_by()/through() after tee(): repartition before tee() instead")


class _CombinedInput:
    """Values of several streams as they arrive; acks go back to the stream each came from."""

    def __init__(self, streams: tuple[Stream, ...]) -> None:
        self.streams = streams
        self.stage = streams[0]._input.stage
        self._pulls: dict[int, asyncio.Future[Event | None]] = {}
        self._origin: dict[int, Stream] = {}
        self._released = False  # the agent failed and release() ran: the combined stream ends

    @property
    def partitions(self) -> Any:
        out: set[Any] = set()
        for s in self.streams:
            out |= set(getattr(s._input, "partitions", ()) or ())
        return out

    async def next_event(self, timeout: float | None = None) -> Event | None:
        if self._released:
            raise StopAsyncIteration  # left running by the failed agent (see _Tee.next_event)
        for i, s in enumerate(self.streams):
            if i not in self._pulls:
                pull = self._pulls[i] = asyncio.ensure_future(s._pull())
                pull.add_done_callback(_retrieved)  # a pull nobody reads again (the agent ended) logs nothing
        done, _ = await asyncio.wait(self._pulls.values(), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            return None
        for i, fut in list(self._pulls.items()):
            if fut in done:
                del self._pulls[i]
                event = fut.result()
                if event is not None:
                    self._origin[id(event)] = self.streams[i]
                    return event
        return None

    def ack(self, event: Event) -> None:
        stream = self._origin.pop(id(event), None)
        if stream is not None:
            stream._input.ack(event)

    def acks_out_of_order(self) -> None:
        """The combined records are acknowledged out of order (noack): so are each stream's."""
        for s in self.streams:
            _out_of_order(s._input)

    def held(self) -> list[Event]:
        """Records a pull has taken that the combined stream has not handed out yet."""
        return [event for fut in self._pulls.values() if (event := _pulled(fut)) is not None]

    def release(self) -> None:
        """The agent failed and the error policy handled :meth:`held`: stop the pulls still
        waiting, acknowledge what the finished ones took (the restarted agent combines anew)."""
        self._released = True
        pulls = list(self._pulls.items())
        self._pulls.clear()
        for i, fut in pulls:
            if not fut.done():
                fut.cancel()
            elif (event := _pulled(fut)) is not None:
                self.streams[i]._input.ack(event)

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        raise TopologyError("group_by()/through() after combine(): repartition each stream before combining")


class _Events:
    """``stream.events()``: a plain async iterator (an async generator costs a layer per record)."""

    __slots__ = ("_stream",)

    def __init__(self, stream: Stream) -> None:
        self._stream = stream

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> Event:
        stream = self._stream
        await stream.__anext__()  # not _advance(): one coroutine less per record
        return stream.current_event  # type: ignore[return-value]  # set by __anext__


class _Items:
    """``stream.items()``: (key, value) pairs, without an async generator's layer either."""

    __slots__ = ("_stream",)

    def __init__(self, stream: Stream) -> None:
        self._stream = stream

    def __aiter__(self) -> _Items:
        return self

    async def __anext__(self) -> tuple[Any, Any]:
        stream = self._stream
        await stream.__anext__()  # not _advance(): one coroutine less per record
        event: Event = stream.current_event  # type: ignore[assignment]  # set by __anext__
        return event.key, event.value


class _Batches:
    """``stream.take_events(max_, within)``: batches of up to ``max_`` events; a batch is given
    early once ``within`` seconds passed after its first event. Its records stay in hand
    (acknowledged when the agent asks for the next batch)."""

    __slots__ = ("_stream", "_max", "_within")

    def __init__(self, stream: Stream, max_: int, within: Any) -> None:
        if max_ < 1:
            raise ValueError("take(max_): max_ must be >= 1")
        self._stream = stream
        self._max = max_
        self._within = to_seconds(within)

    def __aiter__(self) -> _Batches:
        return self

    async def __anext__(self) -> list[Event]:
        stream = self._stream
        stream.ack_pending()
        first = await stream._pull()
        assert first is not None  # no timeout given: the input waits for a record
        stream._pending.append(first)
        batch = [first]
        clock = current_clock()  # the app's: virtual in the harness, so a test need not wait
        deadline = clock.monotonic() + self._within
        while len(batch) < self._max:
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                break
            event = await stream._pull(remaining)
            if event is None:
                break
            stream._pending.append(event)
            batch.append(event)
        return batch


class _Values:
    """``stream.take(max_, within)``: :class:`_Batches` of values (``take_with_timestamp``: a dict
    value gets its record's timestamp in seconds under ``stamp``)."""

    __slots__ = ("_batches", "_stamp")

    def __init__(self, batches: _Batches, stamp: str | None = None) -> None:
        self._batches = batches
        self._stamp = stamp

    def __aiter__(self) -> _Values:
        return self

    async def __anext__(self) -> list[Any]:
        events = await self._batches.__anext__()
        stamp = self._stamp
        if stamp is not None:
            for event in events:
                if isinstance(event.value, dict):
                    event.value[stamp] = event.message.timestamp
        return [event.value for event in events]


class _Enumerated:
    """``stream.enumerate(start)``: ``(i, value)`` pairs."""

    __slots__ = ("_stream", "_next")

    def __init__(self, stream: Stream, start: int) -> None:
        self._stream = stream
        self._next = start

    def __aiter__(self) -> _Enumerated:
        return self

    async def __anext__(self) -> tuple[int, Any]:
        value = await self._stream.__anext__()
        i = self._next
        self._next = i + 1
        return i, value


class InProcessStream(Stream):
    """A stream whose whole agent runs in one place (the agent test harness, channels):
    ``group_by`` re-keys in memory and ``through`` is a no-op, as there is no partitioning to change."""

    def _split(self, point: SplitPoint) -> Stream:
        keyfn = point.key
        if point.kind == "group_by" and keyfn is not None:

            def rekey(event: Event) -> bool:
                event.key = keyfn(event.value)
                return True

            return type(self)(self._input, self._processors + (rekey,), self._splits + 1)
        return type(self)(self._input, self._processors, self._splits + 1)


class InHand:
    """What an agent instance held when it failed: the records in its streams' hands and those
    its tee/combine inputs took and did not hand on, each once. :meth:`release` acknowledges
    exactly these, once the error policy has handled them (records taken later are not)."""

    def __init__(self, hand: list[Stream]) -> None:
        self._pending = [(s, list(s._pending)) for s in hand]
        inputs: dict[int, Any] = {}
        for s in hand:
            if hasattr(s._input, "release"):
                inputs.setdefault(id(s._input), s._input)
        self._inputs = list(inputs.values())
        seen: dict[int, Event] = {}
        for _, events in self._pending:
            for event in events:
                seen.setdefault(id(event), event)
        for inp in self._inputs:
            for event in inp.held():
                seen.setdefault(id(event), event)
        self.events = list(seen.values())

    def redeliverable(self) -> bool:
        """The records are held by the agent's own streams only (no tee or combine input holds
        one): handing them out again to the restarted agent reaches the same code."""
        return not self._inputs

    def release(self) -> None:
        for stream, events in self._pending:
            for event in events:
                Stream._ack_now(stream, event)  # also for noack() streams: the policy handled it
        for inp in self._inputs:
            inp.release()


async def _set_value(event: Event, result: Awaitable[Any]) -> bool:
    """An async processor's result becomes the event's value (:meth:`Stream.add_processor`)."""
    event.value = await result
    return True


def _pulled(fut: asyncio.Future[Event | None]) -> Event | None:
    """The record a finished pull took (None: still running, cancelled, failed, or none)."""
    if fut.done() and not fut.cancelled() and fut.exception() is None:
        return fut.result()
    return None


def _retrieved(fut: asyncio.Future[Any]) -> None:
    """Mark a finished future's exception as retrieved: it reaches whoever reads its result."""
    if not fut.cancelled():
        fut.exception()


def _out_of_order(input: StreamInput) -> None:
    """Tell ``input`` its records may be acknowledged in any order (a task tracks each one then)."""
    out_of_order = getattr(input, "acks_out_of_order", None)
    if out_of_order is not None:
        out_of_order()


def _faust_ident(key: Any) -> str | None:
    """Faust's name of a Record field key (``Model.field``), which names its repartition topic."""
    model, field_name = getattr(key, "model", None), getattr(key, "field", None)
    if isinstance(field_name, str) and isinstance(model, type):
        return f"{model.__name__}.{field_name}"
    return None


def _key_function(key: Any) -> tuple[Callable[[Any], Any], str | None]:
    """A group_by key may be a callable, a Record field descriptor or a field name."""
    field_name = getattr(key, "field", None)
    if isinstance(field_name, str) and hasattr(key, "getattr"):
        return key.getattr, field_name
    if isinstance(key, str):
        attr = key
        return (lambda value: value[attr] if isinstance(value, dict) else getattr(value, attr)), attr
    if callable(key):
        return key, None
    raise TopologyError(f"group_by key must be a callable, a Record field or a field name, got {key!r}")


def _join_key(key: Any) -> Callable[[Any], Any] | None:
    """A join's ``key=`` (a callable, a Record field or a field name) as a function; None: the record key."""
    return None if key is None else _key_function(key)[0]


def upstream_processors(point: SplitPoint) -> tuple[Processor, ...]:
    """What a task of the stage ending at ``point`` runs instead of the agent body (Faust's passive
    drainer of a ``group_by``): the operations before the split, then the send to its topic."""
    return point.processors + (_forwarder(point),)


def _forwarder(point: SplitPoint) -> Processor:
    """The processor that ends a sub-topology: send to the split topic, then drop the record."""
    topic = point.topic
    assert topic is not None
    send_raw = topic.send_raw
    if point.kind == "group_by":
        keyfn = point.key
        assert keyfn is not None
        encode = topic.encode  # the topic's key codec, its bytes (a bytearray normalised)

        async def _forward_group_by(event: Event) -> bool:
            message = event.message
            await send_raw(
                encode(keyfn(event.value), None)[0],
                message.value,
                timestamp=message.timestamp_ms / 1000.0 if message.timestamp_ms >= 0 else None,
                headers=message.headers or None,
            )
            return False

        return _forward_group_by

    async def _forward_through(event: Event) -> bool:
        kb, vb = topic.encode(event.key, event.value)
        ts = event.message.timestamp_ms
        await send_raw(kb, vb, timestamp=ts / 1000.0 if ts >= 0 else None, headers=event.message.headers or None)
        return False

    return _forward_through
