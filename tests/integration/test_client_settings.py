"""Kafka client settings on the dev broker (one shared tansu broker, a few seconds each).

- ``consumer_auto_offset_reset='latest'``: a worker whose group is new starts at the end of its
  topic (records produced before it joined are never processed); ``'none'`` stops naming the
  partition.
- ``broker_client_id`` and ``consumer_group_instance_id``: the broker names a group member after
  its client id, a static member after its instance id (DescribeGroups shows the member ids);
  the client id in every request header: tests/unit/client_config/test_client_id_on_the_wire.py.
- ``producer_compression_type``: the broker keeps each batch as the producer sent it, so the
  attributes of the batches a raw Fetch returns show the codec (0 none, 1 gzip, 2 snappy, 3 lz4,
  4 zstd).

What the dev broker cannot show: that a static member's restart within the session timeout
causes no rebalance (tansu rebalances anyway; Kafka >= 2.3 does not). aiokafka sends the instance
id in JoinGroup, SyncGroup and Heartbeat; tests/unit/client_config shows it is given.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped,unused-ignore]
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped,unused-ignore]
from aiokafka.client import AIOKafkaClient  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.fetch import FetchRequest  # type: ignore[import-untyped,unused-ignore]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped,unused-ignore]

import agentstream
from agentstream.devbroker import DevBroker
from agentstream.exceptions import TransportError
from agentstream.transport.base import TP, TopicSpec
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def fast_group(**options: Any) -> dict[str, Any]:
    return {
        "store": "memory://",
        "topic_partitions": 1,
        "commit_interval": 0.2,
        "session_timeout": 6.0,
        "heartbeat_interval": 0.5,
        "rebalance_timeout": 6.0,
        "web_enabled": False,
        **options,
    }


async def test_a_new_group_with_offset_reset_latest_starts_at_the_end(broker: DevBroker, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    app = agentstream.App(
        f"latest-{suffix}",
        broker=broker.url,
        data_dir=tmp_path,
        **fast_group(
            consumer_auto_offset_reset="latest",
            consumer_group_instance_id=f"pod-{suffix}",
        ),
    )
    news = app.topic(f"news-{suffix}", value_type=str)
    seen: list[str] = []

    @app.agent(news)
    async def read(stream: agentstream.Stream) -> None:
        async for value in stream:
            seen.append(value)

    await app.transport.ensure_topics([news.spec()])
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    worker = Worker(app)
    await producer.start()
    try:
        for i in range(3):
            await producer.send_and_wait(news.name, f'"old-{i}"'.encode())
        await worker.start()
        await asyncio.wait_for(worker.assigned.wait(), 60)
        # the reset happens at the first fetch: send until a new record arrives (bounded)
        async with asyncio.timeout(30):
            i = 0
            while not seen:
                await producer.send_and_wait(news.name, f'"new-{i}"'.encode())
                i += 1
                await asyncio.sleep(0.2)
        assert seen and not [v for v in seen if v.startswith("old-")], seen
        # static membership reached the broker: it named the member after its instance id
        assert [m.rsplit("-", 5)[0] for m in await member_ids(broker, app.id)] == [f"pod-{suffix}"]
        await worker.stop()
        # ... and a static member does not leave on stop (no LeaveGroup, KIP-345): a restart within
        # session_timeout takes its place
        assert [m.rsplit("-", 5)[0] for m in await member_ids(broker, app.id)] == [f"pod-{suffix}"]
    finally:
        await worker.stop()
        await producer.stop()


async def member_ids(broker: DevBroker, group: str) -> list[str]:
    """DescribeGroups: the group's member ids. The broker names a member ``<client id>-<uuid>``,
    or ``<group instance id>-<uuid>`` for a static member, as Kafka does."""
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        described = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    return [str(member[0]) for response in described for g in response.groups for member in g[5]]


async def test_offset_reset_none_stops_naming_the_partition(broker: DevBroker) -> None:
    """The group member also shows ``broker_client_id``: the broker names it after its client id."""
    suffix = uuid.uuid4().hex[:6]
    app = agentstream.App(
        f"none-{suffix}",
        broker=broker.url,
        **fast_group(consumer_auto_offset_reset="none", broker_client_id=f"billing-{suffix}"),
    )
    topic = f"none-{suffix}"
    await app.transport.ensure_topics([TopicSpec(topic, 1)])
    consumer = app.transport.consumer(group_id=app.id, **app.consumer_settings(group=True))
    consumer.subscribe([topic], listener=NoListener())
    await consumer.start()  # returns once the group assigned the partition
    try:
        assert [m.rsplit("-", 5)[0] for m in await member_ids(broker, app.id)] == [f"billing-{suffix}"]
        with pytest.raises(TransportError, match=rf"{topic}\[0\].*consumer_auto_offset_reset='none'"):
            async with asyncio.timeout(20):
                while True:
                    await consumer.getmany(timeout_ms=200)
    finally:
        await consumer.stop()
        await app.stop_clients()


class NoListener:
    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: set[TP]) -> None:
        pass


@pytest.mark.parametrize("codec", sorted(CODECS))
async def test_compression_is_on_the_wire(broker: DevBroker, codec: str) -> None:
    suffix = uuid.uuid4().hex[:6]
    app = agentstream.App(f"codec-{suffix}", broker=broker.url, **fast_group(producer_compression_type=codec))
    topic = app.topic(f"compressed-{codec}-{suffix}", value_type=str)
    await app.transport.ensure_topics([topic.spec()])
    try:
        for i in range(20):
            await topic.send(value="x" * 200 + str(i))
        await app.producer.flush()
    finally:
        await app.stop_clients()
    codecs = await batch_codecs(broker, topic.name)
    assert codecs and set(codecs) == {CODECS[codec]}, codecs


async def batch_codecs(broker: DevBroker, topic: str) -> list[int]:
    """The compression codec of each record batch in partition 0, from a raw Fetch (v2 batches:
    base offset int64, length int32, leader epoch int32, magic int8, crc int32, attributes int16)."""
    client = AIOKafkaClient(bootstrap_servers=broker.bootstrap)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        await client.force_metadata_update()
        node = client.cluster.leader_for_partition(TopicPartition(topic, 0))
        response = await client.send(node, FetchRequest(100, 1, 1 << 20, 0, [(topic, [(0, 0, 1 << 20)])]))
    finally:
        await client.close()
    data = bytes(response.topics[0][1][0][-1])
    codecs, pos = [], 0
    while pos + 23 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        assert data[pos + 16] == 2  # magic: record batch v2
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        codecs.append(attributes & 0x07)
        pos += 12 + length
    return codecs
