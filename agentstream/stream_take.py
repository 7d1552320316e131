"""``Stream.take()``, ``take_events()`` and ``enumerate()``: the stream operations that are async
generators.

They live here, not in ``streams.py``, because that module is compiled (mypyc) and mypyc does not
compile async generators; the stream's methods return these.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from .durations import to_seconds
from .events import Event


class _Pulls(Protocol):
    """What a batch needs of its stream (``streams.Stream``)."""

    _pending: list[Event]

    def ack_pending(self) -> None: ...

    async def _pull(self, timeout: float | None = None, keep_pending: bool = False) -> Event | None: ...

    def __aiter__(self) -> Any: ...


async def take(stream: _Pulls, max_: int, within: Any) -> AsyncIterator[list[Any]]:
    async for batch in take_events(stream, max_, within):
        yield [event.value for event in batch]


async def take_events(stream: _Pulls, max_: int, within: Any) -> AsyncIterator[list[Event]]:
    """Batches of up to ``max_`` events; a batch is yielded early once ``within`` passed after its
    first event. Its records stay in hand (acknowledged when the agent asks for the next batch)."""
    within = to_seconds(within)
    if max_ < 1:
        raise ValueError("take(max_): max_ must be >= 1")
    while True:
        stream.ack_pending()
        first = await stream._pull()
        assert first is not None
        stream._pending.append(first)
        batch = [first]
        deadline = time.monotonic() + within
        while len(batch) < max_:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            event = await stream._pull(remaining)
            if event is None:
                break
            stream._pending.append(event)
            batch.append(event)
        yield batch


async def enumerate_values(stream: _Pulls, start: int = 0) -> AsyncIterator[tuple[int, Any]]:
    i = start
    async for value in stream:
        yield i, value
        i += 1
