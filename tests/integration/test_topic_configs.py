"""Topics as the worker creates them on the dev broker (one worker start): the replication factor
asked (tansu accepts 3 on its one node and lists the broker three times in Metadata), the configs
set at creation (DescribeConfigs), and the purge of consumed repartition records after commit.

Replication across brokers cannot be shown on one node; what a real cluster is asked, the
fallback for brokers without KIP-464 and the refusal naming the setting are request-level tests
(tests/unit/topics_config/test_create_requests.py)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

import agentstream
from agentstream.devbroker import DevBroker
from agentstream.tables.windowed import CHANGELOG_ADDITIONAL_RETENTION_MS
from agentstream.transport.base import TP
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio

RECORDS = 20


async def described(admin: AIOKafkaAdminClient, names: list[str]) -> tuple[dict[str, set[int]], dict[str, Any]]:
    """Per topic: the replica counts of its partitions, and its configs."""
    replicas = {
        t["topic"]: {len(p["replicas"]) for p in t["partitions"]}
        for t in await admin.describe_topics(None)
        if t["topic"] in names
    }
    configs: dict[str, Any] = {}
    for response in await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names]):
        for _err, _msg, _type, name, entries in response.resources:
            configs[name] = {entry[0]: entry[1] for entry in entries}
    return replicas, configs


async def test_created_topics_have_the_replication_and_configs_asked_and_repartition_records_are_purged(
    broker: DevBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app_id = f"tc-{uuid.uuid4().hex[:6]}"
    app = agentstream.App(
        app_id,
        broker=broker.url,
        store="memory://",
        data_dir=tmp_path,
        topic_partitions=2,
        topic_replication_factor=3,
        repartition_purge_interval=0.1,
        commit_interval=0.2,
        session_timeout=6.0,
        heartbeat_interval=0.5,
        rebalance_timeout=6.0,
        web_enabled=False,
    )
    totals = app.Table("totals", default=int, extra_topic_configs={"segment.ms": "600000"})
    per_minute = app.Table("per_minute", default=int).tumbling(60, expires=3600)
    single = app.topic(f"{app_id}-single", replicas=1)
    seen = asyncio.Event()
    counted: list[str] = []

    @app.agent()
    async def count(stream: agentstream.Stream) -> None:
        async for value in stream.group_by(lambda v: v["k"], name="by_k"):
            totals[value["k"]] += 1
            per_minute[value["k"]] += 1
            counted.append(value["k"])
            if len(counted) == RECORDS:
                seen.set()

    worker = Worker(app)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        with caplog.at_level(logging.WARNING):
            await worker.start()
            await asyncio.wait_for(worker.assigned.wait(), 60)
            for i in range(RECORDS):
                await count.send(key=str(i), value={"k": f"k{i % 3}"})
            await asyncio.wait_for(seen.wait(), 60)
            repartition = f"{app_id}-by_k-repartition"
            purged = await purge_seen(broker, worker, repartition, caplog)
        changelog, windowed, agent_topic = (
            f"{app_id}-totals-changelog",
            f"{app_id}-per_minute-changelog",
            f"{app_id}-{__name__}.count",  # the agent's own topic: Faust's <id>-<module>.<function>
        )
        names = [changelog, windowed, repartition, agent_topic, single.name]
        replicas, configs = await described(admin, names)
        assert replicas == {changelog: {3}, windowed: {3}, repartition: {3}, agent_topic: {3}, single.name: {1}}
        assert configs[changelog] == {"cleanup.policy": "compact", "segment.ms": "600000"}
        retention = 60_000 + 3_600_000 + CHANGELOG_ADDITIONAL_RETENTION_MS
        assert configs[windowed] == {"cleanup.policy": "compact,delete", "retention.ms": str(retention)}
        assert configs[repartition] == {"cleanup.policy": "delete"}
        assert purged, "no purge was attempted after the commits"
        assert "exists with" not in caplog.text  # the worker's own topics are what it asks
    finally:
        await worker.stop()
        await admin.close()


async def purge_seen(broker: DevBroker, worker: Worker, topic: str, caplog: pytest.LogCaptureFixture) -> str:
    """After commits: the repartition topic's log start moved to a committed offset (a broker with
    DeleteRecords), or the worker said once it could not purge (tansu closes the connection on
    DeleteRecords) and went on."""
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
    await consumer.start()
    try:
        for _ in range(100):
            await asyncio.sleep(0.1)
            if worker.purge is not None and worker.purge.purged:
                tps = [TP(topic, p) for p in range(2)]
                starts = await consumer.beginning_offsets(tps)
                if any(starts[tp] > 0 and starts[tp] <= worker.committed_offsets()[tp] for tp in tps if tp in starts):
                    return "log start moved"
            if "could not purge consumed records of repartition topics" in caplog.text:
                assert worker.crashed is None
                return "broker refused DeleteRecords"
    finally:
        await consumer.stop()
    return ""
