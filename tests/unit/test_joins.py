"""Stream-table, stream-GlobalTable and table-table joins on the memory transport.

The stream-table reference replays each partition's records in the task's order (lowest head
timestamp first) into a dict and looks every stream record up in it: the table "as of the
record's time" in that task.
"""

from __future__ import annotations

import collections
import random
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.exceptions import TopologyError
from agentstream.testing import AppHarness
from agentstream.transport.partitioner import default_partition

from .test_joins_stream_stream import Preloaded, Send

pytestmark = pytest.mark.asyncio


def task_order(sends: list[Send], partitions: int) -> list[Send]:
    """Every partition's records in the order its task takes them (see PartitionGroup.next)."""
    out: list[Send] = []
    topics = sorted({s[0] for s in sends})
    for p in range(partitions):
        queues = {
            t: collections.deque(s for s in sends if s[0] == t and default_partition(s[1].encode(), partitions) == p)
            for t in topics
        }
        while any(queues.values()):
            _, t = min((q[0][3], t) for t, q in queues.items() if q)
            out.append(queues[t].popleft())
    return out


def stream_table_reference(sends: list[Send], kind: str, partitions: int) -> collections.Counter[tuple[str, Any]]:
    table: dict[str, Any] = {}
    out: collections.Counter[tuple[str, Any]] = collections.Counter()
    for topic, key, value, _ in task_order(sends, partitions):
        if topic == "prices":
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value["price"]
        elif key in table or kind == "left":
            out[(value["id"], table.get(key))] += 1
    return out


def stream_table_app(kind: str, partitions: int = 2) -> tuple[agentstream.App, list[tuple[str, Any]]]:
    app = agentstream.App(f"stj-{kind}-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=partitions)
    orders = app.topic("orders", key_type=str, value_type=dict)
    prices_topic = app.topic("prices", key_type=str, value_type=dict)
    prices = app.Table("prices").from_topic(prices_topic)
    out: list[tuple[str, Any]] = []

    @app.agent(orders)
    async def priced(stream: agentstream.Stream) -> None:
        joined = stream.join(prices) if kind == "inner" else stream.left_join(prices)
        async for order, price in joined:
            out.append((order["id"], None if price is None else price["price"]))

    return app, out


def random_stream_table_input(seed: int, n: int = 200) -> list[Send]:
    rnd = random.Random(seed)
    sends: list[Send] = []
    clock = 100.0
    for i in range(n):
        clock += rnd.random()
        ts = clock - rnd.choice([0, 0, 0, rnd.random() * 5])  # some out-of-order records
        item = f"item{rnd.randrange(8)}"
        if rnd.random() < 0.35:
            value = None if rnd.random() < 0.15 else {"price": i}
            sends.append(("prices", item, value, ts))
        else:
            sends.append(("orders", item, {"id": f"o{i}"}, ts))
    return sends


@pytest.mark.parametrize("kind", ["inner", "left"])
@pytest.mark.parametrize("seed", [3, 4])
async def test_stream_table_join_sees_the_table_as_of_each_record(kind: str, seed: int) -> None:
    sends = random_stream_table_input(seed)
    app, out = stream_table_app(kind)
    async with Preloaded(app, sends) as h:
        await h.wait_idle()
        assert h.table("prices") == {k: v for k, v in _final_table(sends).items()}
    expected = stream_table_reference(sends, kind, 2)
    assert collections.Counter(out) == expected
    assert any(price is None for _, price in expected) == (kind == "left")


def _final_table(sends: list[Send]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for topic, key, value, _ in task_order(sends, 2):
        if topic == "prices":
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
    return table


async def test_stream_table_update_after_the_record_is_not_seen() -> None:
    sends: list[Send] = [
        ("prices", "a", {"price": 1}, 1.0),
        ("prices", "a", {"price": 2}, 3.0),
        ("orders", "a", {"id": "before"}, 0.5),  # older than every price: no match
        ("orders", "a", {"id": "first"}, 2.0),  # sees price 1 although price 2 was produced earlier
        ("orders", "a", {"id": "second"}, 4.0),
        ("prices", "a", None, 5.0),  # tombstone
        ("orders", "a", {"id": "deleted"}, 6.0),
    ]
    app, out = stream_table_app("left", partitions=1)
    async with Preloaded(app, sends) as h:
        await h.wait_idle()
    assert out == [("before", None), ("first", 1), ("second", 2), ("deleted", None)]


async def test_global_table_join_with_key_extractor() -> None:
    app = agentstream.App(f"gtj-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=3)
    orders = app.topic("orders", key_type=str, value_type=dict)
    customers_topic = app.topic("customers", key_type=str, value_type=dict, partitions=2)
    customers = app.GlobalTable("customers").from_topic(customers_topic)
    inner: list[tuple[str, str]] = []
    left: list[tuple[str, Any]] = []

    @app.agent(orders)
    async def join_inner(stream: agentstream.Stream) -> None:
        async for order, customer in stream.join(customers, key=lambda o: o["customer"]):
            inner.append((order["id"], customer["name"]))

    @app.agent(orders)
    async def join_left(stream: agentstream.Stream) -> None:
        async for order, customer in stream.left_join(customers, key="customer"):
            left.append((order["id"], None if customer is None else customer["name"]))

    sends: list[Send] = [("customers", f"c{i}", {"name": f"name{i}"}, 1.0) for i in range(5)]
    sends += [("orders", f"o{i}", {"id": f"o{i}", "customer": f"c{i % 7}"}, 2.0 + i) for i in range(21)]
    async with Preloaded(app, sends) as h:
        await h.wait_idle()
        assert app.topology().subtopologies[0].source_topics == ["orders"]  # no co-partitioning needed
    assert f"{app.id}-customers-changelog" not in app.topics  # the topic is the changelog
    expected_left = {(f"o{i}", f"name{i % 7}" if i % 7 < 5 else None) for i in range(21)}
    assert sorted(left) == sorted(expected_left)
    assert sorted(inner) == sorted((o, n) for o, n in expected_left if n is not None)


async def test_table_table_views_follow_both_sides() -> None:
    app = agentstream.App(f"ttj-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2)
    updates = app.topic("updates", key_type=str, value_type=dict)
    a = app.Table("a", key_type=str)
    b = app.Table("b", key_type=str)

    @app.agent(updates)
    async def write(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            table = a if event.value["table"] == "a" else b
            if event.value["v"] is None:
                del table[event.key]
            else:
                table[event.key] = event.value["v"]

    inner, left, outer = a.join(b), a.left_join(b), a.outer_join(b)
    async with AppHarness(app, web_enabled=False) as h:
        for table, key, v in [("a", "x", 1), ("a", "y", 2), ("b", "y", 20), ("b", "z", 30)]:
            await h.send("updates", {"table": table, "v": v}, key=key)
        await h.wait_idle()
        assert inner.as_dict() == {"y": (2, 20)}
        assert left.as_dict() == {"x": (1, None), "y": (2, 20)}
        assert outer.as_dict() == {"x": (1, None), "y": (2, 20), "z": (None, 30)}
        assert inner["y"] == (2, 20) and "x" not in inner and inner.get("x") is None
        assert outer["z"] == (None, 30) and len(outer) == 3
        with pytest.raises(KeyError):
            inner["x"]
        await h.send("updates", {"table": "b", "v": 10}, key="x")  # a change of either side shows at once
        await h.send("updates", {"table": "a", "v": None}, key="y")
        await h.wait_idle()
        assert inner.as_dict() == {"x": (1, 10)}
        assert outer.as_dict() == {"x": (1, 10), "y": (None, 20), "z": (None, 30)}


async def test_table_table_join_refuses_tables_not_copartitioned() -> None:
    app = agentstream.App(f"ttj-cp-{uuid.uuid4().hex[:6]}", broker="memory://")
    a = app.Table("a", partitions=4)
    b = app.Table("b", partitions=3)
    with pytest.raises(TopologyError, match="not co-partitioned"):
        a.join(b)
    g = app.GlobalTable("g")
    assert a.left_join(g).kind == "left"  # a global side needs no co-partitioning


def _app_joining(make: Any, *, table_partitions: int | None = None) -> agentstream.App:
    app = agentstream.App(f"stj-bad-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=4)
    orders = app.topic("orders")
    prices = app.Table("prices", partitions=table_partitions).from_topic(
        app.topic("prices", partitions=table_partitions)
    )

    @app.agent(orders)
    async def joiner(stream: agentstream.Stream) -> None:
        async for _ in make(stream, prices):
            pass

    return app


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda s, t: s.outer_join(t), "inner or left"),
        (lambda s, t: s.join(t, key=lambda v: v["item"]), "group_by"),
        (lambda s, t: s.join(t, within=5), "within"),
    ],
)
async def test_bad_stream_table_joins_fail_at_discovery(make: Any, message: str) -> None:
    app = _app_joining(make)
    with pytest.raises(TopologyError, match=message):
        await app.discover()


async def test_table_not_copartitioned_with_the_stream_is_refused_at_build() -> None:
    app = _app_joining(lambda s, t: s.join(t), table_partitions=3)
    await app.discover()
    with pytest.raises(TopologyError) as info:
        app.topology()
    assert "orders has 4, prices has 3" in str(info.value) and "group_by" in str(info.value)


async def test_a_topic_table_is_joined_by_one_agent_only() -> None:
    app = agentstream.App(f"stj-two-{uuid.uuid4().hex[:6]}", broker="memory://")
    orders = app.topic("orders")
    prices = app.Table("prices").from_topic(app.topic("prices"))

    @app.agent(orders)
    async def one(stream: agentstream.Stream) -> None:
        async for _ in stream.join(prices):
            pass

    @app.agent(orders)
    async def two(stream: agentstream.Stream) -> None:
        async for _ in stream.left_join(prices):
            pass

    with pytest.raises(TopologyError, match="only one agent may join it"):
        await app.discover()


async def test_filter_before_a_join_applies_to_the_stream_side_only() -> None:
    sends: list[Send] = [
        ("prices", "a", {"price": 1}, 1.0),
        ("orders", "a", {"id": "x", "keep": False}, 2.0),
        ("orders", "a", {"id": "y", "keep": True}, 3.0),
    ]
    app = agentstream.App(f"stj-f-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    orders = app.topic("orders", key_type=str, value_type=dict)
    prices = app.Table("prices").from_topic(app.topic("prices", key_type=str, value_type=dict))
    out: list[Any] = []

    @app.agent(orders)
    async def priced(stream: agentstream.Stream) -> None:
        async for order, price in stream.filter(lambda v: v["keep"]).join(prices):
            out.append((order["id"], price["price"]))

    async with Preloaded(app, sends) as h:
        await h.wait_idle()
    assert out == [("y", 1)]


async def test_join_after_group_by_reads_the_table_topic_in_the_repartitioned_stage() -> None:
    app = agentstream.App(f"stj-gb-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2)
    orders = app.topic("orders", key_type=str, value_type=dict)
    # a table topic with JSON keys: group_by encodes the new key the same way (same key bytes)
    discounts = app.Table("discounts").from_topic(app.topic("discounts", key_serializer="json", value_type=dict))
    out: list[tuple[str, Any]] = []

    @app.agent(orders)
    async def by_customer(stream: agentstream.Stream) -> None:
        async for order, discount in stream.group_by(
            lambda o: o["customer"], name="by_cust", key_serializer="json"
        ).left_join(discounts):
            out.append((order["id"], None if discount is None else discount["pct"]))

    async with AppHarness(app, web_enabled=False) as h:
        assert [st.source_topics for st in app.topology().subtopologies] == [
            ["orders"],
            [f"{app.id}-by_cust-repartition", "discounts"],
        ]
        for c in ("c1", "c2", "c3"):
            await h.send("discounts", {"pct": int(c[1]) * 10}, key=c, timestamp=1.0)
        await h.wait_idle()
        for i in range(12):
            await h.send("orders", {"id": f"o{i}", "customer": f"c{i % 4}"}, key=f"o{i}", timestamp=2.0 + i)
        await h.wait_idle()
    assert sorted(out) == sorted((f"o{i}", (i % 4) * 10 or None) for i in range(12))


async def test_joins_run_in_an_agent_test_context() -> None:
    app = agentstream.App(f"stj-ctx-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    orders = app.topic("orders", key_type=str, value_type=dict)
    customers = app.GlobalTable("customers", key_type=str)

    @app.agent(orders)
    async def enrich(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for order, customer in stream.left_join(customers, key="customer"):
            yield order["id"], customer

    async with enrich.test_context() as ctx:
        customers["c1"] = "Ann"
        await ctx.put({"id": "o1", "customer": "c1"}, key="o1")
        await ctx.put({"id": "o2", "customer": "c2"}, key="o2")
    assert ctx.results == [("o1", "Ann"), ("o2", None)]
