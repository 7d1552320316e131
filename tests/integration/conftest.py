"""Integration tests run against real brokers: a tansu dev broker per session (``broker``), and Apache Kafka's
3-broker cluster shared by the run (``kafka``) or a test's own (``own_kafka``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstream.devbroker import DevBroker, free_port
from tests.kafka_cluster.cluster import KafkaCluster
from tests.kafka_cluster.shared import ClusterInfo, shared_cluster, unavailable_reason

from .targets import Target, on_dev_broker, on_kafka

_HERE = Path(__file__).resolve().parent
ARTIFACTS = Path(os.environ.get("AGENTSTREAM_ARTIFACTS", _HERE.parent.parent / "artifacts"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs a real broker (the tansu dev broker is started for it)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def broker() -> Iterator[DevBroker]:
    """A tansu broker on a free port for the whole session (memory storage; log in artifacts/)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    port = free_port()  # per-session log name: parallel sessions must not share one file
    dev = DevBroker(port, log_path=ARTIFACTS / f"tansu-integration-{port}.log")
    dev.start()
    try:
        yield dev
    finally:
        dev.stop()


@pytest.fixture
def fresh_broker(request: pytest.FixtureRequest) -> Iterator[DevBroker]:
    """A broker of the test's own, for tests whose apps use fixed topic names (log in artifacts/<test>/)."""
    log_dir = ARTIFACTS / request.node.name
    log_dir.mkdir(parents=True, exist_ok=True)
    with DevBroker(log_path=log_dir / "broker.log") as b:
        yield b


@pytest.fixture(scope="session")
def kafka() -> ClusterInfo:
    """The run's 3-broker Apache Kafka cluster (KRaft, RF 3, min.insync.replicas 2), shared by the xdist
    processes (tests/kafka_cluster/shared.py); skips saying why where Java or Maven is missing. Tests sharing it
    name their topics and groups uniquely; tests that kill brokers start a ``KafkaCluster`` of their own."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no Kafka cluster: {reason}")
    return shared_cluster()


@pytest.fixture
def own_kafka(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    """A Kafka cluster of the test's own, for tests that kill, pause or restart brokers (~20 s to start)."""
    if os.environ.get("AGENTSTREAM_TEST_KAFKA"):
        pytest.skip("kills brokers: needs a cluster the tests start (AGENTSTREAM_TEST_KAFKA names a user's cluster)")
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no Kafka cluster: {reason}")
    log_dir = ARTIFACTS / request.node.name
    log_dir.mkdir(parents=True, exist_ok=True)
    cluster = KafkaCluster(work_dir=log_dir / "kafka")
    shutil.rmtree(cluster.work_dir, ignore_errors=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(remove=False)
        for node in cluster.nodes:  # keep the brokers' logs in artifacts/, drop their data
            shutil.rmtree(node.directory / "data", ignore_errors=True)


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Target:
    """Where the test's example app runs, by its ``indirect`` parameter: ``"dev"`` (a dev broker of the test's
    own, the example's names), ``"kafka"`` (the shared cluster, names of the test's own), or
    ``"kafka-else-dev"`` (Kafka, or the dev broker where no cluster can be had: for tests that are faster on
    Kafka and need not run twice)."""
    kind = getattr(request, "param", "dev")
    if kind == "kafka-else-dev":  # where Kafka is the faster broker: the dev broker only without Java/Maven
        kind = "dev" if unavailable_reason() else "kafka"
    if kind == "dev":
        dev: DevBroker = request.getfixturevalue("fresh_broker")
        return on_dev_broker(dev.url, dev.bootstrap)
    if kind == "kafka":
        cluster: ClusterInfo = request.getfixturevalue("kafka")
        return on_kafka(cluster.url, cluster.bootstrap)
    raise ValueError(f"target: unknown broker kind {kind!r} (dev or kafka)")
