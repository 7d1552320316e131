"""Cross-client key encoding on the real broker (issue 14).

A plain aiokafka producer writes a table topic the way any Kafka client does: UTF-8 keys, JSON
values, Kafka's default partitioner. An agent re-keys an order stream with ``group_by`` and joins
it against that table: every order must find its customer, which it does only if ``group_by``
encodes the new key with the same bytes (Faust's raw keys) and so routes it to the same partition.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

import agentstream
from agentstream.devbroker import DevBroker
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio

PARTITIONS = 4
CUSTOMERS = 24
ORDERS = 96


class Order(agentstream.Record):
    id: int
    customer: str


async def test_group_by_join_matches_a_table_topic_written_by_a_plain_producer(
    broker: DevBroker, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    app = agentstream.App(
        f"keys-{suffix}",
        broker=broker.url,
        store="memory://",
        data_dir=tmp_path,
        topic_partitions=PARTITIONS,
        commit_interval=0.2,
        session_timeout=6.0,
        heartbeat_interval=0.5,
        rebalance_timeout=6.0,
        web_enabled=False,
    )
    orders = app.topic(f"orders-{suffix}", value_type=Order)
    customers = app.topic(f"customers-{suffix}", key_type=str, value_type=dict)
    names = app.Table("names").from_topic(customers)
    joined = app.topic(f"joined-{suffix}", key_type=str, value_type=dict)

    @app.agent(orders)
    async def enrich(stream: agentstream.Stream) -> None:
        async for order, customer in stream.group_by(Order.customer).left_join(names):
            await joined.send(
                key=order.customer, value={"id": order.id, "name": None if customer is None else customer["name"]}
            )

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    worker = Worker(app)
    await producer.start()
    try:
        await app.transport.ensure_topics([t.spec() for t in app.topics.values()])
        # the table topic, as a Java/Go/aiokafka client writes it: UTF-8 keys, JSON values
        for i in range(CUSTOMERS):
            await producer.send(
                customers.name, orjson.dumps({"name": f"N{i}"}), key=f"c{i}".encode(), timestamp_ms=1_000
            )
        await producer.flush()
        await worker.start()
        await asyncio.wait_for(worker.assigned.wait(), 60)
        for i in range(ORDERS):  # orders spread over every partition, keyed by order id
            await producer.send(
                orders.name, Order(i, f"c{i % CUSTOMERS}").dumps(), key=str(i).encode(), timestamp_ms=2_000 + i
            )
        await producer.flush()
        got = await _read(broker.bootstrap, joined.name, ORDERS, timeout=90)
    finally:
        await worker.stop()
        await producer.stop()
    assert len(got) == ORDERS
    assert {v["id"]: v["name"] for _, v in got} == {i: f"N{i % CUSTOMERS}" for i in range(ORDERS)}
    assert all(k == f"c{v['id'] % CUSTOMERS}".encode() for k, v in got)  # output keys: raw UTF-8 too


async def _read(bootstrap: str, topic: str, n: int, timeout: float) -> list[tuple[bytes, Any]]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False, group_id=None
    )
    await consumer.start()
    out: list[tuple[bytes, Any]] = []
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(out) < n and asyncio.get_running_loop().time() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                out += [(m.key, orjson.loads(m.value)) for m in messages]
    finally:
        await consumer.stop()
    return out


class Basket(agentstream.Record):
    owner: str
    items: list[Order]


async def test_export_types_an_untyped_tables_values_from_their_faust_tags(broker: DevBroker) -> None:
    from agentstream.exporter.offsets import changelog_ranges
    from agentstream.exporter.sample import typed_spec
    from agentstream.exporter.schema import side_decoder, table_spec

    suffix = uuid.uuid4().hex[:6]
    app = agentstream.App(f"exp-{suffix}", broker=broker.url, topic_partitions=2)
    baskets = app.Table("baskets")  # no value_type: the values' __faust tags say what they are
    await app.transport.ensure_topics([baskets.changelog_topic.spec()])
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    try:
        for i in range(6):
            value = Basket(f"u{i}", [Order(i, f"c{i}")])
            await producer.send(baskets.changelog_topic.name, baskets.value_codec.dumps(value), key=f"u{i}".encode())
        await producer.flush()
    finally:
        await producer.stop()
        await app.transport.close()
    planned = await changelog_ranges(broker.bootstrap, baskets.changelog_topic.name)
    untyped = table_spec(baskets)
    assert untyped.value["codec"] == "json_text"
    loop = asyncio.get_running_loop()
    spec = await loop.run_in_executor(None, typed_spec, baskets, untyped, broker.bootstrap, planned)
    assert spec.value["type"][0] == "struct"
    row = side_decoder(spec.value)(baskets.value_codec.dumps(Basket("x", [Order(1, "c")])) or b"")
    assert row == {"owner": "x", "items": [{"id": 1, "customer": "c"}]}
