"""Faust's table cleanup: windows given ``expires=`` close by the wall clock.

Windows close as their partition's stream time passes (Kafka Streams), at the record that moves
it. A partition that stops receiving records keeps its stream time, so its windows would stay
open forever; Faust closes them from a timer every ``table_cleanup_interval`` seconds once the
wall clock passes ``end + expires``, calling ``on_window_close``. This loop does the same for the
table partitions active on this worker, on the app's clock (virtual in the harness).

Under exactly_once the expiry's tombstones (and what ``on_window_close`` sends) belong to the
transaction of the task that writes the table partition: the loop runs each partition's cleanup
as that task, between its records (through the task's commit gate).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..lifecycle import PartitionState
from ..runtime import current_task, runtime_for
from .task import TaskId

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger(__name__)

__all__ = ["table_cleanup_loop", "clean_tables"]


async def table_cleanup_loop(worker: Worker) -> None:
    """Every ``table_cleanup_interval`` of the app's clock: :func:`clean_tables`."""
    interval = float(worker.settings.table_cleanup_interval)
    clock = worker.clock
    while True:
        await clock.sleep(interval)
        closed = await clean_tables(worker, clock.time())
        if closed:
            log.debug("table cleanup closed %d windows", closed)


def windowed_tables(worker: Worker) -> list[Any]:
    """The app's windowed tables that close by the wall clock (their window was given expires=)."""
    out = []
    for table in worker.app.tables.values():
        state = getattr(table, "_windowed", None)
        if state is not None and state.closes_by_wall_clock:
            out.append(table)
    return out


async def clean_tables(worker: Worker, now: float) -> int:
    """Close the expired windows of every active local partition of the windowed tables."""
    closed = 0
    rt = runtime_for(worker.app)
    for table in windowed_tables(worker):
        state = table._windowed
        for partition, part in sorted(rt.table_partitions(table.name).items()):
            if part.lifecycle.state is not PartitionState.ACTIVE:
                continue
            if not table.eos:
                closed += state.cleanup(part, now)
                continue
            sub = getattr(table, "_writer_subtopology", None)
            task = None if sub is None else worker.tasks.get(TaskId(sub, partition))
            if task is None or task.gate is None:
                continue  # no task has written it since the assignment: stream time still expires it
            await task.gate.enter()
            token = current_task.set(task)
            try:
                closed += state.cleanup(part, now)
            finally:
                current_task.reset(token)
                task.gate.leave()
    return closed
