"""What a worker publishes about itself: one immutable snapshot, taken by :meth:`Worker.status`.

Status pages, metrics and readiness probes read this and nothing else of the worker, so the
worker's internals (the fetcher's routes, task queues, the commit unit) can change without them.
A snapshot is pulled rather than pushed through per-record sensor hooks: readers want it about
once a second, it costs nothing while nobody asks, and every number in it is taken at one moment
(lag and position of a partition agree with each other).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ..tables.query import key_count, memory_usage
from ..transport.base import TP

Worker = Any  # agentstream.worker.worker.Worker, which imports this module
__all__ = [
    "WorkerStatus",
    "AssignmentStatus",
    "TaskStatus",
    "PartitionStatus",
    "TableStatus",
    "TablePartitionStatus",
    "RestoreStatus",
    "ErrorCounts",
    "snapshot",
]

POSITION_TIMEOUT = 0.2  # seconds a snapshot waits for a consumer's fetch position (else unknown)


@dataclass(frozen=True)
class AssignmentStatus:
    generation: int
    active: tuple[int, ...]
    standby: tuple[int, ...]
    leader: bool
    owners: tuple[tuple[int, str], ...]  # partition number -> owner's advertised address, sorted


@dataclass(frozen=True)
class TaskStatus:
    id: str
    agent: str
    processed: int  # since the task was created (tasks are rebuilt at every rebalance)
    partitions: tuple[TP, ...]


@dataclass(frozen=True)
class PartitionStatus:
    """One assigned source partition: the end seen in the last fetch and how far this worker got."""

    tp: TP
    highwater: int | None
    position: int | None  # the next offset to handle
    committed: int | None  # the offset this worker last committed

    @property
    def lag(self) -> int | None:
        """Records not yet handled (None until both ends are known)."""
        return None if self.highwater is None or self.position is None else max(0, self.highwater - self.position)


@dataclass(frozen=True)
class TablePartitionStatus:
    partition: int
    state: str  # standby, restoring, active, closed
    active: bool  # the active copy (restoring or restored), else a standby
    ready: bool  # restored and serving
    changelog_offset: int | None
    keys: int | None  # unflushed writes included; RocksDB: its estimate-num-keys (never a scan); None: not counted
    # bytes the store holds in memory, by kind (RocksDB: memtables, table_readers, block_cache); () when
    # not reported (memory store) or not asked (keys=False)
    memory: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class TableStatus:
    name: str
    partitions: int
    changelog: str
    is_global: bool
    parts: tuple[TablePartitionStatus, ...]

    @property
    def serving(self) -> tuple[TablePartitionStatus, ...]:
        """The partitions this worker serves reads from (active ones; all of a global table)."""
        return tuple(p for p in self.parts if p.active or self.is_global)

    @property
    def local_keys(self) -> int:
        return sum(p.keys or 0 for p in self.serving)


@dataclass(frozen=True)
class RestoreStatus:
    restoring: bool
    restored_records: int
    parts_active: int
    parts_ready: int
    not_ready: tuple[str, ...]  # "table[partition]", sorted

    @property
    def ready_pct(self) -> float:
        return 100.0 if not self.parts_active else round(100.0 * self.parts_ready / self.parts_active, 1)


@dataclass(frozen=True)
class ErrorCounts:
    decode: int
    agent: int
    dead_lettered: int


@dataclass(frozen=True)
class WorkerStatus:
    app: str
    state: str  # the worker's lifecycle state
    started: bool
    running: bool  # the current assignment's tasks are running
    crashed: str | None
    commits: int
    seconds_since_commit: float
    assignment: AssignmentStatus
    agents: tuple[tuple[str, int], ...]  # agent -> records handled since the worker started
    tasks: tuple[TaskStatus, ...]
    partitions: tuple[PartitionStatus, ...]
    tables: tuple[TableStatus, ...]
    restore: RestoreStatus
    errors: ErrorCounts

    @property
    def ready(self) -> bool:
        """Assigned, every served table partition restored, not crashed (what ``/readyz`` asks)."""
        return self.crashed is None and self.running and not self.restore.not_ready


async def snapshot(worker: Worker, *, now: float, lag: bool = True, keys: bool = True) -> WorkerStatus:
    """The worker's status at this moment (``now``: ``time.monotonic()``); ``lag=False`` leaves
    :attr:`WorkerStatus.partitions` empty (it may wait briefly for fetch positions); ``keys=False``
    leaves each table partition's key count None and its memory figures empty (counting merges the
    unflushed writes of every partition: too dear for probes and metadata)."""
    a = worker.assignor.assignment
    tables = _tables(worker, keys)
    return WorkerStatus(
        app=worker.app.id,
        state=worker.state.value,
        started=worker.started.is_set(),
        running=worker.assigned.is_set(),
        crashed=None if worker.crashed is None else repr(worker.crashed),
        commits=worker.commits,
        seconds_since_commit=round(now - worker.last_commit, 2),
        assignment=AssignmentStatus(
            a.generation,
            tuple(a.active),
            tuple(a.standby),
            bool(worker.assignor.is_leader),
            tuple(sorted(a.owners.items())),
        ),
        agents=tuple(sorted(worker.agent_totals().items())),
        tasks=tuple(
            TaskStatus(str(t.id), t.agent.name, t.processed, tuple(t.partitions)) for t in list(worker.tasks.values())
        ),
        partitions=await _partitions(worker) if lag else (),
        tables=tables,
        restore=_restore(worker, tables),
        errors=ErrorCounts(worker.errors.decode_errors, worker.errors.agent_errors, worker.errors.dead_lettered),
    )


async def _partitions(worker: Worker) -> tuple[PartitionStatus, ...]:
    """Per assigned source partition the position is the next offset to handle: from the tasks'
    handled offsets, else the head of their buffer, else the last commit, else the consumer's
    fetch position."""
    consumer = worker.consumer
    if consumer is None:
        return ()
    routes = worker.fetcher.routes if worker.fetcher is not None else {}
    committed = worker.committed_offsets
    out: list[PartitionStatus] = []
    for tp in sorted(consumer.assignment()):
        tasks = routes.get(tp, [])
        handled = [o for o in (t.committable.get(tp) for t in tasks) if o is not None]
        pos: int | None = min(handled) if handled else None
        if pos is None:
            heads = [
                q.messages[0].offset for q in (t.group.queues.get(tp) for t in tasks) if q is not None and q.messages
            ]
            pos = min(heads) if heads else committed.get(tp)
        if pos is None:
            try:
                pos = await asyncio.wait_for(consumer.position(tp), POSITION_TIMEOUT)
            except (TimeoutError, Exception):
                pos = None
        out.append(PartitionStatus(tp, consumer.highwater(tp), pos, committed.get(tp)))
    return tuple(out)


def _tables(worker: Worker, keys: bool) -> tuple[TableStatus, ...]:
    out = []
    for name, table in sorted(worker.app.tables.items()):
        parts = tuple(
            TablePartitionStatus(
                p,
                part.state.value,
                part.active,
                part.ready,
                part.changelog_offset,
                key_count(part) if keys else None,
                memory_usage(part) if keys else (),
            )
            for p, part in sorted(table.parts.items())
        )
        out.append(TableStatus(name, table.partitions, table.changelog_topic.name, bool(table.is_global), parts))
    return tuple(out)


def _restore(worker: Worker, tables: tuple[TableStatus, ...]) -> RestoreStatus:
    manager: Any = worker.tables
    serving = [(t.name, p) for t in tables for p in t.serving]
    return RestoreStatus(
        restoring=bool(manager is not None and manager.restoring),
        restored_records=manager.restored_records if manager is not None else 0,
        parts_active=len(serving),
        parts_ready=sum(1 for _, p in serving if p.ready),
        not_ready=tuple(sorted(f"{name}[{p.partition}]" for name, p in serving if not p.ready)),
    )
