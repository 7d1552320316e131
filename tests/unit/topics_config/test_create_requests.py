"""What the kafka:// topic admin sends (request level, against a recording admin client): the
replication factor asked, the fallback on brokers without KIP-464, the refusal naming the setting,
the warnings for existing topics that differ, and DeleteRecords. Replication across brokers cannot
be shown on the one-node dev broker; these show what a real cluster is asked."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from agentstream.exceptions import ConfigError, TransportError
from agentstream.transport.base import TP, TopicSpec
from agentstream.transport.kafka.admin import TopicAdmin


@dataclass
class RecordingAdmin:
    """aiokafka's admin client as far as TopicAdmin uses it: topics live in ``topics``."""

    brokers: int = 1
    refuse_default: bool = False  # a broker older than Kafka 2.4: replication factor -1 is invalid
    max_replication: int | None = None  # a real cluster: more copies than brokers is invalid
    topics: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (partitions, replicas)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    created: list[tuple[str, int, int, dict[str, str]]] = field(default_factory=list)
    deleted: list[dict[Any, int]] = field(default_factory=list)

    async def describe_topics(self, names: Any) -> list[dict[str, Any]]:
        return [
            {"topic": n, "error_code": 0, "partitions": [{"partition": p, "replicas": [1] * r} for p in range(c)]}
            for n, (c, r) in self.topics.items()
        ]

    async def describe_cluster(self) -> dict[str, Any]:
        return {"brokers": [{"node_id": i} for i in range(self.brokers)]}

    async def create_topics(self, new_topics: list[Any]) -> Any:
        errors = []
        for t in new_topics:
            self.created.append((t.name, t.num_partitions, t.replication_factor, dict(t.topic_configs)))
            if self.refuse_default and t.replication_factor == -1:
                errors.append((t.name, 38, "Replication factor must be larger than 0."))
            elif self.max_replication is not None and t.replication_factor > self.max_replication:
                errors.append((t.name, 38, f"Replication factor: {t.replication_factor} larger than available brokers"))
            else:
                self.topics[t.name] = (t.num_partitions, max(t.replication_factor, 1))
                self.configs[t.name] = dict(t.topic_configs)
                errors.append((t.name, 0, None))
        return SimpleNamespace(topic_errors=errors)

    async def describe_configs(self, resources: list[Any]) -> list[Any]:
        entries = [
            (0, None, 2, r.name, [(k, v, False, 5, False, []) for k, v in self.configs.get(r.name, {}).items()])
            for r in resources
        ]
        return [SimpleNamespace(resources=entries)]

    async def delete_records(self, records: dict[Any, Any]) -> dict[Any, int]:
        self.deleted.append({tp: r.before_offset for tp, r in records.items()})
        return {tp: r.before_offset for tp, r in records.items()}


def admin_with(fake: RecordingAdmin, replication_factor: int = -1) -> TopicAdmin:
    admin = TopicAdmin("kafka://test:9092", ["test:9092"], 1000, {}, replication_factor)
    admin._admin = fake  # the client it would have connected
    return admin


async def test_topics_ask_the_brokers_default_replication_factor_by_default() -> None:
    fake = RecordingAdmin()
    counts = await admin_with(fake).ensure_topics(
        [TopicSpec("cl", 2, compacted=True), TopicSpec("rp", 2, config={"cleanup.policy": "delete"})]
    )
    assert counts == {"cl": 2, "rp": 2}
    assert fake.created == [("cl", 2, -1, {"cleanup.policy": "compact"}), ("rp", 2, -1, {"cleanup.policy": "delete"})]


async def test_the_setting_and_a_topics_own_replicas_are_asked() -> None:
    fake = RecordingAdmin(brokers=3)
    await admin_with(fake, replication_factor=3).ensure_topics(
        [TopicSpec("a", 1), TopicSpec("b", 1, replication_factor=2)]
    )
    assert [(name, rf) for name, _, rf, _ in fake.created] == [("a", 3), ("b", 2)]


async def test_a_broker_without_kip_464_gets_min_3_brokers(caplog: pytest.LogCaptureFixture) -> None:
    fake = RecordingAdmin(brokers=2, refuse_default=True)
    with caplog.at_level(logging.INFO):
        assert await admin_with(fake).ensure_topics([TopicSpec("a", 1)]) == {"a": 1}
    assert [rf for _, _, rf, _ in fake.created] == [-1, 2]
    assert "does not take replication factor -1" in caplog.text
    five = RecordingAdmin(brokers=5, refuse_default=True)
    await admin_with(five).ensure_topics([TopicSpec("a", 1)])
    assert five.created[-1][2] == 3


async def test_a_replication_factor_the_cluster_cannot_hold_is_refused_naming_the_setting() -> None:
    fake = RecordingAdmin(brokers=1, max_replication=1)
    with pytest.raises(ConfigError, match=r"'topic_replication_factor': 3: the broker has 1 node"):
        await admin_with(fake, replication_factor=3).ensure_topics([TopicSpec("a", 1)])
    with pytest.raises(ConfigError, match=r"app.topic\('b', replicas=...\).*2: the broker has 1 node"):
        await admin_with(fake).ensure_topics([TopicSpec("b", 1, replication_factor=2)])


async def test_existing_topics_that_differ_are_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    fake = RecordingAdmin(brokers=3, topics={"cl": (2, 1), "ok": (2, 3), "rp": (2, 3)})
    fake.configs = {"cl": {}, "ok": {"cleanup.policy": "compact"}, "rp": {"cleanup.policy": "compact"}}
    admin = admin_with(fake, replication_factor=3)
    specs = [
        TopicSpec("cl", 2, compacted=True),
        TopicSpec("ok", 2, compacted=True),
        TopicSpec("rp", 2, config={"cleanup.policy": "delete"}),
    ]
    with caplog.at_level(logging.WARNING):
        await admin.ensure_topics(specs)
        await admin.ensure_topics(specs)  # a second declaration says nothing new
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and not fake.created
    assert "topic 'cl' exists with replication factor 1, but 3 was asked" in lines[0]
    assert "topic 'cl' exists with cleanup.policy=delete, but compact was asked" in lines[1]
    assert "changelog that is not compacted" in lines[1]
    assert "topic 'rp' exists with cleanup.policy=compact, but delete was asked" in lines[2]


async def test_the_brokers_default_replication_is_compared_with_nothing(caplog: pytest.LogCaptureFixture) -> None:
    fake = RecordingAdmin(topics={"a": (1, 1)})
    with caplog.at_level(logging.WARNING):
        await admin_with(fake).ensure_topics([TopicSpec("a", 1)])
    assert not caplog.records


async def test_delete_records_asks_for_each_partitions_new_log_start() -> None:
    fake = RecordingAdmin()
    admin = admin_with(fake)
    await admin.delete_records({TP("rp", 0): 7, TP("rp", 1): 3})
    assert fake.deleted == [{TP("rp", 0): 7, TP("rp", 1): 3}]


async def test_a_failed_delete_records_is_a_transport_error() -> None:
    from aiokafka.errors import KafkaConnectionError

    class Closing(RecordingAdmin):
        async def delete_records(self, records: dict[Any, Any]) -> dict[Any, int]:
            raise KafkaConnectionError("Connection closed")

    with pytest.raises(TransportError, match="cannot delete records"):
        await admin_with(Closing()).delete_records({TP("rp", 0): 1})


async def test_a_worker_refused_its_replication_factor_stops_before_joining_the_group(tmp_path: Any) -> None:
    import agentstream
    from agentstream.transport.kafka.transport import KafkaTransport
    from agentstream.worker.worker import Worker

    app = agentstream.App(
        "refused", broker="kafka://test:9092", topic_replication_factor=3, web_enabled=False, data_dir=tmp_path
    )

    @app.agent(app.topic("orders"))
    async def agent(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    transport = KafkaTransport("kafka://test:9092", replication_factor=app.settings.topic_replication_factor)
    transport._admin._admin = RecordingAdmin(brokers=1, max_replication=1)
    app._transport = transport
    worker = Worker(app, install_signal_handlers=False)
    with pytest.raises(ConfigError, match=r"'topic_replication_factor': 3: the broker has 1 node"):
        await worker.start()
    assert worker.consumer is None  # never joined the group
