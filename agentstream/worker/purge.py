"""Purge of consumed repartition records (Kafka Streams' ``repartition.purge.interval.ms``).

A repartition topic (``group_by``) is read only by the app's own group, so once its offsets are
committed the records below them are never read again: after a commit, at most every
``repartition_purge_interval`` seconds, DeleteRecords moves each such partition's log start to
its committed offset. The topics are created ``cleanup.policy=delete``, so the broker's retention
remains the backstop where the broker cannot purge (a warning says so once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..exceptions import AgentStreamError
from ..transport.base import TP

log = logging.getLogger("agentstream.worker")

__all__ = ["RepartitionPurge", "repartition_topics"]


class RecordDeleter(Protocol):
    async def delete_records(self, before: Mapping[TP, int]) -> None: ...


def repartition_topics(agents: Iterable[Any]) -> set[str]:
    """The app's own repartition topics: the internal topics its agents' ``group_by`` split at
    (a ``through`` topic or a user's ``group_by(topic=...)`` is the user's, never purged)."""
    return {
        point.topic.name
        for agent in agents
        for point in getattr(agent, "splits", ())
        if point.topic is not None and point.topic.internal
    }


class RepartitionPurge:
    """Called after each successful commit with the committed offsets; deletes in the background
    (one request in flight at most), so a commit never waits for it."""

    def __init__(self, transport: Any, topics: set[str], interval: float) -> None:
        deleter = getattr(transport, "delete_records", None)  # memory:// keeps no retention to spare
        self._deleter: RecordDeleter | None = transport if deleter is not None else None
        self.topics = topics
        self.interval = interval
        self.purged: dict[TP, int] = {}  # the log start each partition was last moved to
        self._last = float("-inf")
        self._task: asyncio.Task[None] | None = None
        self._warned = False

    @property
    def enabled(self) -> bool:
        return bool(self.topics) and self.interval > 0 and self._deleter is not None

    def after_commit(self, committed: Mapping[TP, int]) -> None:
        if not self.enabled or (self._task is not None and not self._task.done()):
            return
        now = asyncio.get_running_loop().time()
        if now - self._last < self.interval:
            return
        before = {tp: off for tp, off in committed.items() if tp.topic in self.topics and self.purged.get(tp) != off}
        if before:
            self._last = now
            self._task = asyncio.ensure_future(self._purge(before))

    async def _purge(self, before: dict[TP, int]) -> None:
        assert self._deleter is not None
        try:
            await self._deleter.delete_records(before)
        except AgentStreamError as exc:
            level = logging.DEBUG if self._warned else logging.WARNING
            self._warned = True
            log.log(
                level,
                "could not purge consumed records of repartition topics %s: %s; they stay until the "
                "broker's retention deletes them (cleanup.policy=delete)",
                ", ".join(sorted(self.topics)),
                exc,
            )
            return
        self.purged.update(before)
        log.debug("purged repartition records below %s", before)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
