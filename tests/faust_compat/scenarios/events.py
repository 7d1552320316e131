"""Events: the message's timestamp and headers, and Event.ack/send/forward/``async with``."""

from __future__ import annotations

from typing import Any

import faust

from .. import kit
from ..registry import scenario


@scenario("event.message.timestamp is in seconds (float); event.headers is a mapping")
async def event_timestamp_and_headers() -> Any:
    app = faust.App("compat-ts", broker="kafka://localhost:9092")
    src = app.topic("compat-ts-src", value_type=str)

    @app.agent(src)
    async def show(stream: Any) -> Any:
        async for event in stream.events():
            ts = event.message.timestamp
            print("timestamp", type(ts).__name__, ts)
            print("headers", type(event.headers).__name__, sorted(dict(event.headers).items()))
            yield event.value

    kit.setup(app)
    async with show.test_context() as agent:
        await agent.put("v", timestamp=1700000000.25, headers={"h1": b"a", "h2": b"b"})
    return None


@scenario("Event.ack/send/forward and `async with event`")
async def event_ack_send_forward() -> Any:
    app = faust.App("compat-evt", broker="kafka://localhost:9092")
    src = app.topic("compat-evt-src", value_type=str)
    copies = app.topic("compat-evt-copies", value_type=str)
    forwarded = app.topic("compat-evt-forwarded", value_type=str)

    @app.agent(src)
    async def handle(stream: Any) -> Any:
        async for event in stream.events():
            async with event:
                await event.send(copies, key="c", value=event.value.upper())
                await event.forward(forwarded)
            print("acked again", event.ack())
            yield event.value

    kit.setup(app)
    async with handle.test_context() as agent:
        await agent.put("one", key="k1")
    return {"copies": kit.sent("compat-evt-copies"), "forwarded": kit.sent("compat-evt-forwarded")}
