"""A stream task: one sub-topology over one partition number (Kafka Streams' StreamTask).

The task owns the buffered records of its input partitions, hands them to its agent
instances one at a time (the agent pulls; nothing is queued in between), decodes them with
the topics' codecs, and keeps the offsets that are safe to commit.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..events import Event, set_current_event
from ..exceptions import AgentError, ProducerError, StopProcessing, TopologyError, WorkerStopped
from ..streams import SplitPoint, Stream
from ..transport.base import TP, Message
from .eos import current_task
from .partition_group import PartitionGroup, RecordQueue, Wait

if TYPE_CHECKING:
    from ..testing_faults import FaultInjector
    from .eos import CommitGate, TaskTransaction
    from .errors import ErrorPolicy
    from .topology import SubTopology

log = logging.getLogger(__name__)

__all__ = ["StreamTask", "TaskId"]


class TaskId(tuple[int, int]):
    """``(sub-topology, partition)``, printed like Kafka Streams' ``0_3``."""

    def __new__(cls, subtopology: int, partition: int) -> "TaskId":
        return super().__new__(cls, (subtopology, partition))

    @property
    def subtopology(self) -> int:
        return self[0]

    @property
    def partition(self) -> int:
        return self[1]

    def __str__(self) -> str:
        return f"{self[0]}_{self[1]}"


class StreamTask:
    """Feeds one sub-topology's agent from one partition number of its source topics."""

    def __init__(
        self,
        task_id: TaskId,
        subtopology: "SubTopology",
        partitions: Iterable[TP],
        *,
        errors: "ErrorPolicy",
        max_task_idle: float,
        buffer_max_records: int,
        lagging: Callable[[RecordQueue], bool],
        on_drained: Callable[[TP], None],
    ) -> None:
        self.id = task_id
        self.subtopology = subtopology
        self.agent = subtopology.agent
        self.stage = subtopology.stage
        self.group = PartitionGroup(partitions, max_task_idle=max_task_idle, lagging=lagging)
        self.partitions = list(self.group.queues)
        self.buffer_max_records = buffer_max_records
        self._low_water = buffer_max_records // 2
        self._errors = errors
        self._on_drained = on_drained
        self._codecs = {
            t.name: (t.key_codec.loads, t.value_codec.loads) for t in subtopology.source_topic_objects
        }
        self._wakeup = asyncio.Event()
        self._closing = False
        self._instances: list[asyncio.Task[None]] = []
        self.committable: dict[TP, int] = {}
        self._ordered_acks = self.agent.concurrency == 1
        self._inflight: dict[TP, deque[int]] = {tp: deque() for tp in self.partitions}
        self._done: dict[TP, set[int]] = {tp: set() for tp in self.partitions}
        self.processed = 0
        self.failure: BaseException | None = None
        # exactly_once only (set by the worker): the task's transaction, and the gate that keeps
        # commits between records. None under at_least_once, so the hot path pays one check.
        self.gate: "CommitGate | None" = None
        self.txn: "TaskTransaction | None" = None
        self.faults: "FaultInjector | None" = None

    # -- fed by the fetcher -------------------------------------------------------------------
    def add(self, tp: TP, messages: list[Message]) -> int:
        """Buffer fetched records; returns the queue length so the fetcher can pause the partition."""
        n = self.group.add(tp, messages)
        self._wakeup.set()
        return n

    def queue(self, tp: TP) -> RecordQueue:
        return self.group.queues[tp]

    # -- StreamInput ---------------------------------------------------------------------------
    async def next_event(self, timeout: float | None = None) -> Event | None:
        """The next record (see :meth:`_next_event`); under exactly_once the instance leaves the
        commit gate while it waits and re-enters before it handles what it got."""
        gate = self.gate
        if gate is None:
            if self.faults is None:
                return await self._next_event(timeout)
            got = await self._next_event(timeout)
            self.faults.check("before_record")
            return got
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

    async def _next_event(self, timeout: float | None = None) -> Event | None:
        group = self.group
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while True:
            if self._closing:
                raise WorkerStopped(f"task {self.id} is closing")
            item = group.next()
            if item is None or type(item) is Wait:
                wait = None if item is None else float(item)
                if deadline is not None:
                    remaining = deadline - asyncio.get_running_loop().time()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._wakeup.clear()
                if wait is None:
                    await self._wakeup.wait()
                else:
                    try:
                        await asyncio.wait_for(self._wakeup.wait(), wait)
                    except asyncio.TimeoutError:
                        pass
                continue
            message: Message = item  # type: ignore[assignment]
            q = group.last
            assert q is not None
            tp = q.tp
            if q.paused and len(q.messages) <= self._low_water:
                self._on_drained(tp)
            if not self._ordered_acks:
                self._inflight[tp].append(message.offset)
            key_loads, value_loads = self._codecs[tp.topic]
            try:
                key = None if message.key is None else key_loads(message.key)
                value = None if message.value is None else value_loads(message.value)
            except Exception as exc:
                if self.gate is not None:  # a dead letter must land in the transaction of its offset
                    await self.gate.enter()
                    try:
                        await self._errors.decode_failed(self, message, exc)
                    finally:
                        self.gate.leave()
                else:
                    await self._errors.decode_failed(self, message, exc)
                self._ack(tp, message.offset)
                continue
            return Event(key, value, message, tp)

    def ack(self, event: Event) -> None:
        self._ack(event.tp, event.message.offset)

    def _ack(self, tp: TP, offset: int) -> None:
        self.processed += 1
        if self._ordered_acks:
            self.committable[tp] = offset + 1
            return
        inflight, done = self._inflight[tp], self._done[tp]
        done.add(offset)
        while inflight and inflight[0] in done:
            first = inflight.popleft()
            done.discard(first)
            self.committable[tp] = first + 1

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        splits = self.agent.splits
        if index > len(splits) or splits[index - 1].name != point.name:
            raise AgentError(
                f"agent {self.agent.name!r} called {point.kind}({point.name!r}) as its split point #{index}, "
                f"but its topology (found when the worker started) has {[s.name for s in splits]}; "
                "an agent must make the same stream operations every time it runs"
            )
        return splits[index - 1]

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        if self.gate is None and self.faults is None:
            # The common case needs no wrapper: streams call the inner pull directly.
            self.next_event = self._next_event  # type: ignore[method-assign]
        for i in range(self.agent.concurrency):
            task = asyncio.ensure_future(self._run_instance(i))
            task.add_done_callback(self._instance_done)
            self._instances.append(task)

    async def _run_instance(self, index: int) -> None:
        """Run the agent function; on an error apply the app's policy and run it again."""
        current_task.set(self)  # this asyncio task's context only: sends pick the task's producer
        if self.gate is not None:
            self.gate.enter_nowait()  # the agent runs until it first asks for a record
        stream = Stream(self)
        while not self._closing:
            try:
                await self.agent.run(stream)
                return
            except WorkerStopped:
                return
            except (asyncio.CancelledError, StopProcessing, TopologyError, ProducerError):
                raise  # a record whose output cannot be produced is never skipped: stop uncommitted
            except Exception as exc:
                event = stream.current_event
                await self._errors.agent_failed(self, event, exc)
                stream.ack_pending()
                set_current_event(None)

    def _instance_done(self, task: "asyncio.Task[None]") -> None:
        if self.gate is not None:
            self.gate.leave()
        if not task.cancelled() and task.exception() is not None and self.failure is None:
            self.failure = task.exception()
            self._errors.task_crashed(self, self.failure)  # type: ignore[arg-type]

    def running(self) -> bool:
        return any(not t.done() for t in self._instances)

    async def stop(self, timeout: float) -> None:
        """Let instances finish the record in hand (up to ``timeout``), then cancel them."""
        self._closing = True
        self._wakeup.set()
        if self._instances:
            _, pending = await asyncio.wait(self._instances, timeout=timeout)
            for t in pending:
                t.cancel()
            if pending:
                log.warning("task %s: agent %s did not finish its record within %.1fs; cancelled "
                            "(the record will be handled again)", self.id, self.agent.name, timeout)
                await asyncio.wait(pending)
        self._instances.clear()
        for q in self.group.queues.values():
            q.clear()

    def __repr__(self) -> str:
        return f"<StreamTask {self.id} agent={self.agent.name} stage={self.stage}>"
