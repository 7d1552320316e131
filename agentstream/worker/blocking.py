"""Faust's ``blocking_timeout``: a WARNING when the worker's event loop was blocked (a callback ran
without yielding) for longer than this, so a blocking call in an agent, timer or view is seen in the
log. Faust's detector (mode's, under ``--debug``) dumps the blocking stack from a signal handler;
this one measures how late a short sleep wakes up, on the loop's own time, and names how long."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("agentstream.worker")

__all__ = ["watch_blocking"]


async def watch_blocking(timeout: float) -> None:
    """Wake every ``timeout / 4`` seconds; a wake-up later than ``timeout`` past its time is a block."""
    loop = asyncio.get_running_loop()
    period = max(timeout / 4, 0.005)
    while True:
        due = loop.time() + period
        await asyncio.sleep(period)
        late = loop.time() - due
        if late >= timeout:
            log.warning(
                "the event loop was blocked for %.2fs (blocking_timeout=%.2fs): a callback ran that long "
                "without yielding (a blocking call in an agent, timer or view?)",
                late,
                timeout,
            )
