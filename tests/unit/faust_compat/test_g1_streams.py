"""Faust's Stream.add_processor, take_with_timestamp and noack_take, as faust-streaming behaves
(checked in its venv): processors (sync or async) replace each value in the order added;
take_with_timestamp puts the record's timestamp in seconds into dict values under the given
field and leaves other values alone; noack_take's records are not acknowledged by the stream."""

from __future__ import annotations

import asyncio

import pytest

import agentstream
from agentstream.testing import AppHarness
from agentstream.transport.base import TP

pytestmark = pytest.mark.asyncio


async def test_add_processor_replaces_values_in_order_sync_and_async() -> None:
    app = agentstream.App("g1-processors", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    seen: list[int] = []

    async def double(v: int) -> int:
        await asyncio.sleep(0)
        return v * 2

    @app.agent(src)
    async def agent(stream: agentstream.Stream) -> None:
        stream.add_processor(lambda v: v + 1)
        stream.add_processor(double)
        async for value in stream:
            seen.append(value)

    async with AppHarness(app) as h:
        for i in range(3):
            await src.send(key=b"k", value=i)
        await h.wait_idle()
    assert seen == [2, 4, 6]


async def test_take_with_timestamp_stamps_dict_values_in_seconds() -> None:
    app = agentstream.App("g1-take-ts", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=None)
    batches: list[list[object]] = []

    @app.agent(src)
    async def agent(stream: agentstream.Stream) -> None:
        async for batch in stream.take_with_timestamp(2, within=30, timestamp_field_name="ts"):
            batches.append(batch)

    async with AppHarness(app) as h:
        await src.send(key=b"k", value={"a": 1}, timestamp=1_700_000_000.5)
        await src.send(key=b"k", value=5, timestamp=12.25)
        await h.wait_idle()
    assert batches == [[{"a": 1, "ts": 1_700_000_000.5}, 5]]


async def test_noack_take_leaves_its_records_unacknowledged() -> None:
    app = agentstream.App("g1-noack-take", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    batches: list[list[int]] = []

    @app.agent(src)
    async def agent(stream: agentstream.Stream) -> None:
        async for batch in stream.noack_take(2, within=30):
            batches.append([event.value for event in batch])  # Faust gives the events

    async with AppHarness(app) as h:
        for i in range(4):
            await src.send(key=b"k", value=i)
        for _ in range(200):
            if len(batches) == 2:
                break
            await asyncio.sleep(0.01)
        await h.worker.commit()
        committed = await h.worker.consumer.committed(TP("src", 0))
    assert batches == [[0, 1], [2, 3]]
    assert committed in (None, 0)  # the agent moved past both batches and acknowledged nothing


async def test_stream_ack_is_awaitable_as_faust_s_coroutine() -> None:
    app = agentstream.App("g1-await-ack", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    acks: list[tuple[bool, bool]] = []

    @app.agent(src)
    async def agent(stream: agentstream.Stream) -> None:
        manual = stream.noack()
        async for event in manual.events():
            acks.append((await manual.ack(event), bool(manual.ack(event))))  # Faust: `await stream.ack(event)`

    async with AppHarness(app) as h:
        await src.send(key=b"k", value=1)
        await src.send(key=b"k", value=2)
        await h.wait_idle()  # committed: the awaited acks acknowledged both records
    assert acks == [(True, False), (True, False)]
