"""Faust's ``stream_processing_timeout``: a record an agent has held longer than this is reported
(a WARNING naming the agent, its task and the record), once per record, so a stuck agent is seen
in the log and not only in ``/status``. Nothing is cancelled: as in Faust it is a warning.

The watchdog reads what each agent instance holds (the task's ``hands``) on the loop's own time,
not the app's clock: under the harness's virtual time a record is only stuck if real time passes."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..streams import InHand

log = logging.getLogger("agentstream.worker")

__all__ = ["FAUST_DEFAULT", "processing_timeout", "watch_processing", "LivelockWarning"]

FAUST_DEFAULT = 300.0


def processing_timeout(settings: Any) -> float:
    """The setting's value in seconds (Faust's default when not given; 0 or less: no watchdog)."""
    value = settings.extra.get("stream_processing_timeout", FAUST_DEFAULT)
    return float(value) if value is not None else FAUST_DEFAULT


def _held(task: Any) -> list[Any]:
    events: list[Any] = []
    for hand in task.hands:
        events.extend(InHand(hand).events)
    return events


async def watch_processing(tasks: Any, timeout: float) -> None:
    """Every ``timeout / 4`` seconds, warn of each record held for ``timeout`` seconds or more.
    ``tasks()``: the worker's current tasks."""
    loop = asyncio.get_running_loop()
    first_seen: dict[int, tuple[Any, float]] = {}  # id(event) -> (event, when first seen held)
    warned: set[int] = set()
    while True:
        await asyncio.sleep(max(timeout / 4, 0.01))
        now = loop.time()
        held: set[int] = set()
        for task in list(tasks()):
            for event in _held(task):
                key = id(event)
                held.add(key)
                seen = first_seen.get(key)
                if seen is None or seen[0] is not event:
                    first_seen[key] = (event, now)
                    continue
                if now - seen[1] >= timeout and key not in warned:
                    warned.add(key)
                    log.warning(
                        "agent %s (task %s) has been processing %s[%s]@%s for more than %.1fs "
                        "(stream_processing_timeout): it may be stuck",
                        task.agent.name,
                        task.id,
                        event.topic,
                        event.partition,
                        event.offset,
                        timeout,
                    )
        for key in list(first_seen):
            if key not in held:
                del first_seen[key]
                warned.discard(key)


class LivelockWarning:
    """Faust's ``broker_commit_livelock_soft_timeout`` (300 s by default, as Faust's): a WARNING when
    no offset was committed for that long while records wait (buffered, or held by an agent):
    processing is not moving. Told once per stall; a commit ends the stall."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._told_at: float | None = None  # the last_commit the warning was given for

    def check(self, tasks: Any, last_commit: float, now: float) -> bool:
        """Warn if due; True when it warned."""
        if self.timeout <= 0 or now - last_commit < self.timeout or self._told_at == last_commit:
            return False
        waiting = [t for t in tasks if t.group.buffered() or _held(t)]
        if not waiting:
            return False
        self._told_at = last_commit
        log.warning(
            "no offset committed for %.0fs while records wait in %s (broker_commit_livelock_soft_timeout=%.0fs): "
            "processing is not moving; an agent may be stuck (see stream_processing_timeout)",
            now - last_commit,
            ", ".join(f"task {t.id} (agent {t.agent.name})" for t in waiting[:5]),
            self.timeout,
        )
        return True
