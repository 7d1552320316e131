"""Streams: app.stream(), topic.stream(), add_processor, take_with_timestamp, noack_take."""

from __future__ import annotations

from typing import Any

import faust

from .. import kit
from ..registry import scenario


@scenario("app.stream(iterable) with Stream.add_processor")
async def app_stream_with_processor() -> Any:
    app = faust.App("compat-appstream", broker="kafka://localhost:9092")
    kit.setup(app)
    stream = app.stream([1, 2, 3])
    stream.add_processor(lambda v: v * 10)
    got = []
    async for value in stream:
        got.append(value)
        if len(got) == 3:
            break
    return got


@scenario("topic.stream() gives a Stream over the topic")
async def topic_stream() -> Any:
    app = faust.App("compat-topicstream", broker="kafka://localhost:9092")
    topic = app.topic("compat-topicstream-src", value_type=int)
    kit.setup(app)
    stream = topic.stream()
    return {"is_stream": isinstance(stream, faust.Stream), "channel": stream.channel.get_topic_name()}


@scenario("Stream.take_with_timestamp(max_, within, field) fills the field with the record's timestamp")
async def stream_take_with_timestamp() -> Any:
    app = faust.App("compat-twt", broker="kafka://localhost:9092")
    src = app.topic("compat-twt-src", value_serializer="json")  # Faust fills the field of dict values

    @app.agent(src)
    async def batches(stream: Any) -> None:
        async for batch in stream.take_with_timestamp(2, within=5, timestamp_field_name="ts"):
            print("batch", [sorted(r.items()) for r in batch])

    kit.setup(app)
    async with batches.test_context() as agent:
        for i, ts in ((1, 1700000001.5), (2, 1700000002.5)):
            await agent.put({"value": i}, timestamp=ts)
    return None


@scenario("Stream.noack_take(max_, within) batches events the agent acknowledges itself")
async def stream_noack_take() -> Any:
    app = faust.App("compat-noack", broker="kafka://localhost:9092")
    src = app.topic("compat-noack-src", value_type=int)

    @app.agent(src)
    async def batches(stream: Any) -> None:
        async for batch in stream.noack_take(3, within=5):
            # Faust yields the events themselves, for the agent to acknowledge
            print("batch", [(type(e).__name__, e.value) for e in batch])
            print("acked", [e.ack() for e in batch])

    kit.setup(app)
    async with batches.test_context() as agent:
        for i in range(3):
            await agent.put(i)
    return None
