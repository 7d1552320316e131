"""Explicit lifecycles: illegal transitions raise, and a table partition takes writes only when active."""

from __future__ import annotations

import pytest

import agentstream
from agentstream.lifecycle import (
    PARTITION_TRANSITIONS,
    TASK_TRANSITIONS,
    WORKER_TRANSITIONS,
    IllegalTransition,
    PartitionState,
    StateMachine,
    TaskState,
    WorkerState,
)
from agentstream.tables.partition import TableNotActive, TablePartition
from agentstream.tables.store import MemoryStore


def test_every_state_has_a_row_and_closed_states_are_final() -> None:
    assert set(WORKER_TRANSITIONS) == set(WorkerState)
    assert set(TASK_TRANSITIONS) == set(TaskState)
    assert set(PARTITION_TRANSITIONS) == set(PartitionState)
    assert not WORKER_TRANSITIONS[WorkerState.DEAD]
    assert not TASK_TRANSITIONS[TaskState.CLOSED]
    assert not PARTITION_TRANSITIONS[PartitionState.CLOSED]


def test_illegal_transition_raises_and_names_both_states() -> None:
    task = StateMachine(TaskState.CREATED, TASK_TRANSITIONS, "task 0_1")
    with pytest.raises(IllegalTransition, match="task 0_1: cannot go from created to running"):
        task.to(TaskState.RUNNING)  # a task runs only after its stores are restored
    task.to(TaskState.RESTORING)
    task.to(TaskState.RUNNING)
    task.to(TaskState.CLOSED)
    with pytest.raises(IllegalTransition):
        task.to(TaskState.RUNNING)  # a closed task never comes back
    worker = StateMachine(WorkerState.RUNNING, WORKER_TRANSITIONS, "worker")
    worker.to(WorkerState.PENDING_SHUTDOWN)
    with pytest.raises(IllegalTransition):
        worker.to(WorkerState.REBALANCING)  # a stopping worker does not rejoin


def test_table_partition_takes_writes_only_when_active() -> None:
    app = agentstream.App("lc", broker="memory://", topic_partitions=1)
    table = app.Table("t", default=int)
    part = TablePartition(table, 0, MemoryStore(), None, 10)
    assert part.state is PartitionState.STANDBY
    with pytest.raises(TableNotActive, match="standby"):
        part.set(b"k", 1)
    part.restoring()
    with pytest.raises(TableNotActive, match="restoring"):
        part.set(b"k", 1)
    part.activate()
    part.set(b"k", 1)
    assert part.get_bytes(b"k") == (True, 1)
    part.standby(dirty=True)  # a failed commit: the uncommitted write is dropped
    assert part.get_bytes(b"k") == (False, None)
    part.close()
    with pytest.raises(TableNotActive):
        part.set(b"k", 2)
    with pytest.raises(IllegalTransition):
        part.activate()
