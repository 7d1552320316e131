"""The fetch loop: poll the consumer, route each partition's batch to the tasks that read it,
and pause a partition whose buffer is full (resumed when its tasks have drained half of it)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..transport.base import TP, Consumer

if TYPE_CHECKING:
    from .task import StreamTask

log = logging.getLogger(__name__)

__all__ = ["Fetcher"]


class Fetcher:
    def __init__(self, consumer: Consumer, *, buffer_max_records: int, max_poll_records: int) -> None:
        self.consumer = consumer
        self.buffer_max_records = buffer_max_records
        self.max_poll_records = max_poll_records
        self.routes: dict[TP, list["StreamTask"]] = {}
        self.paused: set[TP] = set()
        self.fetched = 0

    def set_routes(self, routes: dict[TP, list["StreamTask"]]) -> None:
        self.routes = routes
        stale = self.paused - set(routes)
        self.paused -= stale

    async def run(self) -> None:
        consumer = self.consumer
        limit = self.buffer_max_records
        while True:
            batches = await consumer.getmany(timeout_ms=200, max_records=self.max_poll_records)
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
                if full and tp not in self.paused:
                    self.paused.add(tp)
                    for task in tasks:
                        task.queue(tp).paused = True
                    consumer.pause(tp)

    def drained(self, tp: TP) -> None:
        """Called by a task whose queue for ``tp`` fell to the low-water mark."""
        if tp not in self.paused:
            return
        tasks = self.routes.get(tp, [])
        low = self.buffer_max_records // 2
        if all(len(t.queue(tp)) <= low for t in tasks):
            self.paused.discard(tp)
            for t in tasks:
                t.queue(tp).paused = False
            self.consumer.resume(tp)

    async def stop(self, task: "asyncio.Task[None]") -> None:
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
