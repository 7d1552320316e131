"""Our :class:`~agentstream.transport.base.Assignor` presented to aiokafka as a partition assignor."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.coordinator.protocol import (  # type: ignore[import-untyped,unused-ignore]
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from ..base import Assignor, MemberInfo

__all__ = ["AssignorAdapter"]


class AssignorAdapter:
    """Presents a base.Assignor as an aiokafka partition assignor.

    aiokafka only calls ``name``, ``metadata``, ``assign`` and ``on_assignment`` on the objects in
    ``partition_assignment_strategy``, so an instance (not a class) carrying our assignor works.
    """

    version = 0

    def __init__(self, assignor: Assignor) -> None:
        self.assignor = assignor
        self.name: str = assignor.name

    def metadata(self, topics: Iterable[str]) -> Any:
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), self.assignor.member_user_data())

    def assign(self, cluster: Any, member_metadata: Mapping[str, Any]) -> dict[str, Any]:
        topics = sorted({t for meta in member_metadata.values() for t in meta.subscription})
        partitions_per_topic: dict[str, int] = {}
        for topic in topics:
            parts = cluster.partitions_for_topic(topic)
            if parts:
                partitions_per_topic[topic] = len(parts)
        members = [
            MemberInfo(member_id, frozenset(meta.subscription), bytes(meta.user_data or b""))
            for member_id, meta in sorted(member_metadata.items())
        ]
        result = self.assignor.assign(partitions_per_topic, members)
        out: dict[str, Any] = {}
        for member in members:
            tps, user_data = result.get(member.member_id, ([], b""))
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            out[member.member_id] = ConsumerProtocolMemberAssignment(
                self.version, sorted((t, sorted(p)) for t, p in by_topic.items()), user_data
            )
        return out

    def on_assignment(self, assignment: Any) -> None:
        self.assignor.on_assignment(list(assignment.partitions()), bytes(assignment.user_data or b""))
