"""Issue 45 finding 6 (unanswered ``ask_nowait`` promises): a promise has no timeout and its caller
may drop it, so the process's table of promises grew with every request never answered. At most
``MAX_UNANSWERED_PROMISES`` now wait at once: the oldest beyond fails with TimeoutError, counted;
a promise its caller cancelled is forgotten at once; answers to the others still arrive."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

import agentstream
import agentstream.agents.replies as replies_module
from agentstream.testing import AppHarness


async def test_unanswered_promises_are_bounded_and_answers_still_arrive(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(replies_module, "MAX_UNANSWERED_PROMISES", 5)
    name = f"pr-{uuid.uuid4().hex[:8]}"
    app = agentstream.App(name, broker=f"memory://{name}", store="memory://", web_enabled=False, topic_partitions=1)

    @app.agent(app.topic("requests", value_type=int))
    async def square(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            if value >= 0:  # negative requests are never answered
                yield value * value

    async with AppHarness(app):
        replies = await app.replies()
        caplog.set_level(logging.WARNING, logger="agentstream.agents.replies")
        silent: list[Any] = [await square.ask_nowait(-1, reply_to=replies.topic_name) for _ in range(8)]
        cancelled = await square.ask_nowait(-2, reply_to=replies.topic_name)
        cancelled.cancel()
        await asyncio.sleep(0)
        answered = await square.ask_nowait(7, reply_to=replies.topic_name)
        assert await asyncio.wait_for(answered, 10) == 49
        dropped = [p for p in silent if p.done()]
        assert len(dropped) == 4 and dropped == silent[:4]  # the oldest went first
        for p in dropped:
            with pytest.raises(TimeoutError, match="promise is dropped"):
                p.result()
        assert not any(p.done() for p in silent[4:])
        assert replies.promises_dropped == 4 and "ask_nowait() promises dropped" in caplog.text
        waiting = len(replies._futures)
        assert waiting <= 5, waiting  # what the table holds: the bound, not every request sent
