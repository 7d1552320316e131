"""Issue 14's seven cases: tables return what was written (each failed before the fix)."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import aiohttp

import agentstream
from agentstream import codecs
from agentstream.exporter.schema import side_decoder, table_spec
from agentstream.testing import AppHarness
from agentstream.transport.memory import MemoryTransport
from agentstream.transport.partitioner import default_partition


class Item(agentstream.Record):
    sku: str
    qty: int


class Basket(agentstream.Record):
    owner: str
    items: list[Item]
    at: dt.datetime
    total: Decimal


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# 1 -------------------------------------------------------------------------------------------------
async def test_case1_reads_outside_the_agent_find_what_the_agent_wrote() -> None:
    app = agentstream.App(_name("wc"), broker="memory://", topic_partitions=4)
    words = app.topic("words", key_type=str, value_type=str)
    counts = app.Table("word_counts", default=int)
    seen_by_timer: list[int] = []

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:
        async for word in stream:
            counts[word] += 1

    @app.timer(0.02)
    async def read() -> None:
        seen_by_timer.append(counts["hello"])

    @app.page("/count/{word}")
    async def count_page(web_: object, request: object, word: str) -> object:
        return {"word": word, "count": counts[word], "known": word in counts}

    async with AppHarness(app) as h:
        for w in "hello world hello".split():
            await h.send("words", w, key=w)
        await h.wait_idle()
        assert counts["hello"] == 2
        assert counts.get("hello") == 2
        assert "hello" in counts and "world" in counts
        assert h.table("word_counts") == {"hello": 2, "world": 1}
        seen_by_timer.clear()
        while not seen_by_timer:
            await __import__("asyncio").sleep(0.02)
        assert seen_by_timer[-1] == 2
        async with aiohttp.ClientSession() as s:
            async with s.get(h.web.url + "/count/hello") as r:
                assert await r.json() == {"word": "hello", "count": 2, "known": True}
            async with s.get(h.web.url + "/tables/word_counts/hello") as r:
                assert (await r.json())["value"] == 2


# 2 -------------------------------------------------------------------------------------------------
async def test_case2_test_context_puts_records_on_their_keys_partition() -> None:
    app = agentstream.App(_name("tc"), broker="memory://", topic_partitions=4)
    payments = app.topic("payments", key_type=str, value_type=float)
    totals = app.Table("totals", default=float)
    per_minute = app.Table("per_minute", default=int).tumbling(60, expires=3600)

    @app.agent(payments)
    async def add(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            totals[event.key] += event.value
            per_minute[event.key] += 1

    async with add.test_context() as ctx:
        for amount in (5.0, 10.0, 0.5):
            event = await ctx.put(amount, key="alice")
            assert event.partition == default_partition(b"alice", 4)  # the partition its key maps to
        assert (await ctx.put(1.0, key="bob", partition=3)).partition == 3  # unless one is given
        assert totals.as_dict() == {"alice": 15.5, "bob": 1.0}
        assert totals["alice"] == 15.5
        assert per_minute["alice"].now() == 3


# 3 -------------------------------------------------------------------------------------------------
async def test_case3_one_key_written_from_every_partition_holds_one_value() -> None:
    app = agentstream.App(_name("kl"), broker="memory://", topic_partitions=3)
    ticks = app.topic("ticks", value_type=int)
    stats = app.Table("stats", default=int)

    @app.agent(ticks)
    async def tally(stream: agentstream.Stream) -> None:
        async for value in stream:
            stats["events"] += 1
            stats["total"] += value

    async with AppHarness(app) as h:
        for p in range(3):
            for _ in range(5):
                await h.send("ticks", 2, partition=p)  # keyless: every partition writes both keys
        await h.wait_idle()
        assert h.table("stats") == {"events": 15, "total": 30}
        assert stats["events"] == 15


# 4 -------------------------------------------------------------------------------------------------
async def test_case4_record_values_keep_their_type_after_a_commit() -> None:
    app = agentstream.App(_name("rec"), broker="memory://", topic_partitions=2)
    baskets = app.topic("baskets", key_type=str)  # no value_type: the __faust tag says what it is
    latest = app.Table("latest")
    lists = app.Table("lists", default=list)
    seen: list[object] = []

    @app.agent(baskets)
    async def keep(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            basket = event.value
            seen.append(basket)
            previous = latest.get(event.key)
            if previous is not None:
                seen.append(previous.items[0].sku)  # 'dict' has no attribute 'items'[0].sku before
            latest[event.key] = basket
            lists[event.key] = lists[event.key] + basket.items

    b = Basket("ann", [Item("a", 1), Item("b", 2)], dt.datetime(2024, 1, 2, 3, 4, tzinfo=dt.UTC), Decimal("9.99"))
    async with AppHarness(app) as h:
        await h.send("baskets", b, key="ann")
        await h.wait_idle()  # commits: the cache is flushed, reads now decode the store's bytes
        await h.send("baskets", b, key="ann")
        await h.wait_idle()
        assert seen == [b, b, "a"]
        assert latest["ann"] == b and isinstance(latest["ann"], Basket)
        assert lists["ann"] == b.items * 2 and all(isinstance(i, Item) for i in lists["ann"])
        assert h.table("latest") == {"ann": b}


# 5 -------------------------------------------------------------------------------------------------
async def test_case5_value_type_str_goes_through_json() -> None:
    app = agentstream.App(_name("s"), broker="memory://")
    names = app.topic("names", value_type=str)
    assert names.value_codec.dumps("bob") == b'"bob"'
    assert names.value_codec.loads(b'"bob"') == "bob"
    assert names.key_codec.dumps("bob") == b"bob"  # keys: raw UTF-8 (Faust's default)
    table = app.Table("t", value_type=str)
    assert table.value_codec.dumps("bob") == b'"bob"'


# 6 -------------------------------------------------------------------------------------------------
class Order(agentstream.Record):
    id: int
    customer: str


async def test_case6_group_by_encodes_the_new_key_raw_and_joins_a_plain_table_topic() -> None:
    app = agentstream.App(_name("gb"), broker="memory://", topic_partitions=8)
    orders = app.topic("orders", value_type=Order)
    customers = app.topic("customers", key_type=str, value_type=str)
    names = app.Table("names").from_topic(customers)
    joined: list[tuple[int, str]] = []

    @app.agent(orders)
    async def enrich(stream: agentstream.Stream) -> None:
        async for order, name in stream.group_by(Order.customer).join(names):
            joined.append((order.id, name))

    async with AppHarness(app) as h:
        producer = app.transport.producer()
        await producer.start()
        customers_ids = [f"c{i}" for i in range(16)]
        for c in customers_ids:  # a plain producer: UTF-8 keys, JSON values, default partitioner
            await producer.send("customers", c.encode(), b'"' + c.upper().encode() + b'"')
        await producer.flush()
        await producer.stop()
        await h.wait_idle()
        for i, c in enumerate(customers_ids):
            await h.send("orders", Order(i, c), key=None, partition=i % 8)
        await h.wait_idle()
        assert sorted(joined) == [(i, c.upper()) for i, c in enumerate(customers_ids)]
        repart = MemoryTransport.read_topic(app.transport, f"{app.id}-customer-repartition")  # type: ignore[arg-type]
        assert {m.key for m in repart} == {c.encode() for c in customers_ids}


# 7 -------------------------------------------------------------------------------------------------
def test_case7_export_types_int_table_values() -> None:
    app = agentstream.App(_name("ex"), broker="memory://")
    counts = app.Table("counts", default=int)
    spec = table_spec(counts)
    assert spec.value["type"] == "long"
    assert side_decoder(spec.value)(codecs.get("json").dumps(12944)) == 12944  # type: ignore[arg-type]
    baskets = app.Table("baskets")
    raw = codecs.get("json").dumps(Basket("x", [Item("a", 1)], dt.datetime(2024, 1, 1), Decimal("1")))
    assert b'"__faust"' in raw  # the tag the exporter types the column from
    spec = table_spec(baskets, samples=[raw])
    assert spec.value["type"][0] == "struct"
    row = side_decoder(spec.value)(raw)  # type: ignore[arg-type]
    assert row["owner"] == "x" and row["items"] == [{"sku": "a", "qty": 1}]
    assert row["at"] == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


async def test_case4_on_window_close_gets_records_after_a_commit() -> None:
    closed: list[tuple[object, object]] = []

    def on_close(key: object, value: object) -> None:
        closed.append((key, value))

    app = agentstream.App(_name("wc4"), broker="memory://", topic_partitions=1)
    items = app.topic("items", key_type=str)  # untyped values: Records by their __faust tag
    last = app.Table("last", on_window_close=on_close).tumbling(10, expires=100)

    @app.agent(items)
    async def keep(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            last[event.key] = event.value

    async with AppHarness(app) as h:
        await h.send("items", Item("a", 1), key="k", timestamp=1.0)
        await h.wait_idle()  # committed: the window's value now comes from the store's bytes
        await h.send("items", Item("b", 2), key="k", timestamp=115.0)  # expires [0, 10) (end + expires=100)
        await h.wait_idle()
    assert closed[0][0] == ("k", (0.0, 10.0))
    assert closed[0][1] == Item("a", 1) and isinstance(closed[0][1], Item)
