"""Fencing itself: a worker whose group membership may have lapsed drops its unacknowledged writes.

Under at_least_once nothing on the broker stops a member the group has dropped from writing: its
offset commits are refused (the generation check), its produce requests are not. A worker cut off
from the broker keeps its unacknowledged changelog and sink records in its producer, which
delivers them when the link comes back: after the partitions' new owner restored and wrote its
own, so a table's changelog ends on the zombie's older value.

So the worker fences itself before the group can move on. The group drops a member whose
session timeout passed since the coordinator last heard from it; the worker knows the send time
of the last request the coordinator answered (``Consumer.membership_deadline``). A margin before
that deadline, if it still holds tasks, it:

1. closes its tasks dirty (they commit nothing more; their table partitions drop uncommitted
   writes and restore from the changelog when assigned again) and stops feeding them; an agent
   whose send the fence refuses ends quietly;
2. drops every record its producer has not had acknowledged, resetting the connections so the
   kernel does not deliver them later either (``Producer.fence``);
3. asks to rejoin. The producer takes sends again once the next assignment starts
   (``Worker._start_assignment``).

A worker that was only slow (an event loop blocked past the margin) pays a rejoin and a restore of
the tail since its last checkpoint; nothing is lost either way, since no offset passes a dropped write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ..exceptions import MembershipLapsed

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger(__name__)

__all__ = ["fence_margin", "lease_loop", "fence"]


def fence_margin(session_timeout: float, heartbeat_interval: float) -> float:
    """How long before the membership deadline to fence: a quarter of the session timeout, but
    never so much that the fence point comes before the next heartbeat's answer (1.5 intervals)."""
    return max(0.0, min(session_timeout / 4, session_timeout - 1.5 * heartbeat_interval))


async def lease_loop(worker: Worker) -> None:
    """Runs beside a worker in a group: fences it when its membership deadline comes near."""
    s = worker.settings
    margin = fence_margin(s.session_timeout, s.heartbeat_interval)
    tick = max(0.05, min(0.25, margin / 4))
    fenced_for: float | None = None  # the deadline already fenced for (once each)
    while True:
        await asyncio.sleep(tick)  # real time: the deadline is the broker's, not the app's clock
        consumer, manager = worker.consumer, worker.task_manager
        if consumer is None or manager is None:
            continue
        deadline = consumer.membership_deadline()
        if deadline is None or deadline == fenced_for or time.monotonic() < deadline - margin:
            continue
        if not any(t.dirty is None for t in manager.tasks.values()):
            continue  # nothing left to fence (no tasks, or already dirty)
        fenced_for = deadline
        await fence(worker, deadline)


async def fence(worker: Worker, deadline: float) -> None:
    """Drop unacknowledged writes, close the tasks dirty, and rejoin (see the module docstring)."""
    s = worker.settings
    silent = time.monotonic() - (deadline - s.session_timeout)
    exc = MembershipLapsed(
        f"the group coordinator answered nothing of this worker's for {silent:.1f}s (session_timeout="
        f"{s.session_timeout}s): the group may have given its partitions to another member"
    )
    log.warning(
        "%s; fencing this worker: its unacknowledged writes are dropped, its tasks close dirty "
        "(their records are handled again from the committed offsets) and it rejoins",
        exc,
    )
    if worker.task_manager is not None:
        worker.task_manager.fenced(exc)  # first: a send the fence refuses then ends a dirty task's agent quietly
    app = worker.app
    if app._producer_started:
        await app.producer.fence(exc)
    if worker.consumer is not None:
        worker.consumer.request_rejoin()
