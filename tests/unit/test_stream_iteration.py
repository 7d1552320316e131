"""Iterating a stream: values, ``events()`` and ``items()`` go through one per-record path, and a
``noack()`` stream keeps its records in hand whichever way it is iterated."""

from __future__ import annotations

import uuid

import pytest

import agentstream
from agentstream.testing import AppHarness
from tests.support.waiting import until_async

pytestmark = pytest.mark.asyncio


async def test_noack_iterated_by_value_commits_only_past_acknowledged_records() -> None:
    app = agentstream.App(f"noack-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("t", value_type=int)

    @app.agent(topic)
    async def agent(stream: agentstream.Stream) -> None:
        manual = stream.noack()
        async for value in manual:  # by value: the event is the stream's current one
            if value < 3:
                assert manual.current_event is not None
                manual.ack(manual.current_event)

    async with AppHarness(app) as h:
        for i in range(6):
            await h.send("t", i)
        tp = next(iter(h._source_partitions()))

        async def committed_3() -> bool:
            return await h.worker.consumer.committed(tp) == 3

        await until_async(committed_3, "records 0..2 committed")  # however slow the machine ...
        with pytest.raises(TimeoutError):
            await h.wait_idle(timeout=1.0)  # ... records 3..5 are never acknowledged
        assert await h.worker.consumer.committed(tp) == 3


async def test_values_events_and_items_see_the_same_records() -> None:
    app = agentstream.App(f"iter-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    seen: dict[str, list[object]] = {"values": [], "events": [], "items": []}

    @app.agent(app.topic("v", key_type=str, value_type=int))
    async def by_value(stream: agentstream.Stream) -> None:
        async for value in stream:
            seen["values"].append(value)

    @app.agent(app.topic("e", key_type=str, value_type=int))
    async def by_event(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            seen["events"].append((event.key, event.value, event.offset))

    @app.agent(app.topic("i", key_type=str, value_type=int))
    async def by_item(stream: agentstream.Stream) -> None:
        async for key, value in stream.items():
            seen["items"].append((key, value))

    async with AppHarness(app) as h:
        for i in range(5):
            for t in ("v", "e", "i"):
                await h.send(t, i, key=f"k{i}")
        await h.wait_idle()
    assert seen["values"] == list(range(5))
    assert seen["events"] == [(f"k{i}", i, i) for i in range(5)]
    assert seen["items"] == [(f"k{i}", i) for i in range(5)]
