"""App- and topic-level APIs: version=, app.send, is_leader, send_soon, Topic.derive, subclassing."""

from __future__ import annotations

import asyncio
from typing import Any

import faust

from .. import kit
from ..registry import scenario


@scenario("version= makes a new, isolated app (group id and changelogs) in every topic naming mode")
async def app_version_isolates() -> Any:
    app = faust.App("compat-ver", broker="kafka://localhost:9092", version=3)
    table = app.Table("counts", default=int)
    kit.setup(app)
    return {"id": app.conf.id, "changelog": table.changelog_topic.get_topic_name()}


@scenario("app.send(channel, key=, value=) sends like topic.send")
async def app_send() -> Any:
    app = faust.App("compat-appsend", broker="kafka://localhost:9092")
    kit.setup(app)
    await app.send("compat-appsend-out", key=b"k", value=b"v1")
    topic = app.topic("compat-appsend-out2", value_type=str)
    await app.send(topic, key="k2", value="v2")
    return {"by_name": kit.sent("compat-appsend-out"), "by_topic": kit.sent("compat-appsend-out2")}


@scenario("topic.send_soon(key=, value=) sends without awaiting")
async def topic_send_soon() -> Any:
    app = faust.App("compat-soon", broker="kafka://localhost:9092")
    src = app.topic("compat-soon-src", value_type=str)
    out = app.topic("compat-soon-out", value_type=str)

    @app.agent(src)
    async def relay(stream: Any) -> Any:
        async for value in stream:
            out.send_soon(key="k", value=value + "!")
            yield value

    kit.setup(app)
    async with relay.test_context() as agent:
        await agent.put("a")
        await agent.put("b")
        for _ in range(20):
            await asyncio.sleep(0.01)
            if len(kit.sent("compat-soon-out")) >= 2:
                break
    return kit.sent("compat-soon-out")


@scenario("Topic.derive(topics=...) keeps the codecs and types, changes the name")
async def topic_derive() -> Any:
    app = faust.App("compat-derive", broker="kafka://localhost:9092")

    class Point(faust.Record):
        x: int

    base = app.topic("compat-derive-a", key_type=str, value_type=Point, partitions=3)
    derived = base.derive(topics=["compat-derive-b"])
    return {
        "name": derived.get_topic_name(),
        "value_type": derived.value_type.__name__,
        "key_type": derived.key_type.__name__,
        "partitions": derived.partitions,
    }


@scenario("Users subclass Topic, Record, Table, Stream, Agent, App, Service, Sensor, Worker, View")
async def subclass_user_classes() -> Any:
    from faust.web import View

    class LenientTopic(faust.Topic):
        async def on_key_decode_error(self, exc: Exception, message: Any) -> None:
            print("key decode error")

        async def on_value_decode_error(self, exc: Exception, message: Any) -> None:
            print("value decode error")

    made = []
    for base in (
        faust.Record,
        faust.Table,
        faust.Stream,
        faust.Agent,
        faust.App,
        faust.Service,
        faust.Sensor,
        faust.Worker,
        View,
    ):
        made.append(type(f"My{base.__name__}", (base,), {"__module__": __name__}).__name__)
    print("subclassed", sorted(made))
    app = faust.App("compat-subclass", broker="kafka://localhost:9092")
    topic = LenientTopic(app, topics=["compat-subclass-t"])
    return [type(topic).__name__, topic.get_topic_name()]
