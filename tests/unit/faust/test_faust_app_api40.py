"""Faust's App API of issue 40, item 12: app.Worker(), maybe_start_producer(), commit(),
consumer and web."""

from __future__ import annotations

import asyncio
from typing import Any

import agentstream
from agentstream.testing import AppHarness
from agentstream.transport.base import TP


async def test_app_level_worker_api() -> None:
    app = agentstream.App("api40", topic_partitions=1)

    @app.agent(app.topic("src", value_type=str))
    async def agent(stream: Any) -> None:
        async for _ in stream:
            pass

    assert (app.consumer, app.web) == (None, None)  # no worker runs the app
    assert await app.commit() is False
    async with AppHarness(app, commit_interval=3600.0) as h:
        assert app.consumer is h.worker.consumer
        assert app.web is h.web and app.web is not None
        producer = await app.maybe_start_producer()
        assert producer is app.producer and await app.maybe_start_producer() is producer
        await h.send("src", "a")
        for _ in range(200):  # handled (not committed: the interval is an hour)
            if h.worker.tasks and sum(t.processed for t in h.worker.tasks.values()) == 1:
                break
            await asyncio.sleep(0.01)
        assert await app.commit({TP("src", 0)}) is True
        assert await h.worker.consumer.committed(TP("src", 0)) == 1


def test_app_agents_is_a_mapping_by_name() -> None:
    app = agentstream.App("agents-map")

    @app.agent(app.topic("a"))
    async def one(stream: Any) -> None:
        async for _ in stream:
            pass

    @app.agent(app.topic("b"))
    async def two(stream: Any) -> None:
        async for _ in stream:
            pass

    assert list(app.agents) == ["one", "two"] and app.agents["two"] is two
    assert list(app.agents.values()) == [one, two] and "one" in app.agents
