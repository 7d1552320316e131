"""What the Kafka client settings (Faust's names) become for aiokafka's consumer and producer.

Each client is built by agentstream's kafka:// transport with aiokafka's real class, so an
argument aiokafka does not take fails here; only the network is left out (start/stop do nothing).
"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped,unused-ignore]

from agentstream import App
from agentstream.transport.kafka import KafkaProducer, KafkaTransport

pytestmark = pytest.mark.asyncio

URL = "kafka://127.0.0.1:1"


class OfflineConsumer(AIOKafkaConsumer):  # type: ignore[misc]
    """aiokafka's consumer, built with the arguments given, that never connects."""

    built: list[tuple[dict[str, Any], Any]] = []

    def __init__(self, *topics: str, **kwargs: Any) -> None:
        super().__init__(*topics, **kwargs)
        OfflineConsumer.built.append((kwargs, self))

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


class OfflineProducer(AIOKafkaProducer):  # type: ignore[misc]
    built: list[tuple[dict[str, Any], Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        OfflineProducer.built.append((kwargs, self))

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    OfflineConsumer.built.clear()
    OfflineProducer.built.clear()
    monkeypatch.setattr("agentstream.transport.kafka.consumer.AIOKafkaConsumer", OfflineConsumer)


async def consumer_args(app: App, *, group: bool) -> tuple[dict[str, Any], Any]:
    transport = KafkaTransport(URL)
    consumer = transport.consumer(group_id=app.id if group else None, **app.consumer_settings(group=group))
    await consumer.start()
    await consumer.stop()
    return OfflineConsumer.built[-1]


async def producer_args(app: App) -> tuple[dict[str, Any], Any]:
    producer = KafkaProducer(["127.0.0.1:1"], app.producer_settings(), client_factory=OfflineProducer)
    await producer.start()
    await producer.stop()
    return OfflineProducer.built[-1]


FAUST_APP = {
    "broker": URL,
    "consumer_auto_offset_reset": "latest",
    "consumer_group_instance_id": "worker-1",
    "consumer_max_fetch_size": 2 * 1024**2,
    "consumer_metadata_max_age_ms": 60_000,
    "consumer_connections_max_idle_ms": 120_000,
    "broker_client_id": "billing",
    "broker_max_poll_interval": 600.0,
    "broker_request_timeout": 120.0,
    "broker_check_crcs": False,
    "broker_session_timeout": 30.0,
    "broker_heartbeat_interval": 5.0,
    "broker_rebalance_timeout": 45.0,
    "consumer_isolation_level": "read_committed",
    "producer_acks": 1,
    "producer_compression_type": "zstd",
    "producer_linger_ms": 20,
    "producer_max_batch_size": 65536,
    "producer_max_request_size": 4_000_000,
    "producer_request_timeout": 90.0,
    "producer_metadata_max_age_ms": 30_000,
    "producer_connections_max_idle_ms": 60_000,
}


async def test_the_group_consumer_gets_every_consumer_setting() -> None:
    kwargs, consumer = await consumer_args(App("billing-app", **FAUST_APP), group=True)
    assert {k: kwargs[k] for k in EXPECTED_CONSUMER} == EXPECTED_CONSUMER
    assert kwargs["group_id"] == "billing-app" and kwargs["enable_auto_commit"] is False
    # aiokafka took them: its client sends the client id, its coordinator the instance id
    assert consumer._client._client_id == "billing"
    assert consumer._group_instance_id == "worker-1"


EXPECTED_CONSUMER = {
    "client_id": "billing",
    "auto_offset_reset": "latest",
    "group_instance_id": "worker-1",
    "max_partition_fetch_bytes": 2 * 1024**2,
    "metadata_max_age_ms": 60_000,
    "connections_max_idle_ms": 120_000,
    "max_poll_interval_ms": 600_000,
    "request_timeout_ms": 120_000,
    "check_crcs": False,
    "session_timeout_ms": 30_000,
    "heartbeat_interval_ms": 5_000,
    "rebalance_timeout_ms": 45_000,
    "isolation_level": "read_committed",
}


async def test_consumers_without_a_group_read_from_the_start_without_an_instance_id() -> None:
    """Table restore, reply and channel readers position themselves: the group's reset and
    static membership are not theirs (a restore past the log's end restarts at its start)."""
    kwargs, _ = await consumer_args(App("billing-app", **FAUST_APP), group=False)
    assert kwargs["auto_offset_reset"] == "earliest" and "group_instance_id" not in kwargs
    assert kwargs["client_id"] == "billing" and kwargs["request_timeout_ms"] == 120_000


async def test_the_producer_gets_every_producer_setting() -> None:
    kwargs, producer = await producer_args(App("billing-app", **FAUST_APP))
    assert {k: kwargs[k] for k in EXPECTED_PRODUCER} == EXPECTED_PRODUCER
    assert producer.client._client_id == "billing"
    assert producer._compression_type == "zstd"


EXPECTED_PRODUCER = {
    "client_id": "billing",
    "acks": 1,
    "compression_type": "zstd",
    "linger_ms": 20,
    "max_batch_size": 65536,
    "max_request_size": 4_000_000,
    "request_timeout_ms": 90_000,
    "metadata_max_age_ms": 30_000,
    "connections_max_idle_ms": 60_000,
}


async def test_defaults() -> None:
    """acks=all, no compression, agentstream's client id; the group starts at the earliest offset."""
    app = App("plain", broker=URL)
    kwargs, _ = await producer_args(app)
    assert kwargs["acks"] == "all" and "compression_type" not in kwargs
    assert kwargs["client_id"].startswith("agentstream-")
    kwargs, consumer = await consumer_args(app, group=True)
    assert kwargs["auto_offset_reset"] == "earliest" and "group_instance_id" not in kwargs
    assert kwargs["isolation_level"] == "read_uncommitted" and kwargs["max_poll_interval_ms"] == 300_000
    assert consumer._group_instance_id is None


@pytest.mark.parametrize("acks,sent", [("all", "all"), (-1, "all"), ("1", 1), (0, 0)])
async def test_acks_spellings(acks: Any, sent: Any) -> None:
    kwargs, _ = await producer_args(App("acks", broker=URL, producer_acks=acks))
    assert kwargs["acks"] == sent


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_every_compression_type_is_accepted_by_aiokafka(codec: str) -> None:
    """aiokafka refuses a codec whose library is missing; snappy, lz4 and zstd need cramjam."""
    _, producer = await producer_args(App("codec", broker=URL, producer_compression_type=codec.upper()))
    assert producer._compression_type == codec


async def test_exactly_once_reads_committed_by_default() -> None:
    kwargs, _ = await consumer_args(App("eos", broker=URL, processing_guarantee="exactly_once"), group=True)
    assert kwargs["isolation_level"] == "read_committed"


async def test_offset_reset_none_stops_with_the_partition_and_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiokafka raises NoOffsetForPartitionError when 'none' finds no committed offset (shown on
    the dev broker by tests/integration/test_client_settings.py); the error names both."""
    from aiokafka import errors
    from aiokafka.structs import TopicPartition  # type: ignore[import-untyped,unused-ignore]

    from agentstream.exceptions import TransportError

    async def no_offset(self: Any, *partitions: Any, **kwargs: Any) -> Any:
        raise errors.NoOffsetForPartitionError(TopicPartition("orders", 2))

    monkeypatch.setattr(OfflineConsumer, "getmany", no_offset)
    app = App("none-app", broker=URL, consumer_auto_offset_reset="none")
    consumer = KafkaTransport(URL).consumer(group_id=app.id, **app.consumer_settings(group=True))
    await consumer.start()
    assert OfflineConsumer.built[-1][0]["auto_offset_reset"] == "none"
    with pytest.raises(TransportError, match=r"orders\[2\].*consumer_auto_offset_reset='none'"):
        await consumer.getmany(timeout_ms=0)
