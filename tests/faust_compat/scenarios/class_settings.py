"""Issue 40, item 7: Faust's class settings honoured the way Faust honours them (Event, Schema,
Serializers, LeaderAssignor): the same subclass does the same under both. TableManager and
PartitionAssignor subclass each framework's own machinery (their methods differ), so their tests
are agentstream's (tests/unit/faust/test_faust_class_settings.py)."""

from __future__ import annotations

from typing import Any

import faust
from faust.assignor import LeaderAssignor
from faust.serializers import Registry

from .. import kit
from ..registry import scenario


class ShoutingEvent(faust.Event):
    def shouted(self) -> str:
        return str(self.value).upper()


@scenario("Event=: the events an agent gets are of the app's Event subclass")
async def event_class_setting() -> Any:
    app = faust.App("compat-evcls", broker="kafka://localhost:9092", Event=ShoutingEvent)
    src = app.topic("compat-evcls-src", value_type=str)

    @app.agent(src)
    async def shout(stream: Any) -> Any:
        async for event in stream.events():
            print(type(event).__name__, event.shouted())
            yield event.value

    kit.setup(app)
    async with shout.test_context() as agent:
        await agent.put("hello")
    return app.conf.Event is ShoutingEvent


class JsonKeys(faust.Schema):
    key_serializer = "json"  # a class attribute: the default of every topic declared without schema=


@scenario("Schema=: its class attributes are the default schema of a topic declared without one")
async def schema_class_setting() -> Any:
    app = faust.App("compat-schcls", broker="kafka://localhost:9092", Schema=JsonKeys)
    src = app.topic("compat-schcls-src", value_type=str)
    out = app.topic("compat-schcls-out")

    @app.agent(src)
    async def relay(stream: Any) -> Any:
        async for value in stream:
            await out.send(key={"id": value}, value=value)  # a dict key: the json serializer
            yield value

    kit.setup(app)
    async with relay.test_context() as agent:
        await agent.put("a")
    return {"sent": kit.sent("compat-schcls-out"), "conf": app.conf.Schema is JsonKeys}


class StampingRegistry(Registry):
    def dumps_value(self, typ: Any, value: Any, **kwargs: Any) -> Any:
        return super().dumps_value(typ, {"stamped": value}, **kwargs)


@scenario("Serializers=: the app's topics encode values through app.serializers, of that class")
async def serializers_class_setting() -> Any:
    app = faust.App("compat-sercls", broker="kafka://localhost:9092", Serializers=StampingRegistry)
    src = app.topic("compat-sercls-src", value_type=str)
    out = app.topic("compat-sercls-out")

    @app.agent(src)
    async def relay(stream: Any) -> Any:
        async for value in stream:
            await out.send(value=value * 2)
            yield value

    kit.setup(app)
    async with relay.test_context() as agent:
        await agent.put("ab")
    return {"sent": kit.sent("compat-sercls-out"), "class": type(app.serializers).__name__}


class AlwaysLeader(LeaderAssignor):
    def is_leader(self) -> bool:
        print("asked")
        return True


@scenario("LeaderAssignor=: its is_leader() answers app.is_leader()")
async def leader_assignor_class_setting() -> Any:
    app = faust.App("compat-leadcls", broker="kafka://localhost:9092", LeaderAssignor=AlwaysLeader)
    return app.is_leader()
