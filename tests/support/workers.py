"""A real worker under the harness, for the tests that restart or add workers on one broker."""

from __future__ import annotations

import asyncio
from typing import Any

from agentstream.testing import AppHarness


async def run_worker(app: Any) -> AppHarness:
    """A worker on the app's own broker URL (AppHarness would pick a private one), once assigned."""
    from agentstream.worker.worker import Worker

    h = AppHarness(app)
    h.worker = Worker(app)
    await h.worker.start()
    await asyncio.wait_for(h.worker.assigned.wait(), 30)
    return h
