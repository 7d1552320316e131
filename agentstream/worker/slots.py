"""Faust's ``concurrency=N`` under exactly_once and in a joining stage: at most N instances of an agent handle a record at
once in a worker, across all the partitions (tasks) of the agent's sub-topology. (Otherwise N
instances share the tasks: :mod:`agentstream.worker.actors`.)

Each task of such an agent runs N instances, and every instance takes a slot here before it hands
a record to the agent function and gives it back when it asks for the next one. Slots go first come,
first served, so no partition starves. Records stay in their own task's ack tracking: an offset
becomes committable only when its record is acknowledged, whichever instance handled it.
"""

from __future__ import annotations

import asyncio
from collections import deque

from ..exceptions import WorkerStopped

__all__ = ["InstanceSlots"]


class InstanceSlots:
    """A first-come, first-served counting semaphore shared by the tasks of one sub-topology;
    waiters are tagged with their task so a stopping task can end its own waits."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"slots: limit must be >= 1, got {limit}")
        self.limit = limit
        self.held = 0
        self._waiters: deque[tuple[object, asyncio.Future[None]]] = deque()

    def try_acquire(self) -> bool:
        """Take a slot now if one is free and nobody is queued before us."""
        if self.held < self.limit and not self._waiters:
            self.held += 1
            return True
        return False

    async def acquire(self, owner: object) -> None:
        """Wait for a slot (FIFO). Raises :class:`WorkerStopped` when ``owner`` stops meanwhile."""
        if self.try_acquire():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (owner, fut)
        self._waiters.append(entry)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release()  # handed to us as we were cancelled: pass it on
            else:
                try:
                    self._waiters.remove(entry)
                except ValueError:
                    pass
            raise

    def release(self, n: int = 1) -> None:
        """Give back ``n`` slots: each goes to the first waiter, else back to the pool."""
        for _ in range(n):
            while self._waiters:
                _, fut = self._waiters.popleft()
                if not fut.done():
                    fut.set_result(None)  # the slot passes on: ``held`` is unchanged
                    break
            else:
                self.held -= 1

    def abandon(self, owner: object) -> None:
        """``owner`` (a task) is stopping: its instances waiting for a slot stop waiting."""
        keep: deque[tuple[object, asyncio.Future[None]]] = deque()
        for entry in self._waiters:
            if entry[0] is owner:
                if not entry[1].done():
                    entry[1].set_exception(WorkerStopped(f"{owner} is closing"))
            else:
                keep.append(entry)
        self._waiters = keep

    def __repr__(self) -> str:
        return f"<InstanceSlots {self.held}/{self.limit} waiting={len(self._waiters)}>"
