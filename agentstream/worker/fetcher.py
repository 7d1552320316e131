"""The fetch loop: poll the consumer for the partitions whose task buffers have room, and route
each partition's records to the tasks that read it.

Back-pressure without ``pause()``: a partition whose buffer is full is simply left out of the
next poll (``getmany(*partitions)``) until its tasks have drained half of it. aiokafka keeps at
most one prefetched response per partition meanwhile. Pausing would be worse: aiokafka drops a
paused partition's prefetched records and fetches them again after ``resume()``, which costs
the broker a second read and the worker a round trip of idle time at every toggle.

The tables' writes on their way to the changelog hold back the whole poll the same way: while
``state_room`` (the table manager's) is cleared, nothing is fetched until a commit has taken them,
so records cannot be handled faster than their changelog records are sent (at most the tasks'
buffered records are handled meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from ..transport.base import TP, Consumer, Message
from .partition_group import RecordQueue


class QueuedTask(Protocol):
    """A task as the fetcher sees it (agentstream.worker.task.StreamTask): the bounded queues it
    routes each partition's records into."""

    def add(self, tp: TP, messages: list[Message]) -> int: ...

    def queue(self, tp: TP) -> RecordQueue: ...


T = TypeVar("T", bound=QueuedTask)

log = logging.getLogger(__name__)

__all__ = ["Fetcher"]

# While some partitions are left out of the poll, poll with this timeout so a partition that
# drains meanwhile joins the next poll soon (a running getmany only waits for the ones it asked).
_PARTIAL_POLL_TIMEOUT_MS = 10
_POLL_TIMEOUT_MS = 200


class Fetcher(Generic[T]):
    def __init__(self, consumer: Consumer, *, buffer_max_records: int, max_poll_records: int) -> None:
        self.consumer = consumer
        self.buffer_max_records = buffer_max_records
        self.max_poll_records = max_poll_records
        self.routes: dict[TP, list[T]] = {}
        self.held_back: set[TP] = set()  # full buffers: left out of the poll (not consumer.pause()d)
        self._room = asyncio.Event()
        self.fetched = 0
        self.on_full: Callable[[TP], None] | None = None  # the sensors' on_topic_buffer_full, while any
        self.state_room: asyncio.Event | None = None  # the tables' writes awaiting a commit fit (set)

    def set_routes(self, routes: dict[TP, list[T]]) -> None:
        self.routes = routes
        # A rebalance builds new tasks with empty queues: only a queue still marked full stays out.
        self.held_back = {tp for tp, tasks in routes.items() if any(t.queue(tp).held_back for t in tasks)}
        self._room.set()

    async def run(self) -> None:
        consumer = self.consumer
        limit = self.buffer_max_records
        while True:
            state_room = self.state_room
            if state_room is not None and not state_room.is_set():
                await state_room.wait()  # the worker is committing: it sets it when the writes are taken
                continue
            routes = self.routes
            if self.held_back:
                wanted = [tp for tp in routes if tp not in self.held_back]
                if not wanted:  # every buffer is full: wait until a task drains one
                    self._room.clear()
                    await self._room.wait()
                    continue
                batches = await consumer.getmany(
                    *wanted, timeout_ms=_PARTIAL_POLL_TIMEOUT_MS, max_records=self.max_poll_records
                )
            else:
                batches = await consumer.getmany(timeout_ms=_POLL_TIMEOUT_MS, max_records=self.max_poll_records)
            routes = self.routes
            for tp, messages in batches.items():
                tasks = routes.get(tp)
                if not tasks:
                    continue  # revoked while the fetch was in flight: the new owner reads it again
                self.fetched += len(messages)
                full = False
                for task in tasks:
                    if task.add(tp, messages) >= limit:
                        full = True
                if full and tp not in self.held_back:
                    self.held_back.add(tp)
                    for task in tasks:
                        task.queue(tp).held_back = True
                    if self.on_full is not None:
                        self.on_full(tp)

    def drained(self, tp: TP) -> None:
        """Called by a task whose queue for ``tp`` fell to the low-water mark."""
        if tp not in self.held_back:
            return
        tasks = self.routes.get(tp, [])
        low = self.buffer_max_records // 2
        if all(len(t.queue(tp)) <= low for t in tasks):
            self.held_back.discard(tp)
            for t in tasks:
                t.queue(tp).held_back = False
            self._room.set()

    async def stop(self, task: asyncio.Task[None]) -> None:
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
