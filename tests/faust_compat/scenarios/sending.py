"""Sending (issue 40 items 2, 3): headers as a dict everywhere, and Faust's arguments of
topic.send / app.send / agent.send / cast / ask_nowait (reply_to, correlation_id, timestamp,
per-send serializers, callback, force)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import faust

from .. import kit
from ..registry import scenario


@scenario("headers given as a dict to topic.send, app.send, agent.send, and forwarding event.headers")
async def headers_as_dict() -> Any:
    app = faust.App("compat-hdict", broker="kafka://localhost:9092")
    src = app.topic("compat-hdict-src", value_type=str)
    out = app.topic("compat-hdict-out", value_type=str)

    @app.agent(src)
    async def relay(stream: Any) -> Any:
        async for event in stream.events():
            await out.send(value=event.value, headers=event.headers)  # event.headers is a dict
            yield event.value

    kit.setup(app)
    await src.send(value="a", headers={"h": b"1"})
    await app.send(src, value="b", headers={"h": b"2"})
    await relay.send(value="c", headers={"h": b"3"})
    async with relay.test_context() as agent:
        await agent.put("d", headers={"x": b"4"})
    return {"src": kit.sent_headers("compat-hdict-src")[:3], "out": kit.sent_headers("compat-hdict-out")}


@scenario("agent.send/cast/topic.send take Faust's arguments: reply_to, correlation_id, serializers, callback, force")
async def send_arguments() -> Any:
    app = faust.App("compat-sendargs", broker="kafka://localhost:9092")
    src = app.topic("compat-sendargs-src", value_type=str)
    other = app.topic("compat-sendargs-other", value_type=str)

    @app.agent(src)
    async def upper(stream: Any) -> Any:
        async for value in stream:
            yield value.upper()

    @app.agent(other)
    async def collect(stream: Any) -> Any:
        async for value in stream:
            yield value

    kit.setup(app)
    delivered: list[str] = []
    await upper.send(value="a", reply_to=collect, correlation_id="c1")
    await upper.send(value="b", reply_to="compat-sendargs-replies", correlation_id="c2", force=True)
    await upper.cast("c", key="k", timestamp=1700000000.0, headers={"h": b"v"})
    await src.send(key="k", value={"n": 1}, key_serializer="raw", value_serializer="json")
    await upper.send(value="d")  # agent.send(callback=) calls it here; Faust 0.15 drops it (migration guide)
    await src.send(value="e", callback=lambda fut: delivered.append("topic"), force=True)
    await asyncio.sleep(0.05)  # callbacks run once the (stand-in) delivery completes
    return {
        "sent": kit.sent("compat-sendargs-src"),
        "headers": kit.sent_headers("compat-sendargs-src"),
        "callbacks": sorted(delivered),
    }


@scenario("headers as a dict reach the broker from topic.send, app.send and agent.send", broker=True)
async def headers_as_dict_on_the_broker() -> Any:
    name = f"compat-hdict-{kit.FRAMEWORK}"
    app = faust.App(name, broker=os.environ["COMPAT_BROKER"])
    topic = app.topic(name, value_type=str)

    @app.agent(topic)
    async def sink(stream: Any) -> None:
        async for _ in stream:
            pass

    try:
        await topic.send(key="k", value="a", headers={"h": b"1"})
        await app.send(topic, key="k", value="b", headers={"h": b"2", "s": b"x"})
        await sink.send(key="k", value="c", headers={"h": b"3"})
    finally:
        await kit.stop_clients(app)
    return await kit.read_broker_topic(name, expect=3, headers=True)
