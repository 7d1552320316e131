"""Naming a real Kafka cluster: every broker form Faust accepts reaches the 3-broker cluster with the first
listed broker down, and a cluster that cannot be reached is reported with every host tried."""

from __future__ import annotations

import asyncio
import itertools
import socket
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.structs import TopicPartition as TP  # type: ignore[import-untyped,unused-ignore]

import agentstream
from agentstream.exceptions import AgentStreamError
from agentstream.transport import get_transport
from agentstream.transport.base import TopicSpec
from tests.kafka_cluster.shared import ClusterInfo

_ids = itertools.count()


def _dead_address() -> str:
    """A loopback port nobody listens on (bound, then closed: connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _forms(dead: str, live: list[str]) -> dict[str, Callable[[], Any]]:
    """Faust's ways to name several brokers, each with the dead broker listed first."""
    hosts = [dead, *live]
    return {
        "kafka://h1;h2": lambda: "kafka://" + ";".join(hosts),
        "kafka://h1;kafka://h2": lambda: ";".join(f"kafka://{h}" for h in hosts),
        "comma-separated": lambda: "kafka://" + ",".join(hosts),
        "list of URLs": lambda: [f"kafka://{h}" for h in hosts],
        "tuple of URLs": lambda: tuple(f"kafka://{h}" for h in hosts),
        "bare host:port": lambda: ",".join(hosts),
    }


FORMS = list(_forms("d:1", ["l:2"]))


@pytest.mark.parametrize("form", FORMS)
async def test_every_faust_broker_form_reaches_the_cluster_with_the_first_listed_broker_down(
    kafka: ClusterInfo, form: str
) -> None:
    dead = _dead_address()
    app = agentstream.App(f"forms-{uuid.uuid4().hex[:8]}", broker=_forms(dead, kafka.bootstrap.split(","))[form]())
    assert app.settings.broker.split("://", 1)[1].split(";")[0] == dead  # the dead broker really is tried first
    await _round_trip(app.settings.broker, app.settings)


async def test_broker_url_environment_variable_with_several_brokers(
    kafka: ClusterInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faust's ``BROKER_URL`` and agentstream's ``AGENTSTREAM_BROKER``, each naming several brokers."""
    dead = _dead_address()
    hosts = [dead, *kafka.bootstrap.split(",")]
    monkeypatch.setenv("BROKER_URL", ";".join(f"kafka://{h}" for h in hosts))
    app = agentstream.App(f"env-{uuid.uuid4().hex[:8]}")
    assert app.settings.broker == "kafka://" + ";".join(hosts)
    await _round_trip(app.settings.broker, app.settings)
    monkeypatch.delenv("BROKER_URL")
    monkeypatch.setenv("AGENTSTREAM_BROKER", ",".join(hosts))
    app = agentstream.App(f"env-{uuid.uuid4().hex[:8]}")
    assert app.settings.broker == "kafka://" + ";".join(hosts)


async def test_a_cluster_that_cannot_be_reached_names_every_host_tried() -> None:
    dead = [_dead_address() for _ in range(3)]
    app = agentstream.App("unreachable", broker=[f"kafka://{h}" for h in dead])
    transport = get_transport(app.settings.broker, app.settings)
    producer = transport.producer()
    try:
        with pytest.raises(AgentStreamError) as err:
            await asyncio.wait_for(producer.start(), 60)
        for host in dead:
            assert host in str(err.value)
    finally:
        await transport.close()


def test_a_typo_in_the_broker_list_names_the_bad_part() -> None:
    from agentstream.exceptions import ConfigError
    from agentstream.transport.kafka.url import parse_kafka_url

    for given, bad in (
        ("kafka://h1:9092;h2:90o2", "h2:90o2"),
        (["kafka://h1:9092", "kafka:/h2:9092"], "kafka:/h2:9092"),
        ("kafka://h1:9092;;kafka://h2:9092/topic", "h2:9092/topic"),
    ):
        with pytest.raises(ConfigError) as err:
            parse_kafka_url(agentstream.App("typo", broker=given).settings.broker)
        assert err.value.setting == "broker"
        assert repr(bad) in str(err.value)
    with pytest.raises(ConfigError, match="mixes the schemes"):
        agentstream.App("typo", broker=["kafka://h1:9092", "memory://"])


async def _round_trip(url: str, settings: Any) -> None:
    """Create a topic with RF 3, send a record and read it back through the app's transport."""
    transport = get_transport(url, settings)
    topic = f"forms-{next(_ids)}-{uuid.uuid4().hex[:8]}"
    producer = transport.producer()
    consumer = transport.consumer(group_id=None, auto_offset_reset="earliest")
    try:
        await transport.ensure_topics([TopicSpec(topic, 2)])
        await producer.start()
        await (await producer.send(topic, b"k", b"v", partition=1))
        await consumer.start()
        consumer.assign([TP(topic, 1)])
        async with asyncio.timeout(30):
            got: list[Any] = []
            while not got:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(records)
        assert (got[0].key, got[0].value) == (b"k", b"v")
    finally:
        await consumer.stop()
        await producer.stop()
        await transport.close()
