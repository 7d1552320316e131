"""The task manager: which tasks the worker runs for its assignment (Kafka Streams' TaskManager).

The worker (:mod:`agentstream.worker.worker`, the stream thread: poll loop, commits, states,
signals) is the consumer's rebalance listener and calls this at each step of a rebalance. Here an
assignment becomes tasks (one per sub-topology and partition number), each partition's records
are routed to the tasks that read it, the tasks restore and start; on revoke or stop they finish
their current record, close (their producers under exactly_once, their table partitions) and are
forgotten, their record counts kept. The commit between stopping and closing is the worker's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .actors import SharedInput
from .eos import CommitGate
from .slots import InstanceSlots
from .task import StreamTask, TaskId

if TYPE_CHECKING:
    from ..runtime import FaultPoints
    from ..settings import Settings
    from ..tables.manager import TableManager
    from ..topology import FirstInstance, Topology
    from ..transport.base import TP, Consumer
    from .assignor import PartitionNumberAssignor
    from .commit import CommitUnit
    from .eos import ExactlyOnce
    from .errors import ErrorPolicy
    from .fetcher import Fetcher
    from .partition_group import RecordQueue

__all__ = ["TaskManager"]


class TaskManager:
    """Owns the worker's active tasks: creates them from an assignment, restores and starts them,
    stops and closes them; ``tasks`` maps each task id to its task, ``retired`` keeps the records
    handled per agent by tasks already closed (a rebalance rebuilds every task)."""

    def __init__(
        self,
        topology: Topology,
        *,
        settings: Settings,
        errors: ErrorPolicy,
        consumer: Consumer,
        fetcher: Fetcher[StreamTask],
        committer: CommitUnit,
        assignor: PartitionNumberAssignor,
        tables: TableManager | None,
        eos: ExactlyOnce | None,
        faults: FaultPoints | None,
        first_instances: dict[str, FirstInstance] | None = None,
    ) -> None:
        self.topology = topology
        # each agent's first instance (started at discovery), until a task of its last stage adopts it
        self.first_instances: dict[str, FirstInstance] = {} if first_instances is None else first_instances
        self.settings = settings
        self.errors = errors
        self.consumer = consumer
        self.fetcher = fetcher
        self.committer = committer
        self.assignor = assignor
        self.tables = tables
        self.eos = eos
        self.faults = faults
        self.tasks: dict[TaskId, StreamTask] = {}
        self.retired: dict[str, int] = {}

    def processed(self) -> dict[str, int]:
        """Records handled per agent by the tasks of this worker, closed ones included."""
        totals = dict(self.retired)
        for task in list(self.tasks.values()):
            name = task.agent.name
            totals[name] = totals.get(name, 0) + task.processed
        return totals

    # -- assignment ------------------------------------------------------------------------------
    def create(self, assigned: set[TP]) -> list[StreamTask]:
        """One task per sub-topology and assigned partition number, routed from its partitions
        (created, not started: :meth:`restore_and_start` follows)."""
        tasks: dict[TaskId, StreamTask] = {}
        for st in self.topology.subtopologies:
            limit = st.agent.max_in_flight
            # Faust's concurrency=N: N instances in the worker sharing the sub-topology's tasks.
            # Under exactly_once each task's records go in its own transaction, through its own
            # commit gate, and a joining stage keeps its join state per task: there the tasks'
            # instances share N slots instead (at most N in hand).
            shared_instances = limit is not None and self.eos is None and not st.joined
            slots = None if limit is None or shared_instances else InstanceSlots(limit)
            made: list[StreamTask] = []
            by_number: dict[int, list[TP]] = {}
            for name in st.source_topics:
                for tp in assigned:
                    if tp.topic == name:
                        by_number.setdefault(tp.partition, []).append(tp)
            for number, tps in by_number.items():
                tid = TaskId(st.id, number)
                tasks[tid] = StreamTask(
                    tid,
                    st,
                    tps,
                    errors=self.errors,
                    max_task_idle=self.settings.max_task_idle,
                    buffer_max_records=self.settings.buffer_max_records,
                    lagging=self._lagging,
                    on_drained=self.fetcher.drained,
                    restart_max=self.settings.agent_restart_max,
                    restart_backoff=self.settings.agent_restart_backoff,
                    retries=self.settings.agent_retries,
                    retry_backoff=self.settings.agent_retry_backoff,
                )
                if self.eos is not None:
                    tasks[tid].gate = CommitGate()
                tasks[tid].faults = self.faults
                tasks[tid].slots = slots
                made.append(tasks[tid])
            made.sort(key=lambda t: t.id.partition)
            if shared_instances and made:
                shared = SharedInput(made)
                for task in made:
                    task.shared = shared
            if made and st.stage == st.agent.stages - 1:
                # the agent's first instance becomes this stage's first (or lead) task's instance
                made[0].first = self.first_instances.pop(st.agent.name, None)
        routes: dict[TP, list[StreamTask]] = {}
        for task in tasks.values():
            for tp in task.partitions:
                routes.setdefault(tp, []).append(task)
        self.tasks = tasks
        self.committer.committed.clear()
        self.fetcher.set_routes(routes)
        return list(tasks.values())

    def _lagging(self, q: RecordQueue) -> bool | None:
        """True: the broker has records past the buffer; None: not known (no fetch answered, or
        nothing fetched yet, so the position is unknown here)."""
        hw = self.consumer.highwater(q.tp)
        if hw is None or q.next_offset is None:
            return None
        return q.next_offset < hw

    async def restore_and_start(self, tasks: list[StreamTask]) -> None:
        """Restore the tasks' table partitions, then start the tasks (exactly_once: their producers
        first, which fences the previous owners and aborts their open transactions)."""
        for task in tasks:
            task.restoring()
        if self.eos is not None:
            await self.eos.start_tasks(tasks)
            await self._seek_to_committed(tasks)
        if self.tables is not None:
            await self.tables.on_assigned(self.assignor.assignment)
        for task in tasks:
            task.start()

    async def _seek_to_committed(self, tasks: list[StreamTask]) -> None:
        """exactly_once: start each task from the offsets its last transaction committed.

        The consumer read its positions when the assignment came, while the tasks' producers were
        starting. Kafka answers that OffsetFetch (aiokafka sends version 3, without KIP-447's
        ``require_stable``) with the offsets from *before* a transaction that has committed but
        whose markers are not written yet: this worker's own commit at the revoke, or the previous
        owner's last one. Started there, a task would handle that transaction's records again
        (counted twice). A task's InitProducerId completes only after the previous transaction of
        its id did, and only that task commits its partitions' offsets, so the offsets read now
        are final: seek there, and drop what was fetched from the stale positions.
        """
        read = [(task, tp) for task in tasks for tp in task.partitions]
        offsets = await asyncio.gather(*(self.consumer.committed(tp) for _, tp in read))
        # No await from here on, so nothing fetched from the old positions is routed after this.
        for (task, tp), offset in zip(read, offsets, strict=True):
            if offset is None:
                continue  # nothing committed: the position is auto_offset_reset's, and stays
            self.consumer.seek(tp, offset)
            queue = task.queue(tp)
            queue.clear()
            queue.next_offset = None
            self.fetcher.drained(tp)  # a queue that filled meanwhile is empty again

    # -- revoke and stop -------------------------------------------------------------------------
    async def suspend(self, tasks: list[StreamTask]) -> None:
        """Let the tasks finish their current record and stop (before their last commit); with
        Faust's ``stream_wait_empty=False`` they stop at once (the records in hand are handled again)."""
        grace = self.settings.shutdown_timeout if self.settings.extra.get("stream_wait_empty", True) else 0.0
        await asyncio.gather(*(t.stop(grace) for t in tasks))

    async def close(self, tasks: list[StreamTask]) -> None:
        """After a revoke's commit: no partition reaches the tasks, their producers close, their
        counts are kept, and their table partitions turn standby (dropping what a dirty task wrote)."""
        self.unroute()
        await self.close_producers(tasks)  # eager rebalance: the next owner (maybe us) starts a new producer
        self.retire(tasks)
        if self.tables is not None:
            await self.tables.on_revoked(dirty=any(t.dirty is not None for t in tasks))

    def fenced(self, exc: BaseException) -> None:
        """The group moved on without us (a commit raised GroupFenced): every task is dirty (it
        commits nothing more; its table partitions drop their pending writes when they close) and
        no more records reach it, so a zombie adds no sink or changelog writes while it rejoins."""
        for task in self.tasks.values():
            if task.dirty is None:
                task.dirty = exc
        self.unroute()

    def unroute(self) -> None:
        """No partition's records reach a task any more."""
        self.fetcher.set_routes({})

    async def close_producers(self, tasks: list[StreamTask]) -> None:
        """exactly_once: abort the tasks' open transactions and close their producers."""
        if self.eos is not None:
            await self.eos.close_tasks(tasks)

    def retire(self, tasks: list[StreamTask]) -> None:
        """Forget the tasks, keeping their record counts."""
        for task in tasks:
            self.retired[task.agent.name] = self.retired.get(task.agent.name, 0) + task.processed
            first = task.release_first()  # closed before it started: the next assignment's task adopts it
            if first is not None:
                self.first_instances[task.agent.name] = first
        self.tasks.clear()
