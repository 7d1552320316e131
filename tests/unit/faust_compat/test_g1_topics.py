"""Faust's Topic.send_soon, Topic.derive, topic.stream() and app.stream(), as faust-streaming
behaves (checked in its venv): derive keeps the topic's types, partitions, internal flag and
config unless overridden and decorates names with prefix/suffix; app.stream takes iterables."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import agentstream
from agentstream.testing import AppHarness


class Order(agentstream.Record):
    n: int


def test_derive_keeps_the_topic_settings_unless_overridden() -> None:
    app = agentstream.App("g1-derive", broker="memory://")
    t = app.topic("orders", key_type=str, value_type=Order, partitions=4, internal=True, config={"a": "1"})
    d = t.derive(suffix="-x")
    assert d is not t and type(d) is agentstream.Topic
    assert (list(d.topics), d.key_type, d.value_type, d.partitions, d.internal, d.config) == (
        ["orders-x"],
        str,
        Order,
        4,
        True,
        {"a": "1"},
    )
    d2 = t.derive(topics=["other"], partitions=2, value_type=int)
    assert (list(d2.topics), d2.key_type, d2.value_type, d2.partitions) == (["other"], str, int, 2)
    assert list(t.derive(prefix="p-").topics) == ["p-orders"]
    with pytest.raises(ValueError):
        app.topic(pattern="^a-.*").derive(prefix="p-")


def test_derive_keeps_an_app_subclass_of_topic() -> None:
    class MyTopic(agentstream.Topic):
        pass

    app = agentstream.App("g1-derive-sub", broker="memory://")
    t = MyTopic(app, "orders", value_type=int)
    d = t.derive(suffix="-copy")
    assert type(d) is MyTopic and d.name == "orders-copy" and d.value_type is int


@pytest.mark.asyncio
async def test_send_soon_sends_in_call_order_from_plain_code() -> None:
    app = agentstream.App("g1-send-soon", broker="memory://", topic_partitions=1)
    out = app.topic("out", value_type=int)
    async with AppHarness(app) as h:
        futures = [out.send_soon(key=b"k", value=i, headers={"h": b"%d" % i}) for i in range(3)]  # no await
        metadata = await asyncio.gather(*futures)
        assert [m.offset for m in metadata] == [0, 1, 2]
        assert h.read("out") == [(b"k", 0), (b"k", 1), (b"k", 2)]
        records = app.transport.read_topic("out")  # type: ignore[attr-defined]
        assert [list(m.headers) for m in records] == [[("h", b"0")], [("h", b"1")], [("h", b"2")]]


@pytest.mark.asyncio
async def test_app_stream_over_an_iterable_with_a_processor() -> None:
    app = agentstream.App("g1-app-stream", broker="memory://")
    stream = app.stream([1, 2, 3])
    stream.add_processor(lambda v: v * 10)
    assert [v async for v in stream] == [10, 20, 30]


@pytest.mark.asyncio
async def test_app_stream_over_an_async_iterable_and_a_channel() -> None:
    app = agentstream.App("g1-app-stream-async", broker="memory://")

    async def numbers() -> AsyncIterator[int]:
        for i in range(3):
            yield i

    assert [v async for v in app.stream(numbers())] == [0, 1, 2]
    channel = app.channel()
    await channel.send(value="a")
    stream = app.stream(channel)
    assert await stream.__anext__() == "a"


@pytest.mark.asyncio
async def test_topic_stream_reads_the_topic_outside_an_agent() -> None:
    app = agentstream.App("g1-topic-stream", broker="memory://", topic_partitions=2)
    orders = app.topic("orders", value_type=Order)
    async with AppHarness(app):
        for i in range(4):
            await orders.send(key=str(i).encode(), value=Order(n=i))
        seen = []
        async for event in orders.stream().events():
            seen.append((event.key, event.value.n, event.message.topic))
            if len(seen) == 4:
                break
    assert sorted(seen) == [(str(i).encode(), i, "orders") for i in range(4)]  # raw keys: bytes
