"""Table semantics on the memory transport: cache size independence, GlobalTable, SetTable, restore."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.testing import AppHarness
from agentstream.transport.memory import MemoryTransport
from agentstream.worker.worker import Worker
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio


def counting_app(name: str, **settings: object) -> tuple[agentstream.App, object]:
    app = agentstream.App(name, broker="memory://", topic_partitions=3, **settings)
    src = app.topic("events", key_type=str, value_type=str)
    table = app.Table("counts", default=int)

    @app.agent(src)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            if event.value == "delete":
                table.pop(event.key, None)
            else:
                table[event.key] += 1

    return app, table


@pytest.mark.parametrize("cache_size", [0, 1, 7, 10_000])
async def test_results_and_changelog_state_do_not_depend_on_cache_size(cache_size: int) -> None:
    rnd = random.Random(5)
    events = [(f"k{rnd.randint(0, 20)}", rnd.choice(["inc"] * 9 + ["delete"])) for _ in range(500)]
    expected: dict[str, int] = {}
    for k, v in events:
        if v == "delete":
            expected.pop(k, None)
        else:
            expected[k] = expected.get(k, 0) + 1
    app, _ = counting_app(f"cache-{cache_size}", table_cache_size=cache_size)
    async with AppHarness(app) as h:
        for k, v in events:
            await h.send("events", v, key=k)
        await h.wait_idle()
        assert h.table("counts") == expected
        changelog: dict[bytes, bytes | None] = {}
        for m in MemoryTransport.read_topic(app.transport, f"cache-{cache_size}-counts-changelog"):  # type: ignore[arg-type]
            changelog[m.key] = m.value
        live = {k.decode().strip('"'): int(v) for k, v in changelog.items() if v is not None}
        assert live == expected


async def test_table_restores_from_changelog_in_a_new_worker() -> None:
    broker = f"memory://restore-{uuid.uuid4().hex[:8]}"
    app, table = counting_app("restore-app")
    app.settings = app.settings.replace(broker=broker, store="memory://", commit_interval=0.05)
    w1 = Worker(app)
    await w1.start()
    for i in range(60):
        await app.topics["events"].send(key=f"k{i % 6}", value="inc")
    await until(lambda: sum(t.processed for t in w1.tasks.values()) >= 60, "the first worker processed 60 records")
    await w1.stop()
    # A fresh process's view: new app object, memory store (starts empty), same broker.
    app2, table2 = counting_app("restore-app")
    app2.settings = app2.settings.replace(broker=broker, store="memory://", commit_interval=0.05)
    w2 = Worker(app2)
    await w2.start()
    import asyncio

    await asyncio.wait_for(w2.assigned.wait(), 30)
    assert dict(table2.items()) == {f"k{i}": 10 for i in range(6)}  # type: ignore[attr-defined]
    assert w2.tables.restored_records >= 6
    await w2.stop()


async def test_global_table_sees_every_partition() -> None:
    app = agentstream.App("global-app", broker="memory://", topic_partitions=4)
    updates = app.topic("updates", key_type=str, value_type=int)
    lookups = app.topic("lookups", value_type=str, partitions=1)
    everything = app.GlobalTable("everything", default=int)
    seen: list[int] = []

    @app.agent(updates)
    async def write(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            everything[event.key] = event.value

    @app.agent(lookups)
    async def read(stream: agentstream.Stream) -> None:
        async for key in stream:
            seen.append(everything[key])

    async with AppHarness(app) as h:
        for i in range(12):
            await h.send("updates", i * 10, key=f"k{i}")
        await h.wait_idle()
        # global tables apply writes by following their changelog
        await until(lambda: len(dict(everything.items())) == 12, "the global table holds every key")
        for i in range(12):
            await h.send("lookups", f"k{i}")
        await h.wait_idle()
    assert seen == [i * 10 for i in range(12)]


async def test_set_table_add_and_discard() -> None:
    app = agentstream.App("set-app", broker="memory://", topic_partitions=2)
    actions = app.topic("actions", key_type=str, value_type=dict)
    members = app.SetTable("members")

    @app.agent(actions)
    async def apply(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            if event.value["op"] == "add":
                members[event.key].add(event.value["user"])
            else:
                members[event.key].discard(event.value["user"])

    async with AppHarness(app) as h:
        for group, op, user in [
            ("g1", "add", "a"),
            ("g1", "add", "b"),
            ("g2", "add", "c"),
            ("g1", "discard", "a"),
            ("g2", "add", "c"),
        ]:
            await h.send("actions", {"op": op, "user": user}, key=group)
        await h.wait_idle()
        assert h.table("members") == {"g1": {"b"}, "g2": {"c"}}


async def test_a_codec_giving_a_bytearray_stores_and_logs_bytes() -> None:
    """A codec's dumps may give a bytearray: the compiled build checks types, so the table
    normalises keys and changelog values to bytes instead of failing."""

    class Codec:
        def dumps(self, obj: Any) -> Any:
            return bytearray(str(obj).encode())

        def loads(self, data: Any) -> Any:
            return bytes(data).decode()

    app = agentstream.App("bytearray-codec", broker="memory://", topic_partitions=1)
    table = app.Table("t", key_type=str, key_serializer=Codec(), value_serializer=Codec())
    seen: list[Any] = []

    @app.agent(app.topic("in", key_type=str, value_type=str))
    async def put(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            table[event.key] = event.value
            seen.append(table[event.key])

    async with AppHarness(app) as h:
        await h.send("in", "1", key="a")
        await h.wait_idle()
        assert seen == ["1"] and h.table("t") == {"a": "1"}
        name = app.tables["t"].changelog_topic.name
        changelog = [(m.key, m.value) for m in MemoryTransport.read_topic(app.transport, name)]  # type: ignore[arg-type]
        assert changelog == [(b"a", b"1")]


async def test_a_faust_format_table_key_codec_giving_a_bytearray_gives_bytes() -> None:
    """topic_naming='faust': a key the custom codec encodes to something other than JSON is
    kept as the codec's bytes (a bytearray normalised: the compiled build checks types)."""

    class Codec:
        def dumps(self, obj: Any) -> Any:
            return bytearray(repr(obj).encode())

        def loads(self, data: Any) -> Any:
            return bytes(data).decode()

    app = agentstream.App("bytearray-faust", broker="memory://", topic_partitions=1, topic_naming="faust")
    table = app.Table("t", key_serializer=Codec())
    assert table.key_codec.dumps(("a", 1)) == b"('a', 1)"
    assert table.key_codec.dumps(7) == b"7"  # JSON: re-encoded the way Faust's json writes it
