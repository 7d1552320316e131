"""What agentstream asks of CreateTopics, and how an existing topic differs from what was asked.

Pure functions over :class:`~agentstream.transport.base.TopicSpec` (the admin client sends and
reads; these decide), so the requests are tested without a broker.

Replication: a spec's own ``replication_factor`` (``app.topic(..., replicas=N)``), else the app's
``topic_replication_factor``; ``-1`` asks for the broker's ``default.replication.factor``
(KIP-464, Kafka 2.4+). A broker that refuses ``-1`` gets :func:`fallback_replication`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.admin import NewTopic  # type: ignore[import-untyped,unused-ignore]

from ...exceptions import ConfigError
from ..base import TopicSpec

__all__ = [
    "BROKER_DEFAULT",
    "REFUSED_DEFAULT_CODES",
    "INVALID_REPLICATION_FACTOR",
    "creation_configs",
    "replication_for",
    "new_topic",
    "fallback_replication",
    "replication_refused",
    "cleanup_policy",
    "mismatches",
]

BROKER_DEFAULT = -1
INVALID_REPLICATION_FACTOR = 38
# How a broker older than KIP-464 refuses replication factor -1: INVALID_REPLICATION_FACTOR,
# INVALID_REQUEST or UNSUPPORTED_VERSION
REFUSED_DEFAULT_CODES = frozenset({INVALID_REPLICATION_FACTOR, 42, 35})
KAFKA_DEFAULT_CLEANUP_POLICY = "delete"  # log.cleanup.policy's default


def creation_configs(spec: TopicSpec) -> dict[str, str]:
    """The topic configs of the CreateTopics entry: ``cleanup.policy=compact`` for a compacted
    topic, then the spec's own configs (which may name another policy)."""
    config = {"cleanup.policy": "compact"} if spec.compacted else {}
    config.update({str(key): str(value) for key, value in spec.config.items()})
    return config


def replication_for(spec: TopicSpec, default: int) -> int:
    """The replication factor asked for ``spec``: its own, else the app's setting."""
    return spec.replication_factor if spec.replication_factor else default


def new_topic(spec: TopicSpec, replication_factor: int) -> Any:
    """aiokafka's NewTopic for ``spec``. Its constructor refuses -1 without a replica assignment
    (pre-KIP-464 rules), so the factor is set after construction: the request carries it as is."""
    topic = NewTopic(spec.name, spec.partitions, 1, topic_configs=creation_configs(spec))
    topic.replication_factor = replication_factor
    return topic


def fallback_replication(brokers: int) -> int:
    """A broker older than Kafka 2.4 has no "broker default" in CreateTopics: three copies where
    the cluster has three brokers, else one per broker."""
    return max(1, min(3, brokers))


def replication_refused(spec: TopicSpec, asked: int, brokers: int, message: str | None) -> ConfigError:
    """The broker refused the replication factor: name the setting (or the topic's ``replicas=``)."""
    setting = f"app.topic({spec.name!r}, replicas=...)" if spec.replication_factor else "topic_replication_factor"
    nodes = f"the broker has {brokers} node{'s' if brokers != 1 else ''}" if brokers else "the broker refused it"
    detail = f" ({message})" if message else ""
    return ConfigError(
        setting,
        f"{asked}: {nodes}; topic {spec.name!r} cannot be created{detail}",
        f"use at most {brokers or 'the number of brokers'}, or -1 for the broker's default replication factor",
    )


def cleanup_policy(config: Mapping[str, str]) -> frozenset[str]:
    """``cleanup.policy`` as a set of words (``"compact,delete"`` -> {compact, delete})."""
    raw = config.get("cleanup.policy", "")
    return frozenset(word.strip() for word in raw.split(",") if word.strip())


def mismatches(
    spec: TopicSpec, asked_replication: int, replication: int | None, configs: Mapping[str, str] | None
) -> Iterable[str]:
    """One line per way an existing topic differs from ``spec`` in replication factor or cleanup
    policy (agentstream never alters an existing topic; the operator does). ``configs`` None: unknown.
    A replication factor of -1 (the broker's default) and a spec naming no policy compare with nothing."""
    if asked_replication > 0 and replication is not None and replication != asked_replication:
        yield (
            f"topic {spec.name!r} exists with replication factor {replication}, but {asked_replication} was asked: "
            f"losing {replication} broker(s) loses its data. Fix: reassign its partitions "
            "(kafka-reassign-partitions) or change topic_replication_factor / replicas="
        )
    wanted = cleanup_policy(creation_configs(spec))
    if configs is None or not wanted:
        return
    have = cleanup_policy(configs) or frozenset({KAFKA_DEFAULT_CLEANUP_POLICY})
    if have != wanted:
        policy = ",".join(sorted(wanted))
        yield (
            f"topic {spec.name!r} exists with cleanup.policy={','.join(sorted(have))}, but {policy} was asked"
            + (
                ": a changelog that is not compacted loses table keys when its old segments are deleted"
                if "compact" in wanted and "compact" not in have
                else ""
            )
            + f". Fix: kafka-configs --alter --entity-type topics --entity-name {spec.name} "
            f"--add-config cleanup.policy=[{policy}]"
        )
