"""A stream task: one sub-topology over one partition number (Kafka Streams' StreamTask).

The task owns the buffered records of its input partitions, hands them to its agent
instances one at a time (the agent pulls; nothing is queued in between), decodes them with
the topics' codecs, and keeps the offsets that are safe to commit.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from .. import codecs
from ..clock import Clock, clock_for
from ..events import Event, set_current_event
from ..exceptions import (
    AgentError,
    GroupFenced,
    KeyDecodeError,
    ProducerFenced,
    StopProcessing,
    StoreError,
    TopologyError,
    TransportError,
    ValueDecodeError,
    WorkerStopped,
)
from ..lifecycle import TASK_TRANSITIONS, StateMachine, TaskState
from ..models import Record
from ..runtime import current_task
from ..streams import InHand, PolledInput, SplitPoint, Stream, streams_in_hand, upstream_processors
from ..tables.partition import TableNotReady
from ..topology import late_split_message
from ..transport.base import TP, Message
from .errors import decode_error
from .partition_group import PartitionGroup, RecordQueue, Wait

if TYPE_CHECKING:
    from ..runtime import FaultPoints
    from ..sensors import SensorDelegate
    from ..topology import FirstInstance, SubTopology
    from .actors import SharedInput
    from .eos import CommitGate, TaskTransaction
    from .errors import ErrorPolicy
    from .slots import InstanceSlots

log = logging.getLogger(__name__)

__all__ = ["StreamTask", "TaskId", "FATAL_IN_AGENT"]

_RUNNING: Final = TaskState.RUNNING
MAX_RESTART_DELAY = 30.0
# A task with records buffered never suspends between them (the stream's synchronous pull), so
# while it has a backlog the commit loop, the producer's sender and aiokafka's heartbeats run only
# when its buffers run dry. Every YIELD_CHECK records the task looks at its clock and lets the loop
# run once it held it YIELD_AFTER seconds: a heavy record (a large-state update costs 30 us) cannot
# hold the loop for a whole buffer (1,000 records a partition).
YIELD_CHECK: Final = 64
YIELD_AFTER: Final = 0.005

FATAL_IN_AGENT: tuple[type[BaseException], ...] = (
    StopProcessing,
    TopologyError,
    TransportError,
    StoreError,
    TableNotReady,
)
"""Raised inside agent code, these stop the task (and the worker) instead of being handled as a
bad record: the record is fine, the runtime under it is not (a failed produce, an unreachable or
corrupt store, a table partition that is not here). Skipping would lose the record's effects."""
_NOT_HANDLED: tuple[type[BaseException], ...] = (asyncio.CancelledError, *FATAL_IN_AGENT)
_held_slots: ContextVar[list[int]] = ContextVar("agentstream_held_slots")
"""Per agent instance (its asyncio task's context): how many of the agent's shared slots it holds."""


MAX_RETRY_DELAY: Final = 60.0  # agent_retry_backoff doubles per retry, up to this


def _record_id(event: Event) -> tuple[str, int, int]:
    m = event.message
    return (m.topic, m.partition, m.offset)


class TaskId(NamedTuple):
    """``(sub-topology, partition)``, printed like Kafka Streams' ``0_3``."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self[0]}_{self[1]}"


class NextEvent(Protocol):
    def __call__(self, timeout: float | None = None) -> Coroutine[Any, Any, Event | None]: ...


class StreamTask(PolledInput):
    """Feeds one sub-topology's agent from one partition number of its source topics."""

    def __init__(
        self,
        task_id: TaskId,
        subtopology: SubTopology,
        partitions: Iterable[TP],
        *,
        errors: ErrorPolicy,
        max_task_idle: float,
        buffer_max_records: int,
        lagging: Callable[[RecordQueue], bool | None],
        on_drained: Callable[[TP], None],
        restart_max: int = 10,
        restart_backoff: float = 0.1,
        retries: int = 0,
        retry_backoff: float = 1.0,
    ) -> None:
        self.id = task_id
        self.subtopology = subtopology
        self.agent = subtopology.agent
        self.stage = subtopology.stage
        # The app's clock (real, or the harness's virtual one): idle waits and restart backoffs.
        self.clock: Clock = clock_for(self.agent.app)
        self.group = PartitionGroup(
            partitions, max_task_idle=max_task_idle, lagging=lagging, clock=self.clock.monotonic
        )
        self.partitions = list(self.group.queues)
        self.buffer_max_records = buffer_max_records
        self._low_water = buffer_max_records // 2
        self._errors = errors
        self._on_drained = on_drained
        # Codecs chosen once per input: each queue carries its topic's decoders.
        decoders = {
            t.name: (codecs.native(t.key_codec), codecs.native(t.value_codec)) for t in subtopology.source_topic_objects
        }
        for q in self.group.queues.values():
            q.decoders = decoders[q.tp.topic]
        # Faust's app.topic(allow_empty=False) on a Record-typed topic: a record without a value is a
        # value decode error there (checked only for such records: nothing on the common path)
        self._no_empty: frozenset[str] = frozenset(
            t.name
            for t in subtopology.source_topic_objects
            if t.allow_empty is False and isinstance(t.value_type, type) and issubclass(t.value_type, Record)
        )
        self._wakeup = asyncio.Event()
        self._closed = asyncio.Event()  # set by stop(): ends a restart backoff at once
        self.lifecycle: StateMachine[TaskState] = StateMachine(TaskState.CREATED, TASK_TRANSITIONS, f"task {task_id}")
        self.restart_max = restart_max
        self.restart_backoff = restart_backoff
        self._instances: list[asyncio.Task[None]] = []
        self.committable: dict[TP, int] = {}
        self._ordered_acks = self.agent.concurrency == 1
        self._inflight: dict[TP, deque[int]] = {tp: deque() for tp in self.partitions}
        self._done: dict[TP, set[int]] = {tp: set() for tp in self.partitions}
        self.processed = 0
        # each instance's streams (what it holds), read by the stream_processing_timeout watchdog
        self.hands: list[list[Stream]] = []
        # what agents iterate: the app's Stream subclass (Faust's Stream setting) or Stream
        self._stream_class: type[Stream] = self.agent.app.settings.stream_class or Stream
        # Faust's Event setting: the app's Event subclass, or None for agentstream's Event (made inline)
        self._event_class: type[Event] | None = self.agent.app.class_setting("Event")
        # Set when a commit step failed (or, exactly_once, an agent instance crashed mid-record):
        # the task commits nothing more, and its table partitions close dirty (see commit.py).
        self.dirty: BaseException | None = None
        # exactly_once only (set by the worker): the task's transaction, and the gate that keeps
        # commits between records. None under at_least_once, so the hot path pays one check.
        self.gate: CommitGate | None = None
        self.txn: TaskTransaction | None = None
        self.faults: FaultPoints | None = None
        self._wait: float | None = None  # left by _take(): how long to wait for a lagging input
        self._until_check = YIELD_CHECK  # records until the task next looks at its clock (YIELD_CHECK)
        self._yielded_at = 0.0  # clock.monotonic() when it last let the loop run
        self._yield_now = False  # poll_event found a yield due: the async pull makes it
        self._undecodable: tuple[Message, TP, Exception] | None = None  # left by _take() for the policy
        # agent_retries: records an agent raised on, handed out again (first) after the backoff,
        # and how many times the agent ran on each (by topic, partition, offset)
        self.retries = retries
        self.retry_backoff = retry_backoff
        self._redeliver: list[tuple[Message, TP]] = []
        self._attempts: dict[tuple[str, int, int], int] = {}
        # The stream's async pull (StreamInput.next_event): an attribute, not a method, so start()
        # picks it once, when it knows whether a gate or fault points are in the way, and the
        # common case awaits the inner pull directly. poll_event (the synchronous pull) checks
        # _sync_pull instead: it is a native method call in the compiled build.
        self.next_event: NextEvent = self._gated_next_event
        self._sync_pull = False
        # Faust's concurrency=N (set by the task manager): the slots this sub-topology's tasks share,
        # so at most N of the agent's instances hold a record at once in this worker. None: no cap.
        self.slots: InstanceSlots | None = None
        # Faust's concurrency=N with N instances in the worker (set by the task manager): the input
        # the agent's instances share across the sub-topology's tasks; they run in its lead task.
        self.shared: SharedInput | None = None
        # what the last next_event(timeout) that found nothing left to wait for (a lagging input's
        # wait, seconds; None: until a record comes): the shared instances wait the least of these
        self.pending_wait: float | None = None
        self._inner_next: NextEvent = self._gated_next_event
        self._slot_poll = False  # poll_event takes records under the slots (no gate, no fault points)
        # The app's sensors while one is registered (set by the worker: sense()): records then go
        # through the async pull, which calls the per-record hooks; None keeps the fast path free
        # of them. Each record handed out while sensed: id -> (event, stream, sensors, states).
        self.sensors: SensorDelegate | None = None
        self._sensed: dict[int, tuple[Event, Any, SensorDelegate, Any]] = {}
        # The agent's first instance (set by the task manager on the first task of the agent's last
        # stage): started at discovery, it ran its preamble there; this task's first instance adopts
        # it instead of running the agent function again.
        self.first: FirstInstance | None = None

    # -- fed by the fetcher -------------------------------------------------------------------
    def add(self, tp: TP, messages: list[Message]) -> int:
        """Buffer fetched records; returns the queue length so the fetcher can pause the partition."""
        n = self.group.add(tp, messages)
        self._wakeup.set()
        if self.shared is not None:
            self.shared.wakeup.set()
        return n

    def queue(self, tp: TP) -> RecordQueue:
        return self.group.queues[tp]

    # -- StreamInput ---------------------------------------------------------------------------
    async def _gated_next_event(self, timeout: float | None = None) -> Event | None:
        """``next_event`` with a gate, fault points or sensors: the next record (see
        :meth:`_next_event`, which tells sensors of it); under exactly_once the instance leaves
        the commit gate while it waits and re-enters before it handles what it got."""
        gate = self.gate
        event: Event | None
        if gate is None:
            event = await self._next_event(timeout)
            if self.faults is not None:
                self.faults.check("before_record")
        else:
            gate.leave()
            try:
                event = await self._next_event(timeout)
            except BaseException:
                gate.enter_nowait()  # leaving the agent: _instance_done does the final leave()
                raise
            await gate.enter()
            if self.faults is not None:
                self.faults.check("before_record")
        return event

    def _sensed_in(self, event: Event, sensors: SensorDelegate) -> None:
        """Faust's ``on_message_in`` then ``on_stream_event_in`` (with the agent's stream)."""
        tp, offset = event.tp, event.message.offset
        sensors.on_message_in(tp, offset, event.message)
        hand = streams_in_hand.get(None)
        stream = hand[0] if hand else None
        self._sensed[id(event)] = (event, stream, sensors, sensors.on_stream_event_in(tp, offset, stream, event))

    def _sensed_out(self, event: Event) -> None:
        """Faust's ``on_stream_event_out`` (with its state) then ``on_message_out``, at the ack."""
        got = self._sensed.pop(id(event), None)
        if got is not None:
            _, stream, sensors, states = got
            tp, offset = event.tp, event.message.offset
            sensors.on_stream_event_out(tp, offset, stream, event, states)
            sensors.on_message_out(tp, offset, event.message)

    async def _slotted_next_event(self, timeout: float | None = None) -> Event | None:
        """``next_event`` under a shared concurrency cap: asking for a record gives back the slot
        of the record this instance held; a record taken waits for a free slot before the agent
        gets it (it is not acknowledged meanwhile, so its offset is not committable)."""
        slots = self.slots
        assert slots is not None
        held = _held_slots.get(None)
        if held is not None and held[0]:
            slots.release(held[0])
            held[0] = 0
        event = await self._inner_next(timeout)
        if event is not None and held is not None:
            await slots.acquire(self)
            held[0] += 1
        return event

    def poll_event(self, done: list[Event]) -> Event | None:
        """The stream's synchronous pull (:class:`PolledInput`): :meth:`_take` when no gate or
        fault points are in the way; with them, only the acknowledgement of ``done``, so the
        stream goes to ``next_event``: the gates need the async path."""
        if self._sync_pull:
            until = self._until_check
            if until > 1:  # _yield_due()'s count, inline: most records never look at the clock
                self._until_check = until - 1
                return self._take(done)
            if not self._yield_due():
                return self._take(done)
        if done:
            if self._sensed:
                for event in done:
                    self._sensed_out(event)
            self._ack_done(done)
        if self._slot_poll and not self._yield_now and not self._yield_due():
            return self._take_with_slot()
        return None

    def _yield_due(self) -> bool:
        """Count a record taken; True (and ``_yield_now`` set) when the task has held the loop for
        YIELD_AFTER seconds, checked every YIELD_CHECK records (see YIELD_CHECK)."""
        self._until_check -= 1
        if self._until_check > 0:
            return False
        self._until_check = YIELD_CHECK
        now = self.clock.monotonic()
        if now - self._yielded_at < YIELD_AFTER:
            return False
        self._yielded_at = now
        self._yield_now = True
        return True

    def _take_with_slot(self) -> Event | None:
        """The synchronous pull under a shared concurrency cap: give back this instance's slot, and
        take a record only when a slot is free with nobody queued for one (else the async path)."""
        slots = self.slots
        held = _held_slots.get(None)
        if slots is None or held is None:
            return None
        if held[0]:
            slots.release(held[0])
            held[0] = 0
        if not slots.try_acquire():
            return None
        event = self._take()
        if event is None:
            slots.release()
            return None
        held[0] = 1
        return event

    def _ack_done(self, done: list[Event]) -> None:
        """Acknowledge the records a stream handed out last, and empty the list."""
        for event in done:
            self._ack(event.tp, event.message.offset)
        done.clear()

    def _take(self, done: list[Event] | None = None) -> Event | None:
        """Acknowledge ``done`` (the records the stream handed out last; emptied), then take the
        next record from the partition group, do its ack bookkeeping and decode it: the one
        take/decode path of :meth:`poll_event` (per record, no coroutine) and :meth:`_next_event`.
        None: nothing may go now (nothing buffered, a :class:`Wait` left in ``_wait``, or a record
        that failed to decode left in ``_undecodable`` for the error policy). One record at a
        time: depth-first."""
        if done:  # the stream's ack of its last record, in the same call (one call per record)
            if self._ordered_acks:  # _ack()'s in-order case, inline (no call per record)
                committable = self.committable
                for event in done:
                    committable[event.tp] = event.message.offset + 1
                self.processed += len(done)
                done.clear()
            else:
                self._ack_done(done)
        if self.lifecycle.state is not _RUNNING:
            return None
        group = self.group
        if self._redeliver:  # agent_retries: the record the agent raised on, again, before any other
            message, tp = self._redeliver.pop(0)
            q = group.queues[tp]
        else:
            item = group.next()
            if item is None:
                return None
            if isinstance(item, Wait):
                self._wait = item.seconds
                return None
            message = item
            taken = group.last
            assert taken is not None
            q = taken
            tp = q.tp
            if q.held_back and len(q.messages) <= self._low_water:
                self._on_drained(tp)
            if not self._ordered_acks:
                self._inflight[tp].append(message.offset)
        key_codec, value_codec = q.decoders
        raw_key, raw_value = message.key, message.value
        try:
            key = None if raw_key is None else key_codec.loads(raw_key)
        except Exception as exc:
            self._undecodable = (message, tp, decode_error(exc, KeyDecodeError))  # the async path handles it
            return None
        value: Any = None
        if raw_value is None:
            if tp.topic in self._no_empty:
                problem = ValueError("a record without a value on a Record-typed topic declared allow_empty=False")
                self._undecodable = (message, tp, decode_error(problem, ValueDecodeError))
                return None
        else:
            try:
                value = value_codec.loads(raw_value)
            except Exception as exc:
                self._undecodable = (message, tp, decode_error(exc, ValueDecodeError))
                return None
        event_class = self._event_class
        if event_class is None:
            return Event(key, value, message, tp)
        return event_class(key, value, message, tp)

    def _take_wait(self) -> float | None:
        """The wait ``_take()`` left (a lagging input), once. A call, not an inline read: after
        ``self._wait = None`` the compiler would take the attribute for None until the next store."""
        wait = self._wait
        self._wait = None
        return wait

    async def _next_event(self, timeout: float | None = None) -> Event | None:
        clock = self.clock
        deadline = None if timeout is None else clock.monotonic() + timeout
        while True:
            if self.lifecycle.state is not _RUNNING:
                raise WorkerStopped(f"task {self.id} is closing")
            if self._undecodable is not None:
                failed = self._undecodable
                self._undecodable = None
                await self._decode_failed(*failed)
                continue
            if self._yield_now or self._yield_due():
                self._yield_now = False
                await asyncio.sleep(0)
                continue  # the task may have been closed meanwhile
            self._wait = None
            event = self._take()
            if event is not None:
                sensors = self.sensors
                if sensors is not None:  # Faust's per-record hooks (sensed tasks take every record here)
                    self._sensed_in(event, sensors)
                return event
            if self._decode_pending():  # a method: mypy (so mypyc) would take the attribute as still None
                continue
            wait = self._take_wait()
            if deadline is not None:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    self.pending_wait = wait
                    return None
                wait = remaining if wait is None else min(wait, remaining)
            self._wakeup.clear()
            if wait is None:
                await self._wakeup.wait()
            else:
                try:
                    await clock.wait_for(self._wakeup.wait(), wait)
                except TimeoutError:
                    pass

    def _handled(self) -> int:
        """Records acknowledged by the task, or by every task its shared instances read."""
        shared = self.shared
        return self.processed if shared is None else shared.processed

    def _decode_pending(self) -> bool:
        """_take() left an undecodable record for the error policy."""
        return self._undecodable is not None

    async def _decode_failed(self, message: Message, tp: TP, exc: Exception) -> None:
        if self.gate is not None:  # a dead letter must land in the transaction of its offset
            await self.gate.enter()
            try:
                await self._errors.decode_failed(self, message, exc)
            finally:
                self.gate.leave()
        else:
            await self._errors.decode_failed(self, message, exc)
        self._ack(tp, message.offset)

    def ack(self, event: Event) -> None:
        if self._sensed:
            self._sensed_out(event)
        self._ack(event.tp, event.message.offset)

    def acks_out_of_order(self) -> None:
        """A stream acknowledges its records itself (``stream.noack()``), maybe out of order: track
        every record taken from now on, as for concurrent instances, so an offset is committable
        only up to the first record not acknowledged yet."""
        self._ordered_acks = False

    def _ack(self, tp: TP, offset: int) -> None:
        """The one ack bookkeeping: in order (one instance, the common case) the offset after it
        is committable at once; out of order (concurrent instances, ``noack()``) only up to the
        first record taken and not acknowledged yet."""
        self.processed += 1
        if self._ordered_acks:
            self.committable[tp] = offset + 1
            return
        inflight, done = self._inflight[tp], self._done[tp]
        if not inflight or offset < inflight[0]:
            # taken before acks went out of order (acks_out_of_order): nothing tracked is older
            if self.committable.get(tp, 0) <= offset:
                self.committable[tp] = offset + 1
            return
        done.add(offset)
        while inflight and inflight[0] in done:
            first = inflight.popleft()
            done.discard(first)
            self.committable[tp] = first + 1

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        splits = self.agent.splits
        if index > len(splits):
            # made after the topology was found (inside the loop, or later than the first
            # instance's preamble): the worker reads no such topic, so it stops, naming it
            raise TopologyError(late_split_message(self.agent, point, len(splits)))
        if splits[index - 1].name != point.name:
            raise AgentError(
                f"agent {self.agent.name!r} called {point.kind}({point.name!r}) as its split point #{index}, "
                f"but its topology (found when the worker started) has {[s.name for s in splits]}; "
                "an agent must make the same stream operations every time it runs"
            )
        return splits[index - 1]

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def state(self) -> TaskState:
        return self.lifecycle.state

    def restoring(self) -> None:
        self.lifecycle.to(TaskState.RESTORING)

    def start(self) -> None:
        if self.lifecycle.state is TaskState.CREATED:
            self.lifecycle.to(TaskState.RESTORING)
        self.lifecycle.to(TaskState.RUNNING)
        self._pick_pull()
        shared = self.shared
        if shared is not None:
            shared.wakeup.set()  # records may have come while it restored
        instances = self.agent.concurrency if shared is None or shared.lead is self else 0
        for i in range(instances):
            task = asyncio.ensure_future(self._run_instance(i))
            task.add_done_callback(self._instance_done)
            self._instances.append(task)

    def _pick_pull(self) -> None:
        """Choose how streams pull records: the common case (no gate, fault points or sensors)
        needs no wrapper, so streams call the inner pull directly (and synchronously)."""
        fast = self.gate is None and self.faults is None and self.sensors is None
        self.next_event = self._next_event if fast else self._gated_next_event
        self._sync_pull = fast
        self._slot_poll = False
        if self.slots is not None:  # every pull goes through the shared slots
            self._inner_next = self.next_event
            self.next_event = self._slotted_next_event
            self._slot_poll = self._sync_pull
            self._sync_pull = False

    def sense(self, sensors: SensorDelegate | None) -> None:
        """Sensors came (the delegate) or all went (None): pick the record path again. Records
        handed out before still get their out hooks at their ack."""
        self.sensors = sensors
        if self.lifecycle.state is _RUNNING:
            self._pick_pull()

    async def _run_instance(self, index: int) -> None:
        """One agent instance, in its own asyncio task: its context says which task it feeds and
        holds its slots, given back whichever way it ends."""
        current_task.set(self)  # this asyncio task's context only: sends pick the task's producer
        held = [0]
        _held_slots.set(held)  # this instance's slots (concurrency=N shared across partitions)
        try:
            await self._run_agent()
        finally:
            if held[0] and self.slots is not None:
                self.slots.release(held[0])
                held[0] = 0

    async def _run_agent(self) -> None:
        """Run the agent function; on an error apply the app's policy to the records in hand and
        run it again. An agent that fails with nothing in hand is restarted with exponential
        backoff (the loop keeps ticking); after ``restart_max`` such restarts in a row the error
        stops the task, and with it the worker."""
        gate = self.gate
        if gate is not None:
            gate.enter_nowait()  # the agent runs until it first asks for a record
        hand: list[Stream] = []
        streams_in_hand.set(hand)  # every stream the agent makes registers here
        self.hands.append(hand)
        shared = self.shared
        source: Any = self if shared is None else shared
        first = self.first
        self.first = None
        # the first instance's failed runs at discovery count as restarts in a row already
        restarts = 0 if first is None else first.restarts
        # A stage before the agent's last runs what the agent declared before its split point and
        # forwards to the split topic (Faust's passive drainer): the agent body runs in its last stage.
        upstream = None if self.stage >= self.agent.stages - 1 else upstream_processors(self.agent.splits[self.stage])
        while self.lifecycle.state is _RUNNING:
            hand.clear()
            handled = self._handled()
            try:
                if first is not None:
                    adopted, first = first, None
                    await self._adopt(adopted, source, hand)
                elif upstream is not None:
                    await self._stream_class(source, upstream, self.stage + 1)._pull()
                else:
                    await self.agent.run(self._stream_class(source))
                return
            except WorkerStopped:
                return
            except GroupFenced:
                if self.dirty is not None:
                    # Fenced (worker/fencing.py): the task closes at the rejoin and its records go
                    # to the partition's next owner; a send refused meanwhile ends the instance.
                    log.info("task %s: agent %s stopped by the fence", self.id, self.agent.name)
                    return
                raise
            except ProducerFenced as exc:
                # exactly_once: the task's next owner started its producer, so the group gave the
                # task away while this worker did not hear (Kafka Streams' TaskMigratedException).
                # Its open transaction is aborted: nothing of it is committed; the worker rejoins.
                if self.dirty is None:
                    self.dirty = exc
                self._errors.task_fenced(self, exc)
                return
            except _NOT_HANDLED:
                raise  # a record whose output cannot be produced or stored is never skipped: stop uncommitted
            except Exception as exc:
                restarts = await self._agent_failed(hand, exc, handled, restarts)

    async def _adopt(self, first: FirstInstance, source: Any, hand: list[Stream]) -> None:
        """Run the agent's first instance (started at discovery, waiting at its first ``__anext__``)
        as this instance: its context gets this instance's task and slots, its streams ``source``."""
        context = first.context
        context.run(current_task.set, self)
        held = _held_slots.get(None)
        if held is not None:
            context.run(_held_slots.set, held)
        await first.adopt(source, hand)

    def release_first(self) -> FirstInstance | None:
        """The first instance, when this task was closed before it adopted it (the next task may)."""
        first = self.first
        self.first = None
        return first

    async def _agent_failed(self, hand: list[Stream], exc: Exception, handled: int, restarts: int) -> int:
        held = InHand(hand)  # each record once (a tee's copies hold the same one)
        events = held.events
        if events and self.retries and held.redeliverable():
            attempts = max(self._attempts.get(_record_id(e), 1) for e in events)
            if attempts <= self.retries:
                await self._retry_later(events, exc, attempts)
                return 0
        if events:
            for event in events:
                await self._errors.agent_failed(self, event, exc, self._attempts.pop(_record_id(event), 1))
            held.release()  # exactly these: handled by the policy, so acknowledged (noack() too)
        else:
            await self._errors.agent_failed(self, None, exc)  # under 'stop' this raises StopProcessing
        set_current_event(None)
        if events or self._handled() != handled:
            return 0
        restarts += 1
        if restarts > self.restart_max:
            log.critical(
                "task %s: agent %s failed %d times in a row without handling a record; stopping "
                "(setting agent_restart_max=%d)",
                self.id,
                self.agent.name,
                restarts,
                self.restart_max,
            )
            raise exc
        delay = min(self.restart_backoff * 2 ** (restarts - 1), MAX_RESTART_DELAY)
        log.warning(
            "task %s: agent %s failed before handling a record; restart %d/%d in %.2fs",
            self.id,
            self.agent.name,
            restarts,
            self.restart_max,
            delay,
        )
        await self._pause(delay)
        return restarts

    async def _retry_later(self, events: list[Event], exc: Exception, attempts: int) -> None:
        """agent_retries: wait (the app's clock, the partition held: nothing taken or acknowledged
        past these records) and hand the same records out again, first, to the restarted agent."""
        delay = min(self.retry_backoff * 2 ** (attempts - 1), MAX_RETRY_DELAY)
        log.warning(
            "agent %s raised on record %s (task %s): %s: %s; retry %d/%d in %.2fs (setting agent_retries)",
            self.agent.name,
            ", ".join(f"{e.message.topic}[{e.message.partition}]@{e.message.offset}" for e in events),
            self.id,
            type(exc).__name__,
            exc,
            attempts,
            self.retries,
            delay,
        )
        set_current_event(None)
        self._attempts = {_record_id(e): attempts + 1 for e in events}  # only the records in retry
        await self._pause(delay)
        if self.lifecycle.state is _RUNNING:  # closed meanwhile: the records go to the next owner
            if self.shared is None:
                self._redeliver = [(e.message, e.tp) for e in events]
            else:  # each record again from its own task (the shared instances take it from there)
                for e in events:
                    owner = self.shared.owner(e.tp)
                    owner._redeliver.append((e.message, e.tp))
                self.shared.wakeup.set()

    async def _pause(self, delay: float) -> None:
        """Wait ``delay`` on the app's clock, or until the task closes; out of the commit gate meanwhile."""
        gate = self.gate
        if gate is not None:
            gate.leave()  # a commit may run while the instance waits
        try:
            try:  # not _wakeup: arriving records must not cut the wait short
                await self.clock.wait_for(self._closed.wait(), delay)
            except TimeoutError:
                pass
        except BaseException:
            if gate is not None:
                gate.enter_nowait()  # leaving the agent: _instance_done does the final leave()
            raise
        if gate is not None:
            await gate.enter()  # back in the agent: never while a commit holds the gate closed

    def _instance_done(self, task: asyncio.Task[None]) -> None:
        if self.gate is not None:
            self.gate.leave()
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        assert exc is not None
        if self.gate is not None and self.dirty is None:
            # exactly_once: the open transaction holds part of the failed record's output
            self.dirty = exc
        if self.lifecycle.state is _RUNNING:
            self._errors.task_crashed(self, exc)

    def running(self) -> bool:
        return any(not t.done() for t in self._instances)

    async def stop(self, timeout: float) -> None:
        """Let instances finish the record in hand (up to ``timeout``), then cancel them."""
        if self.lifecycle.state is not TaskState.CLOSED:
            self.lifecycle.to(TaskState.CLOSED)
        self._wakeup.set()
        self._closed.set()
        if self.shared is not None:
            self.shared.wakeup.set()
        if self.slots is not None:
            self.slots.abandon(self)  # instances waiting for a slot stop waiting
        if self._instances:
            _, pending = await asyncio.wait(self._instances, timeout=timeout)
            for t in pending:
                t.cancel()
            if pending and self.gate is not None and self.dirty is None:
                # exactly_once: the open transaction holds part of the cut record's output, and its
                # offset is not committable: the task must not commit that transaction
                self.dirty = WorkerStopped(f"task {self.id} was stopped in the middle of a record")
            if pending and timeout <= 0:  # Faust's stream_wait_empty=False: stop without waiting
                log.info(
                    "task %s: agent %s cancelled without waiting (stream_wait_empty=False)", self.id, self.agent.name
                )
            elif pending:
                log.warning(
                    "task %s: agent %s did not finish its record within %.1fs; cancelled "
                    "(the record will be handled again)",
                    self.id,
                    self.agent.name,
                    timeout,
                )
                await asyncio.wait(pending)
        self._instances.clear()
        self._sensed.clear()
        self._redeliver.clear()
        for q in self.group.queues.values():
            q.clear()

    def __repr__(self) -> str:
        return f"<StreamTask {self.id} agent={self.agent.name} stage={self.stage}>"
