"""Faust's ``concurrency=N``: exactly N instances (Faust's actors) of an agent body in a worker,
sharing the partitions of the agent's sub-topology.

Each instance has its own stream over one :class:`SharedInput`, which hands out the records of
every task (partition) of the sub-topology in this worker, taking turns between the tasks so no
partition starves. A record stays in its own task's bookkeeping: its task decodes it, applies the
error policy to what does not decode, and acknowledges it when the instance that handled it asks
for the next one, so an offset becomes committable only once every record before it in its
partition is finished, whichever instance had it. The instances run in the sub-topology's first
task here (its *lead*), which stops them with the others at a revoke or shutdown.

Not used under exactly_once (each task's records go in its own transaction) nor in a stage that
joins (its join state and stream time are per task): there each task runs its instances, which
share N slots (:mod:`agentstream.worker.slots`).

As in Faust, with more than one instance a partition's records may be handled out of order (two
instances can hold two records of one partition at once); with ``concurrency=1`` the one
instance takes them in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..events import Event
from ..exceptions import WorkerStopped
from ..lifecycle import TaskState
from ..runtime import current_task
from ..streams import SplitPoint
from ..transport.base import TP

__all__ = ["SharedInput"]


class SharedInput:
    """The stream input of an agent's N instances in this worker: the records of all its tasks."""

    def __init__(self, tasks: Sequence[Any]) -> None:
        if not tasks:
            raise ValueError("a shared input needs at least one task")
        self.tasks = list(tasks)
        self.lead = self.tasks[0]
        self.agent = self.lead.agent
        self.stage: int = self.lead.stage
        self._owner: dict[TP, Any] = {tp: task for task in self.tasks for tp in task.partitions}
        self._turn = 0
        self.wakeup = asyncio.Event()  # set by a task when records arrive or it closes

    @property
    def partitions(self) -> list[TP]:
        """Every partition the instances read here (Faust's ``stream.active_partitions``)."""
        return [tp for task in self.tasks for tp in task.partitions]

    @property
    def processed(self) -> int:
        return sum(task.processed for task in self.tasks)

    def owner(self, tp: TP) -> Any:
        """The task whose partition ``tp`` is (its bookkeeping holds the record)."""
        return self._owner[tp]

    async def next_event(self, timeout: float | None = None) -> Event | None:
        """The next record of any task, taking turns; waits when none has one. Raises
        :class:`WorkerStopped` once every task is closing (the instance ends)."""
        clock = self.lead.clock
        deadline = None if timeout is None else clock.monotonic() + timeout
        while True:
            running = [t for t in self.tasks if t.state is TaskState.RUNNING]
            if not running:
                raise WorkerStopped(f"the tasks of agent {self.agent.name!r} are closing")
            self.wakeup.clear()
            n = len(self.tasks)
            wait: float | None = None  # the least wait a task's lagging input asks for (None: none)
            for i in range(n):
                task = self.tasks[(self._turn + i) % n]
                if task.state is not TaskState.RUNNING:
                    continue
                event: Event | None
                try:
                    event = await task.next_event(0)  # what it has now (decode errors handled there)
                except WorkerStopped:
                    continue
                if event is not None:
                    self._turn = (self._turn + i + 1) % n
                    current_task.set(task)  # sends and table writes of this record are its task's
                    return event
                if task.pending_wait is not None:
                    wait = task.pending_wait if wait is None else min(wait, task.pending_wait)
            if deadline is not None:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return None
                wait = remaining if wait is None else min(wait, remaining)
            if wait is None:  # woken by a record, a task starting or closing, or a retry
                await self.wakeup.wait()
                continue
            try:
                await clock.wait_for(self.wakeup.wait(), wait)
            except TimeoutError:
                pass

    def ack(self, event: Event) -> None:
        """Acknowledge in the record's own task."""
        task = self._owner.get(event.tp)
        if task is not None:
            task.ack(event)

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        return self.lead.split(index, point)  # type: ignore[no-any-return]

    def acks_out_of_order(self) -> None:
        for task in self.tasks:
            task.acks_out_of_order()

    def __repr__(self) -> str:
        return f"<SharedInput agent={self.agent.name} tasks={len(self.tasks)}>"
