"""The broker a bench case runs against: the dev broker (tansu, the default) or a real Apache Kafka cluster
(``BENCH_BROKER=kafka``: three KRaft nodes from tests/kafka_cluster with Kafka's own thread pools and JVM
settings, ``for_tests=False``; replication factor 3, ``min.insync.replicas=2``).

Each case (and each scale run) gets a fresh one, so fixed topic names and group ids never meet old state.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeAlias

from agentstream.devbroker import DevBroker

KINDS = ("tansu", "kafka")


def kind() -> str:
    """BENCH_BROKER: ``tansu`` (default; ``dev`` is the same) or ``kafka``."""
    value = os.environ.get("BENCH_BROKER", "tansu").strip().lower() or "tansu"
    value = "tansu" if value == "dev" else value
    if value not in KINDS:
        raise SystemExit(f"BENCH_BROKER={value!r}: choose tansu (the dev broker, default) or kafka (a real cluster)")
    return value


def replication_factor() -> int:
    """Of the topics the bench creates: 1 on the dev broker, 3 on the Kafka cluster (its min.insync.replicas is 2,
    so acks=all needs more than one replica)."""
    return 3 if kind() == "kafka" else 1


class KafkaBroker:
    """A 3-node Kafka cluster (tests/kafka_cluster) behind the dev broker's interface."""

    def __init__(self, log_path: Path) -> None:
        from tests.kafka_cluster.cluster import KafkaCluster

        self.log_path = log_path
        self.cluster = KafkaCluster(work_dir=None, for_tests=False, heap_mb=1024)

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def url(self) -> str:
        return "kafka://" + self.bootstrap.replace(",", ";")

    @property
    def pids(self) -> list[int]:
        return [n.process.pid for n in self.cluster.nodes if n.process is not None]

    def start(self) -> KafkaBroker:
        self.cluster.start(timeout=180)
        return self

    def stop(self) -> None:
        # the nodes' logs are kept beside the case's other logs before the cluster's directory goes
        try:
            self.log_path.write_text("\n".join(self.cluster.log_tail(n, 200) for n in self.cluster.nodes) + "\n")
        except OSError:
            pass
        self.cluster.stop()


#: What a case runs against (both have start/stop, bootstrap and url).
Broker: TypeAlias = "DevBroker | KafkaBroker"


def new_broker(log_path: Path) -> Broker:
    """A broker of the kind BENCH_BROKER names (not started)."""
    return KafkaBroker(log_path) if kind() == "kafka" else DevBroker(log_path=log_path)


def pids(broker: object) -> list[int]:
    """The broker's process ids (one for the dev broker, one per node for the cluster), for its CPU."""
    if isinstance(broker, KafkaBroker):
        return broker.pids
    proc = getattr(broker, "_proc", None)
    return [proc.pid] if proc is not None else []
