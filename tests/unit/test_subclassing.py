"""Public classes stay open to subclasses in the default build: the compiled ones (Topic, Table,
the codecs) are compiled with ``allow_interpreted_subclasses``, the table kinds are plain Python
subclasses of the compiled Table. Each test overrides a method the runtime calls itself (from
compiled code where the class is compiled) and checks that the override ran."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import agentstream
import agentstream.web
from agentstream.compiled import BUILD
from agentstream.exceptions import ConfigError
from agentstream.testing import AppHarness
from agentstream.topics import Topic
from tests.support.waiting import until


def _app(**settings: Any) -> agentstream.App:
    return agentstream.App(f"subclass-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, **settings)


async def test_a_topic_subclass_encodes_what_an_agent_sends() -> None:
    """``Topic.send`` (compiled) encodes through ``self.encode``: a subclass's override runs."""

    class Stamped(Topic):
        encoded = 0

        def encode(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
            type(self).encoded += 1
            kb, vb = super().encode(key, value)
            return kb, None if vb is None else b"stamped:" + vb

    app = _app()
    words = app.topic("words", value_type=str)
    out = Stamped(app, "out", value_serializer="raw")
    app.topics[out.name] = out  # declared: created at start-up

    @app.agent(words)
    async def forward(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            await out.send(value=word)

    async with AppHarness(app) as h:
        await h.send("words", "hi")
        await h.wait_idle()
        assert [v for _, v in h.read("out")] == [b"stamped:hi"]  # raw: the str's UTF-8
    assert Stamped.encoded == 1


async def test_table_kinds_and_a_table_subclass_take_writes_through_their_overrides() -> None:
    """A Table subclass's ``__setitem__`` sees every write an agent makes, and the kinds Faust
    has (GlobalTable, SetTable, SetGlobalTable) are subclasses of Table and of each other."""

    class Audited(agentstream.Table):
        writes: list[Any] = []

        def __setitem__(self, key: Any, value: Any) -> None:
            type(self).writes.append((key, value))
            super().__setitem__(key, value)

    app = _app()
    counts = Audited(app, "counts", default=int)
    app.tables["counts"] = counts
    tags = app.SetTable("tags")
    words = app.topic("words", value_type=str)

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            counts[word] += 1
            tags[word].add(len(word))

    async with AppHarness(app) as h:
        for word in ["a", "bb", "a"]:
            await h.send("words", word, key=word)
        await h.wait_idle()
        assert h.table("counts") == {"a": 2, "bb": 1}
        assert h.table("tags") == {"a": {1}, "bb": {2}}
    assert Audited.writes == [("a", 1), ("bb", 1), ("a", 2)]
    both = app.SetGlobalTable("both")
    assert isinstance(both, agentstream.SetTable) and isinstance(both, agentstream.GlobalTable)
    assert both.is_global and not tags.is_global and app.GlobalTable("g").is_global


def test_the_default_build_is_what_these_tests_ran() -> None:
    """``make test`` runs these on the compiled build (``make unit-pure`` on the pure one)."""
    assert BUILD in ("compiled", "pure")


async def test_a_stream_subclass_given_as_faust_stream_setting_is_what_agents_iterate() -> None:
    """``App(..., Stream=MyStream)`` (Faust's class setting): the task hands the agent a MyStream,
    and the compiled stream calls back into its ``__anext__`` override for every record."""

    class Counting(agentstream.Stream):
        taken = 0

        async def __anext__(self) -> Any:
            value = await super().__anext__()
            type(self).taken += 1
            return value

    app = _app(Stream=Counting)
    words = app.topic("words", value_type=str)
    seen: list[tuple[str, Any]] = []

    @app.agent(words)
    async def collect(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            seen.append((type(stream).__name__, word))

    async with AppHarness(app) as h:
        for word in ["a", "b"]:
            await h.send("words", word)
        await h.wait_idle()
    assert seen == [("Counting", "a"), ("Counting", "b")] and Counting.taken == 2


def test_a_class_setting_that_is_not_a_subclass_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match="^setting .Stream.: must be a subclass of agentstream.Stream"):
        _app(Stream=dict)
    with pytest.raises(ConfigError, match="^setting .Agent.: must be a subclass of agentstream.Agent"):
        _app(Agent="myapp.MyAgent")


async def test_an_agent_subclass_given_as_faust_agent_setting_runs_each_instance() -> None:
    class Tracing(agentstream.Agent):
        runs = 0

        async def run(self, stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
            type(self).runs += 1
            await super().run(stream)

    app = _app(Agent=Tracing)
    words = app.topic("words", value_type=str)
    seen: list[str] = []

    @app.agent(words)
    async def collect(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            seen.append(word)

    assert isinstance(collect, Tracing)
    async with AppHarness(app) as h:
        await h.send("words", "a")
        await h.wait_idle()
    assert seen == ["a"] and Tracing.runs == 1


async def test_app_service_sensor_and_record_subclasses_get_their_hooks_called() -> None:
    class Named(agentstream.App):
        declared: list[str] = []

        def topic(self, name: str = "", *more: str, **options: Any) -> Topic:
            type(self).declared.append(name)
            return super().topic(name, *more, **options)

    class Ticker(agentstream.Service):
        started = 0

        async def on_start(self) -> None:
            type(self).started += 1

    class Counter(agentstream.Sensor):
        handled: dict[Any, int] = {}

        def on_messages_handled(self, counts: dict[Any, int]) -> None:
            for tp, n in counts.items():
                type(self).handled[tp.topic] = type(self).handled.get(tp.topic, 0) + n

    class Order(agentstream.Record):
        id: str
        amount: float

        def __post_init__(self) -> None:
            self.amount = round(self.amount, 2)

    app = Named(f"subclass-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    app.service(Ticker)
    app.sensors.add(Counter())
    orders = app.topic("orders", value_type=Order)
    totals = app.Table("totals", default=float)  # declares its changelog through app.topic

    @app.agent(orders)
    async def add(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for order in stream:
            totals[order.id] += order.amount

    async with AppHarness(app) as h:
        await h.send("orders", {"id": "o1", "amount": 1.005001}, key="o1")
        await h.wait_idle()
        await until(lambda: Counter.handled.get("orders") == 1, "the sensor told of the record")
        assert h.table("totals") == {"o1": 1.01}  # decoded through Order.__post_init__
    assert Ticker.started == 1
    assert "orders" in Named.declared and totals.changelog_topic.name in Named.declared


async def test_a_worker_subclass_is_called_on_its_assignment_and_commits() -> None:
    class Watching(agentstream.Worker):
        assigned_tps: list[Any] = []
        commits = 0

        async def on_partitions_assigned(self, assigned: set[Any]) -> None:
            type(self).assigned_tps.extend(sorted(assigned))
            await super().on_partitions_assigned(assigned)

        async def commit(self, *, final: bool = False) -> bool:
            type(self).commits += 1
            return await super().commit(final=final)

    app = agentstream.App(
        f"subclass-{uuid.uuid4().hex[:6]}",
        broker=f"memory://w-{uuid.uuid4().hex[:6]}",
        store="memory://",
        topic_partitions=1,
        web_enabled=False,
        commit_interval=0.05,
    )
    words = app.topic("words", value_type=str)

    @app.agent(words)
    async def collect(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for _ in stream:
            pass

    worker = Watching(app, install_signal_handlers=False)
    await worker.start()
    try:
        await asyncio.wait_for(worker.assigned.wait(), 30)
        await until(lambda: Watching.commits > 0, "the commit loop called the override")
    finally:
        await worker.stop()
    assert [tp.topic for tp in Watching.assigned_tps] == ["words"]


async def test_a_view_subclass_answers_through_the_web_server() -> None:
    import aiohttp

    class Hello(agentstream.web.View):
        async def get(self, request: Any) -> Any:
            return self.json({"hello": self.app.conf.id})

    app = _app()
    app.page("/hello")(Hello)
    async with AppHarness(app) as h:
        assert h.web is not None
        async with aiohttp.ClientSession() as session, session.get(f"http://{h.web.address}/hello") as response:
            assert response.status == 200
            assert await response.json() == {"hello": app.conf.id}
