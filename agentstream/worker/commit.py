"""The commit unit: the one place where a task's work becomes durable (Kafka Streams'
RecordCollector + ProcessorStateManager, Quix's Checkpoint).

The sequence is written once, in :meth:`CommitUnit.commit`:

0. settle           async on_window_close callbacks started by committed records finish
1. flush caches     table caches -> changelog records (sinks were sent as the agent ran)
2. deliver          at_least_once: producer flush      | exactly_once: offsets into the task's
                                                         transaction, then commit it
3. offsets          at_least_once: consumer commit     | exactly_once: (in the transaction)
4. checkpoints      delivered values -> the stores, then the checkpoint files

A failed step makes the tasks of that commit *dirty*: nothing after the step runs, and a dirty
task commits nothing ever again (not at revoke, not at stop), so no offset passes output that may
not have been delivered (exactly_once: no offset of an aborted transaction). Its table partitions
drop their cache and pending writes when they close, and restore from the changelog when they
are assigned again. One exception, because it is safe and a broker blip must not kill a worker:
under at_least_once a failed *offset* commit in the periodic commit leaves the tasks clean (steps
1-2 delivered everything; the next commit commits the same offsets or more). At revoke and stop
(``final=True``) it is a dirty close like any other failure. A commit refused because the group
moved on (:class:`GroupFenced`: this member's generation is fenced) is never retriable: the
partitions may belong to another member already, so the tasks go dirty at once (Kafka Streams'
TaskMigratedException) and the worker stops feeding them until it has rejoined.

at_least_once commits all of the worker's tasks together (one producer flush, one offset commit:
N round trips for N tasks would cost throughput for nothing, since they share the producer);
exactly_once commits each task in its own transaction, concurrently.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Protocol

from ..exceptions import CommitFailed, GroupFenced
from ..runtime import FaultPoints, TaskSender
from ..transport.base import TP, Consumer, Producer
from .eos import CommitGate, TaskTransaction


class CommittableTask(Protocol):
    """A task as the commit unit sees it (agentstream.worker.task.StreamTask): its committable
    offsets, transaction, commit gate, and whether a failed step left it dirty."""

    dirty: BaseException | None
    committable: dict[TP, int]

    @property
    def id(self) -> Hashable: ...

    @property
    def txn(self) -> TaskTransaction | None: ...

    @property
    def gate(self) -> CommitGate | None: ...


class CommitTables(Protocol):
    """The table steps of a commit, as the commit unit sees them
    (agentstream.tables.manager.TableManager). ``writer``: the task whose partitions a step
    covers (exactly_once), or None for every partition (at_least_once)."""

    async def settle_callbacks(self) -> None: ...

    def dirty(self, writer: Hashable | None = None) -> bool: ...

    async def flush(self, writer: Hashable | None = None, producer: TaskSender | None = None) -> None: ...

    def checkpoint(self, writer: Hashable | None = None) -> None: ...

    def discard(self, writer: Hashable | None) -> None: ...


log = logging.getLogger("agentstream.commit")

__all__ = ["CommitUnit", "AtLeastOnceCommit", "ExactlyOnceCommit", "CommittableTask", "CommitTables"]


class CommitUnit(ABC):
    """The commit sequence; subclasses supply how a batch of tasks is delivered and committed."""

    def __init__(self, *, tables: Callable[[], CommitTables | None], faults: FaultPoints | None) -> None:
        self._tables = tables  # the worker's TableManager (or None), looked up at each commit
        self.faults = faults
        self.committed: dict[TP, int] = {}  # last offsets committed per partition (no re-commits)

    # -- the sequence (once) -------------------------------------------------------------------
    async def commit(self, tasks: Sequence[CommittableTask], *, final: bool = False) -> bool:
        """Commit every clean task; True when something was committed. Raises the first failure
        after every batch ran (the failed batches' tasks are dirty)."""
        clean = [t for t in tasks if t.dirty is None]
        batches = self.batches(clean)
        if len(batches) == 1:
            return await self._commit_batch(batches[0], final)
        results = await asyncio.gather(*(self._commit_batch(b, final) for b in batches), return_exceptions=True)
        failed = next((r for r in results if isinstance(r, BaseException) and not isinstance(r, Exception)), None)
        failed = failed or next((r for r in results if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
        return any(r is True for r in results)

    async def _commit_batch(self, tasks: list[CommittableTask], final: bool) -> bool:
        tables = self._tables()
        async with AsyncExitStack() as stack:
            await self.hold(tasks, stack)
            if tables is not None:
                await tables.settle_callbacks()  # async on_window_close: part of this commit
            # A task may have gone dirty while we waited (exactly_once: an agent instance failed
            # mid-record, which is what let its gate close): its open transaction holds half a
            # record whose offset is not committable, so it must not commit now.
            tasks = [t for t in tasks if t.dirty is None]
            if not tasks:
                return False
            offsets = self.offsets(tasks)
            if not offsets and not self.has_writes(tasks, tables):
                return False
            step = "flush caches"
            try:
                if tables is not None:
                    await self.flush_caches(tasks, tables)
                step = "deliver"
                await self.deliver(tasks, offsets)
                if self.faults is not None:
                    self.faults.check("after_produce_before_commit")
                step = "offsets"
                await self.commit_offsets(offsets)
            except CommitFailed as exc:
                fenced = isinstance(exc, GroupFenced)
                if step == "offsets" and not final and self.offsets_retriable and not fenced:
                    raise  # everything is delivered: the next commit covers these offsets
                self._dirty(tasks, tables, step, exc)
                raise
            except BaseException as exc:
                self._dirty(tasks, tables, step, exc)
                raise
            self.committed.update(offsets)
            if self.faults is not None:
                self.faults.check("after_commit_before_checkpoint")
            if tables is not None:
                self.checkpoint(tasks, tables)
            log.debug("committed %s", offsets)
            return True

    def _dirty(self, tasks: list[CommittableTask], tables: CommitTables | None, step: str, exc: BaseException) -> None:
        for task in tasks:
            if task.dirty is None:
                task.dirty = exc
        if isinstance(exc, Exception):
            log.error(
                "commit of task(s) %s failed at step %r: %s; they commit nothing more (their records since "
                "the last commit are handled again from the committed offsets)",
                ", ".join(str(t.id) for t in tasks),
                step,
                exc,
            )
        self.discard(tasks, tables)

    # -- the steps -----------------------------------------------------------------------------
    offsets_retriable = False

    def batches(self, tasks: list[CommittableTask]) -> list[list[CommittableTask]]:
        return [tasks]

    async def hold(self, tasks: list[CommittableTask], stack: AsyncExitStack) -> None:
        """Keep records from being cut in half by the commit (exactly_once; at least once holds nothing)."""
        return None

    @abstractmethod
    def offsets(self, tasks: list[CommittableTask]) -> dict[TP, int]: ...

    def has_writes(self, tasks: list[CommittableTask], tables: CommitTables | None) -> bool:
        return tables is not None and tables.dirty()

    @abstractmethod
    async def flush_caches(self, tasks: list[CommittableTask], tables: CommitTables) -> None: ...

    @abstractmethod
    async def deliver(self, tasks: list[CommittableTask], offsets: dict[TP, int]) -> None: ...

    @abstractmethod
    async def commit_offsets(self, offsets: dict[TP, int]) -> None: ...

    @abstractmethod
    def checkpoint(self, tasks: list[CommittableTask], tables: CommitTables) -> None: ...

    @abstractmethod
    def discard(self, tasks: list[CommittableTask], tables: CommitTables | None) -> None:
        """A failed step: drop what may not have reached the changelog."""


class AtLeastOnceCommit(CommitUnit):
    """One shared producer: flush it, then commit the offsets of every task in one request."""

    offsets_retriable = True

    def __init__(
        self,
        *,
        tables: Callable[[], CommitTables | None],
        faults: FaultPoints | None,
        producer: Callable[[], Producer],
        consumer: Callable[[], Consumer | None],
        routes: Callable[[], Mapping[TP, Sequence[CommittableTask]]],
    ) -> None:
        super().__init__(tables=tables, faults=faults)
        self._producer = producer
        self._consumer = consumer
        self._routes = routes

    def offsets(self, tasks: list[CommittableTask]) -> dict[TP, int]:
        """Per partition, the lowest offset any task reading it has not fully handled; a partition
        read by a dirty task (or one without an offset yet) is not committed at all."""
        offsets: dict[TP, int] = {}
        blocked: set[TP] = set()
        clean = set(map(id, tasks))
        routes = self._routes()
        for tp, readers in routes.items():
            for task in readers:
                off = task.committable.get(tp)
                if off is None or id(task) not in clean:
                    blocked.add(tp)
                elif tp not in offsets or off < offsets[tp]:
                    offsets[tp] = off
        if not routes:  # revoke/stop: routes are gone, the tasks still know their offsets
            for task in tasks:
                for tp, off in task.committable.items():
                    if tp not in offsets or off < offsets[tp]:
                        offsets[tp] = off
        committed = self.committed
        return {tp: off for tp, off in offsets.items() if tp not in blocked and committed.get(tp) != off}

    async def flush_caches(self, tasks: list[CommittableTask], tables: CommitTables) -> None:
        await tables.flush()

    async def deliver(self, tasks: list[CommittableTask], offsets: dict[TP, int]) -> None:
        await self._producer().flush()

    async def commit_offsets(self, offsets: dict[TP, int]) -> None:
        consumer = self._consumer()
        if offsets and consumer is not None:
            await consumer.commit(offsets)

    def checkpoint(self, tasks: list[CommittableTask], tables: CommitTables) -> None:
        tables.checkpoint()

    def discard(self, tasks: list[CommittableTask], tables: CommitTables | None) -> None:
        # The shared producer carried every partition's changelog: none of them is known delivered.
        if tables is not None:
            tables.discard(writer=None)


class ExactlyOnceCommit(CommitUnit):
    """One transaction per task: changelogs, sinks and offsets commit or abort together."""

    def batches(self, tasks: list[CommittableTask]) -> list[list[CommittableTask]]:
        return [[t] for t in tasks if t.txn is not None]

    async def hold(self, tasks: list[CommittableTask], stack: AsyncExitStack) -> None:
        for task in tasks:
            assert task.gate is not None
            await stack.enter_async_context(task.gate.closed())

    def offsets(self, tasks: list[CommittableTask]) -> dict[TP, int]:
        committed = self.committed
        return {tp: off for t in tasks for tp, off in t.committable.items() if committed.get(tp) != off}

    def has_writes(self, tasks: list[CommittableTask], tables: CommitTables | None) -> bool:
        return any(t.txn is not None and t.txn.in_transaction for t in tasks) or (
            tables is not None and any(tables.dirty(writer=t.id) for t in tasks)
        )

    async def flush_caches(self, tasks: list[CommittableTask], tables: CommitTables) -> None:
        for task in tasks:
            await tables.flush(writer=task.id, producer=task.txn)

    async def deliver(self, tasks: list[CommittableTask], offsets: dict[TP, int]) -> None:
        (task,) = tasks
        assert task.txn is not None
        await task.txn.commit(offsets)

    async def commit_offsets(self, offsets: dict[TP, int]) -> None:
        """Already in the committed transaction."""

    def checkpoint(self, tasks: list[CommittableTask], tables: CommitTables) -> None:
        for task in tasks:
            tables.checkpoint(writer=task.id)  # the stores get committed values only

    def discard(self, tasks: list[CommittableTask], tables: CommitTables | None) -> None:
        for task in tasks:
            if tables is not None:
                tables.discard(writer=task.id)
        # The open transaction is aborted when the task closes (TaskTransaction.abort).
