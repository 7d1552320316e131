"""Explicit lifecycles: the states of a worker, a task and a table partition, and the checked
transitions between them (Kafka Streams' ``StreamThread.State`` / ``Task.State``).

Loose flags (``_closing``, ``active``, ``ready``...) let impossible combinations exist (a standby
that takes writes, a revoked task that commits); a state with a table of legal successors makes
them raise :class:`IllegalTransition` at the faulty call instead.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, TypeVar

from .exceptions import AgentStreamError

__all__ = [
    "IllegalTransition",
    "StateMachine",
    "WorkerState",
    "TaskState",
    "PartitionState",
    "WORKER_TRANSITIONS",
    "TASK_TRANSITIONS",
    "PARTITION_TRANSITIONS",
]


class IllegalTransition(AgentStreamError):
    """A lifecycle was asked to move to a state it cannot reach from where it is (a bug)."""


class WorkerState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    REBALANCING = "rebalancing"
    PENDING_SHUTDOWN = "pending_shutdown"
    DEAD = "dead"


class TaskState(enum.Enum):
    CREATED = "created"
    RESTORING = "restoring"
    RUNNING = "running"
    SUSPENDED = "suspended"
    CLOSED = "closed"


class PartitionState(enum.Enum):
    STANDBY = "standby"
    RESTORING = "restoring"
    ACTIVE = "active"
    CLOSED = "closed"


W, T, P = WorkerState, TaskState, PartitionState

WORKER_TRANSITIONS: Mapping[WorkerState, frozenset[WorkerState]] = {
    W.STARTING: frozenset({W.RUNNING, W.REBALANCING, W.PENDING_SHUTDOWN}),
    W.RUNNING: frozenset({W.REBALANCING, W.PENDING_SHUTDOWN}),
    W.REBALANCING: frozenset({W.RUNNING, W.REBALANCING, W.PENDING_SHUTDOWN}),
    W.PENDING_SHUTDOWN: frozenset({W.DEAD}),
    W.DEAD: frozenset(),
}

TASK_TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = {
    T.CREATED: frozenset({T.RESTORING, T.CLOSED}),
    T.RESTORING: frozenset({T.RUNNING, T.SUSPENDED, T.CLOSED}),
    T.RUNNING: frozenset({T.SUSPENDED, T.CLOSED}),
    T.SUSPENDED: frozenset({T.RESTORING, T.CLOSED}),
    T.CLOSED: frozenset(),
}

PARTITION_TRANSITIONS: Mapping[PartitionState, frozenset[PartitionState]] = {
    # a standby is promoted through restoring (it catches up with the changelog tail first)
    P.STANDBY: frozenset({P.RESTORING, P.STANDBY, P.CLOSED}),
    P.RESTORING: frozenset({P.ACTIVE, P.STANDBY, P.RESTORING, P.CLOSED}),
    P.ACTIVE: frozenset({P.STANDBY, P.RESTORING, P.CLOSED}),
    P.CLOSED: frozenset(),
}

S = TypeVar("S", bound=enum.Enum)


class StateMachine(Generic[S]):
    """A current state plus its transition table; :meth:`to` refuses what the table does not list."""

    __slots__ = ("state", "_table", "_what")

    def __init__(self, initial: S, table: Mapping[S, frozenset[S]], what: str) -> None:
        self.state = initial
        self._table = table
        self._what = what

    def to(self, new: S) -> S:
        """Move to ``new``; returns the previous state. Raises IllegalTransition."""
        old = self.state
        if new not in self._table[old]:
            raise IllegalTransition(f"{self._what}: cannot go from {old.value} to {new.value}")
        self.state = new
        return old

    def is_(self, *states: S) -> bool:
        return self.state in states

    def __repr__(self) -> str:
        return f"<{self._what} {self.state.value}>"
