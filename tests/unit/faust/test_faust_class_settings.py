"""Faust's class settings agentstream used to refuse and now honours (issue 40, item 7): Event,
Schema, Serializers, TableManager, PartitionAssignor, LeaderAssignor. Each test gives a subclass,
shows that its overridden method runs in the path the setting claims (faust_settings.py's row),
that ``app.conf.<Name>`` reads it back, and that a class of the wrong kind is refused at start
naming the setting. Before, ``App(<Name>=<subclass>)`` raised ConfigError ("not supported")."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.faust import Schema
from agentstream.faust.serializers import Registry
from agentstream.leader import LeaderAssignor
from agentstream.tables.manager import TableManager
from agentstream.testing import AppHarness
from agentstream.worker.assignor import PartitionNumberAssignor
from agentstream.worker.worker import Worker


def _app(name: str, **options: Any) -> agentstream.App:
    return agentstream.App(f"{name}-{uuid.uuid4().hex[:6]}", store="memory://", web_enabled=False, **options)


async def _until(check: Any, rounds: int = 500) -> None:
    for _ in range(rounds):
        if check():
            return
        await asyncio.sleep(0.01)


def _refused(name: str, value: Any, match: str = "") -> None:
    with pytest.raises(agentstream.ConfigError, match=match) as err:
        _app(f"bad-{name}", **{name: value})
    assert err.value.setting == name


# -- Event ----------------------------------------------------------------------------------------------
class TaggedEvent(agentstream.Event):
    """An app's own events: a helper the agents call on each one."""

    def shouted(self) -> str:
        return str(self.value).upper()


async def test_event_is_the_class_of_the_events_agents_get_from_topics_and_channels() -> None:
    app = _app("event", topic_partitions=1, Event=TaggedEvent)
    assert app.conf.Event is TaggedEvent
    seen: list[tuple[type, str]] = []
    channel = app.channel(value_type=str)

    @app.agent(app.topic("src", value_type=str))
    async def from_topic(stream: Any) -> None:
        async for event in stream.events():
            seen.append((type(event), event.shouted()))

    @app.agent(channel)
    async def from_channel(stream: Any) -> None:
        async for event in stream.events():
            seen.append((type(event), event.shouted()))

    async with AppHarness(app) as h:
        await h.send("src", "hi")
        await channel.send(value="there")
        await _until(lambda: len(seen) == 2)
        record = h.transport.read_topic("src")[0]
    assert sorted(seen, key=lambda s: s[1]) == [(TaggedEvent, "HI"), (TaggedEvent, "THERE")]
    made = app.create_event("k", "v", {"h": b"1"}, record)  # Faust's app.create_event
    assert type(made) is TaggedEvent and made.headers == {"h": b"1"}


async def test_without_the_event_setting_events_are_agentstream_s() -> None:
    app = _app("event-default", topic_partitions=1)
    kinds: list[type] = []

    @app.agent(app.topic("src", value_type=str))
    async def plain(stream: Any) -> None:
        async for event in stream.events():
            kinds.append(type(event))

    async with AppHarness(app) as h:
        await h.send("src", "x")
        await _until(lambda: bool(kinds))
    assert kinds == [agentstream.Event]


def test_event_by_path_and_a_wrong_class_refused() -> None:
    assert _app("event-path", Event=f"{__name__}:TaggedEvent").class_setting("Event") is TaggedEvent
    _refused("Event", dict, "subclass of agentstream.Event")
    _refused("Event", "no.such.module:Event", "cannot import")

    class FaustStyleEvent(agentstream.Event):  # Faust's constructor: it would fail on the first record
        def __init__(self, app: Any, key: Any, value: Any, headers: Any, message: Any) -> None:
            super().__init__(key, value, message)

    _refused("Event", FaustStyleEvent, r"cannot be called as .*\(key, value, message, tp\)")


# -- Schema ---------------------------------------------------------------------------------------------
class JsonKeys(Schema):
    """Faust's default-schema pattern: class attributes are the defaults of every topic."""

    key_serializer = "json"
    value_type = int


async def test_schema_fills_in_what_a_topic_declaration_leaves_out() -> None:
    app = _app("schema", topic_partitions=1, Schema=JsonKeys)
    assert app.conf.Schema is JsonKeys
    src = app.topic("src")
    assert src.key_codec.dumps("k") == b'"k"' and src.value_type is int  # the class's defaults
    raw = app.topic("raw-keys", key_serializer="raw", value_type=str)  # the declaration wins
    assert raw.key_codec.dumps("k") == b"k" and raw.value_type is str
    assert app.channel().value_type is int
    got: list[tuple[Any, Any]] = []

    @app.agent(src)
    async def read(stream: Any) -> None:
        async for event in stream.events():
            got.append((event.key, event.value))

    async with AppHarness(app) as h:
        await h.send("src", 7, key="k")
        await _until(lambda: bool(got))
        assert [(m.key, m.value) for m in h.transport.read_topic("src")] == [(b'"k"', b"7")]
    assert got == [("k", 7)]
    plain = _app("schema-default").topic("src")  # without the setting: the app's raw keys
    assert plain.key_codec.dumps("k") == b"k" and plain.value_type is None


def test_schema_wrong_class_refused() -> None:
    _refused("Schema", dict, "subclass of agentstream.faust.Schema")


# -- Serializers ----------------------------------------------------------------------------------------
class CountingRegistry(Registry):
    """Counts what goes through it, and stamps values it encodes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[str] = []

    def dumps_value(self, typ: Any, value: Any, *, serializer: Any = None) -> bytes | None:
        self.calls.append(f"dumps_value:{value}")
        return super().dumps_value(typ, {"stamped": value}, serializer=serializer)

    def loads_value(self, typ: Any, value: bytes | None, *, serializer: Any = None) -> Any:
        self.calls.append("loads_value")
        decoded = super().loads_value(typ, value, serializer=serializer)
        return decoded["stamped"] if isinstance(decoded, dict) else decoded

    def loads_key(self, typ: Any, key: bytes | None, *, serializer: Any = None) -> Any:
        self.calls.append("loads_key")
        return super().loads_key(typ, key, serializer=serializer)


async def test_serializers_encode_and_decode_the_app_s_topics() -> None:
    app = _app("serializers", topic_partitions=1, Serializers=CountingRegistry, value_serializer="json")
    assert app.conf.Serializers is CountingRegistry
    registry = app.serializers
    assert type(registry) is CountingRegistry and registry.value_serializer == "json"
    out = app.topic("out")
    got: list[Any] = []

    @app.agent(app.topic("src", key_type=str))
    async def relay(stream: Any) -> None:
        async for event in stream.events():
            got.append((event.key, event.value))
            await out.send(value=event.value * 2)

    async with AppHarness(app) as h:
        await h.send("src", 21, key="k")
        await _until(lambda: bool(h.transport.read_topic("out")))
        on_the_wire = [m.value for m in h.transport.read_topic("out")]
    assert got == [("k", 21)]  # decoded through the registry (the stamp taken off)
    assert on_the_wire == [b'{"stamped":42}']  # encoded through it
    assert {"loads_key", "loads_value", "dumps_value:21", "dumps_value:42"} <= set(registry.calls)
    default = _app("serializers-default")
    assert type(default.serializers) is Registry and default.topic("t").value_codec.dumps(1) == b"1"


def test_serializers_wrong_class_refused() -> None:
    _refused("Serializers", dict, "Registry")


# -- TableManager ---------------------------------------------------------------------------------------
class CheckpointCounter(TableManager):
    checkpoints = 0

    async def start(self) -> None:
        type(self).started = True  # type: ignore[attr-defined]
        await super().start()

    def checkpoint(self, writer: Any = None) -> None:
        type(self).checkpoints += 1
        super().checkpoint(writer)


async def test_table_manager_is_the_class_of_the_worker_s_table_manager() -> None:
    app = _app("table-manager", topic_partitions=1, TableManager=CheckpointCounter)
    assert app.conf.TableManager is CheckpointCounter
    counts = app.Table("counts", default=int)

    @app.agent(app.topic("words", key_type=str, value_type=str))
    async def count(stream: Any) -> None:
        async for word in stream:
            counts[word] += 1

    async with AppHarness(app) as h:
        assert type(h.worker.tables) is CheckpointCounter and CheckpointCounter.started  # type: ignore[attr-defined]
        await h.send("words", "a", key="a")
        await h.wait_idle()
        await h.worker.commit()
        assert h.table("counts") == {"a": 1}
    assert CheckpointCounter.checkpoints > 0  # the commits checkpointed through the subclass
    assert isinstance(app.tables, dict) and list(app.tables) == ["counts"]  # app.tables stays the mapping


def test_table_manager_wrong_class_refused() -> None:
    _refused("TableManager", dict, "TableManager")


# -- PartitionAssignor ----------------------------------------------------------------------------------
class RecordingAssignor(PartitionNumberAssignor):
    plans: list[list[str]] = []

    def assign(self, partitions_per_topic: Any, members: Any) -> Any:
        result = super().assign(partitions_per_topic, members)
        type(self).plans.append(sorted(partitions_per_topic))
        return result


async def test_partition_assignor_plans_the_group_s_assignment() -> None:
    app = _app("assignor", topic_partitions=2, PartitionAssignor=f"{__name__}:RecordingAssignor")
    assert app.conf.PartitionAssignor is RecordingAssignor  # the path reads back as the class, as in Faust
    handled: list[str] = []

    @app.agent(app.topic("src", value_type=str))
    async def read(stream: Any) -> None:
        async for value in stream:
            handled.append(value)

    async with AppHarness(app) as h:
        assert type(h.worker.assignor) is RecordingAssignor
        await h.send("src", "x")
        await _until(lambda: bool(handled))
    assert handled == ["x"]  # the subclass's plan (super's) gave this worker the partitions
    assert ["src"] in RecordingAssignor.plans  # the leader planned through the subclass


def test_partition_assignor_wrong_class_refused_when_the_worker_is_made() -> None:
    _refused("PartitionAssignor", "not-a-path", "cannot import")
    _refused("PartitionAssignor", 3, "must be a class")
    with pytest.raises(agentstream.ConfigError, match="PartitionNumberAssignor") as err:
        Worker(_app("assignor-bad", PartitionAssignor=dict))
    assert err.value.setting == "PartitionAssignor"


# -- LeaderAssignor -------------------------------------------------------------------------------------
class NeverLeader(LeaderAssignor):
    asked = 0

    def is_leader(self) -> bool:
        type(self).asked += 1
        return False


async def _leader_run(**options: Any) -> tuple[bool, list[str]]:
    app = _app("leader", topic_partitions=1, **options)
    ran: list[str] = []

    @app.task(on_leader=True)
    async def once() -> None:
        ran.append("leader task")

    @app.agent(app.topic("src", value_type=str))
    async def read(stream: Any) -> None:
        async for value in stream:
            ran.append(value)

    async with AppHarness(app) as h:
        await h.send("src", "record")
        await _until(lambda: "record" in ran)
        await asyncio.sleep(0.05)
        return app.is_leader(), ran


async def test_leader_assignor_decides_is_leader_and_on_leader_tasks() -> None:
    assert await _leader_run() == (True, ["leader task", "record"])  # one worker: the group's leader
    assert await _leader_run(LeaderAssignor=NeverLeader) == (False, ["record"])
    assert NeverLeader.asked >= 2  # app.is_leader() and the on_leader task asked the subclass
    assert _app("leader-conf", LeaderAssignor=NeverLeader).conf.LeaderAssignor is NeverLeader


def test_leader_assignor_wrong_class_refused() -> None:
    _refused("LeaderAssignor", dict, "LeaderAssignor")
