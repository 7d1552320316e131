"""Faust's classes subclassed through ``agentstream.faust`` names, in the default (compiled)
build, with the overrides called by the runtime. The decode-error hooks behave as in
faust-streaming 0.11 (checked with a Faust worker): a record whose key does not decode calls
``topic.on_key_decode_error(KeyDecodeError, message)``, one whose value does not,
``on_value_decode_error(ValueDecodeError, message)``, with the record's topic, partition and
offset on ``message``; an override that returns skips the record and the stream goes on."""

from __future__ import annotations

import uuid
from typing import Any

import agentstream.faust as faust
from agentstream.compiled import BUILD
from agentstream.faust import web as faust_web
from agentstream.faust.sensors import Sensor
from agentstream.faust.worker import Worker
from agentstream.testing import AppHarness
from tests.support.waiting import until

calls: list[Any] = []


class V(faust.Record):
    n: int


class MyTopic(faust.Topic):
    async def on_key_decode_error(self, exc: Exception, message: Any) -> None:
        calls.append(("key", type(exc).__name__, message.topic, message.partition, message.offset, message.key))

    async def on_value_decode_error(self, exc: Exception, message: Any) -> None:
        calls.append(("value", type(exc).__name__, message.topic, message.offset, message.value))


class MyStream(faust.Stream):  # type: ignore[type-arg]
    async def __anext__(self) -> Any:
        value = await super().__anext__()
        calls.append(("stream", value))
        return value


class MyAgent(faust.Agent):
    async def run(self, stream: Any) -> None:
        calls.append(("agent", self.name))
        await super().run(stream)


class MyTable(faust.Table):
    def __setitem__(self, key: Any, value: Any) -> None:
        calls.append(("table", key, value))
        super().__setitem__(key, value)


class MySensor(Sensor):
    def on_messages_handled(self, counts: dict[Any, int]) -> None:
        calls.append(("sensor", sum(counts.values())))


class MyService(faust.Service):
    async def on_start(self) -> None:
        calls.append(("service",))


class MyApp(faust.App):
    def topic(self, name: str = "", *more: str, **options: Any) -> Any:
        calls.append(("app.topic", name))
        return super().topic(name, *more, **options)


async def test_decode_error_hooks_of_a_faust_topic_subclass_get_fausts_arguments() -> None:
    calls.clear()
    app = faust.App(f"g3d-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    src = MyTopic(app, topics=["src"], value_type=V, key_type=V, key_serializer="json")  # Faust's constructor
    seen: list[int] = []

    @app.agent(src)
    async def consume(stream: Any) -> None:
        async for v in stream:
            seen.append(v.n)

    async with AppHarness(app) as h:
        await src.send_raw(b"notjson", b'{"n": 1}')
        await src.send_raw(b'{"n": 0}', b"garbage")
        await src.send_raw(b'{"n": 0}', b'{"n": 7}')
        await h.wait_idle()
    assert calls == [
        ("key", "KeyDecodeError", "src", 0, 0, b"notjson"),
        ("value", "ValueDecodeError", "src", 1, b"garbage"),
    ]
    assert seen == [7]


async def test_every_faust_class_subclassed_runs_its_overrides() -> None:
    calls.clear()
    app = MyApp(
        f"g3c-{uuid.uuid4().hex[:6]}",
        broker="memory://",
        topic_partitions=1,
        Topic=MyTopic,
        Stream=MyStream,
        Agent=MyAgent,
    )
    counts = MyTable(app, "counts", default=int)
    app.tables["counts"] = counts
    app.sensors.add(MySensor())
    app.service(MyService)
    words = app.topic("words", value_type=str)
    assert type(words) is MyTopic

    @app.agent(words)
    async def count(stream: Any) -> None:
        async for word in stream:
            counts[word] += 1

    async with AppHarness(app) as h:
        await h.send("words", "a")
        await words.send_raw(None, b"\xff")  # not UTF-8: the app-wide Topic class's hook handles it
        await h.wait_idle()
        await until(lambda: ("sensor", 1) in calls or ("sensor", 2) in calls, "the sensor was told")
    assert ("app.topic", "words") in calls and ("service",) in calls and ("agent", "count") in calls
    assert ("stream", "a") in calls and ("table", "a", 1) in calls
    assert ("value", "ValueDecodeError", "words", 1, b"\xff") in calls


async def test_worker_and_view_subclasses_through_faust_names() -> None:
    class MyWorker(Worker):
        pass

    class Hello(faust_web.View):
        async def get(self, request: Any) -> Any:
            return self.json({"hello": self.app.conf.id})

    app = faust.App(f"g3v-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    app.page("/hello")(Hello)
    worker = MyWorker(app, install_signal_handlers=False)
    assert isinstance(worker, faust.Worker) and worker.app is app
    async with AppHarness(app) as h:
        import aiohttp

        async with aiohttp.ClientSession() as s, s.get(f"{h.web.url}/hello") as r:  # type: ignore[union-attr]
            assert await r.json() == {"hello": app.conf.id}
    assert BUILD in ("compiled", "pure")  # make test runs this module on both builds

    class MyGroup(faust.TopicGroup):
        pass

    group = MyGroup(app, ["a", "b"], [app.topic("a"), app.topic("b")])
    assert group.topics == ("a", "b")
