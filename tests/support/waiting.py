"""Waiting in async tests for a condition another task makes true, with a bound."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def until(pred: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``pred`` every 2 ms; fail naming ``what`` if it is not true within ``timeout`` seconds
    (a bound on failure, not on speed: generous for a loaded CI machine)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        assert loop.time() < deadline, f"timed out waiting for: {what}"
        await asyncio.sleep(0.002)


async def until_async(pred: Callable[[], Awaitable[bool]], what: str, timeout: float = 30.0) -> None:
    """:func:`until` for a condition that must be awaited (a consumer's committed offset), every 10 ms."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await pred():
        assert loop.time() < deadline, f"timed out waiting for: {what}"
        await asyncio.sleep(0.01)
