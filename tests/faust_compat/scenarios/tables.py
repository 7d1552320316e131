"""Tables: Table.clear, @table.on_recover, partition_for_key, tumbling(key_index=True), SetTable manager."""

from __future__ import annotations

from typing import Any

import faust

from .. import kit
from ..registry import scenario


@scenario("Table.clear() empties the table")
async def table_clear() -> Any:
    app = faust.App("compat-tclear", broker="kafka://localhost:9092")
    table = app.Table("compat-tclear-t", default=int)
    src = app.topic("compat-tclear-src", value_type=str)

    @app.agent(src)
    async def count(stream: Any) -> Any:
        async for word in stream:
            if word == "CLEAR":
                table.clear()
            else:
                table[word] += 1
            print(word, sorted(table.items()))
            yield word

    kit.setup(app)
    async with count.test_context() as agent:
        for w in ("a", "b", "a", "CLEAR", "c"):
            await agent.put(w, key=w)
    return None


@scenario("@table.on_recover registers a callback (returned unchanged)")
async def table_on_recover() -> Any:
    app = faust.App("compat-recover", broker="kafka://localhost:9092")
    table = app.Table("compat-recover-t", default=int)

    async def recovered() -> None:
        print("recovered")

    decorated = table.on_recover(recovered)
    return decorated is recovered


@scenario("Table.partition_for_key(key): None with use_partitioner, else the partition of the event")
async def table_partition_for_key() -> Any:
    # The stream is keyed and partitioned like the table (4 partitions each), as a table's writer
    # should be: Faust answers the record's partition, agentstream the key's own; here they agree.
    # (A record on another partition than its key's: Faust names the record's, agentstream the key's
    # when that partition is on this worker; see docs/migrating-from-faust.md.)
    app = faust.App("compat-pfk", broker="kafka://localhost:9092", topic_partitions=4)
    plain = app.Table("compat-pfk-t", default=int)
    partitioned = app.Table("compat-pfk-u", default=int, use_partitioner=True)
    src = app.topic("compat-pfk-src", value_type=str, partitions=4)

    @app.agent(src)
    async def look(stream: Any) -> Any:
        async for event in stream.events():
            print(
                "partition", event.message.partition, plain.partition_for_key("x"), partitioned.partition_for_key("x")
            )
            yield event.value

    kit.setup(app)
    async with look.test_context() as agent:
        await agent.put("v", key="x", partition=2)  # "x" hashes to partition 2 of 4 (murmur2, Kafka's)
    return None


@scenario("tumbling(..., key_index=True): keys()/items() of a windowed table")
async def windowed_key_index() -> Any:
    app = faust.App("compat-keyidx", broker="kafka://localhost:9092")
    table = app.Table("compat-keyidx-t", default=int).tumbling(60, key_index=True)
    src = app.topic("compat-keyidx-src", value_type=str)

    @app.agent(src)
    async def count(stream: Any) -> Any:
        async for word in stream:
            table[word] += 1
            print("keys", sorted(table.keys()), "items", sorted(table.items()))
            yield word

    kit.setup(app)
    async with count.test_context() as agent:
        for w in ("a", "b", "a"):
            await agent.put(w, key=w, timestamp=1700000000.0)
    return None


@scenario("SetTable(start_manager=True): table.manager.add/discard/... route operations through its topic")
async def set_table_manager() -> Any:
    app = faust.App("compat-setmgr", broker="kafka://localhost:9092")
    table = app.SetTable("compat-setmgr-t", start_manager=True)
    src = app.topic("compat-setmgr-src", value_type=str)

    @app.agent(src)
    async def operate(stream: Any) -> Any:
        async for op in stream:
            manager = table.manager
            if op == "add":
                await manager.add("k", "a")
            elif op == "discard":
                await manager.discard("k", "b")
            elif op == "clear":
                await manager.clear("k")
            else:
                await getattr(manager, op)("k", ["c"])
            yield op

    kit.setup(app)
    async with operate.test_context() as agent:
        for op in (
            "add",
            "discard",
            "clear",
            "difference_update",
            "intersection_update",
            "symmetric_difference_update",
        ):
            await agent.put(op)
    topics = [t for t in kit.sent_topics() if t.endswith("-setmanager")]  # Faust: <table>-setmanager
    return {
        "topics": len(topics),
        "ops": [[k, v.get("action") if isinstance(v, dict) else v] for t in topics for k, v in kit.sent(t)],
    }
