"""The dev-broker hooks on a Kafka cluster (issue 39, item 8).

- The follower's wait for the leader's plan (transport/kafka/follower_sync.py) is for tansu's polling
  coordinator only: Kafka holds an early follower's SyncGroup itself, and the wait measurably lengthened a
  scale-out's pause there (tests/soak/scale_out.py on Kafka). On Kafka a joining follower sends its SyncGroup
  without a DescribeGroups before it, and gets its assignment.
- The LeaveGroup patch (transport/kafka/consumer.py) only acts at generation 0, which tansu hands out and Kafka
  never does (its generations start at 1): on Kafka a stopping member's LeaveGroup is aiokafka's own, and the
  remaining member takes over at once, well within the session timeout.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from aiokafka.client import AIOKafkaClient  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.admin import DescribeGroupsRequest  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.group import JoinGroupRequest, SyncGroupRequest  # type: ignore[import-untyped,unused-ignore]

from agentstream.transport.base import TopicSpec
from agentstream.transport.kafka import KafkaTransport
from tests.kafka_cluster.shared import ClusterInfo

from .test_kafka_transport import _Assigned

SESSION_MS = 30_000  # far longer than the handover below may take: a LeaveGroup, not an expiry, moves them


async def test_on_kafka_a_follower_syncs_without_waiting_and_a_leaving_member_hands_over_at_once(
    kafka: ClusterInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire: list[tuple[int, str]] = []  # (client id, request) in the order they were sent
    send = AIOKafkaClient.send

    async def recorded(self: Any, node_id: Any, request: Any, **kw: Any) -> Any:
        if isinstance(request, (DescribeGroupsRequest, JoinGroupRequest, SyncGroupRequest)):
            what = type(request).__name__
            if isinstance(request, SyncGroupRequest):
                what += " (leader)" if request._group_assignment else " (follower)"
            wire.append((id(self), what))
        return await send(self, node_id, request, **kw)

    monkeypatch.setattr(AIOKafkaClient, "send", recorded)
    t = KafkaTransport(kafka.url)
    topic, group = f"hooks-{uuid.uuid4().hex[:8]}", f"hooks-group-{uuid.uuid4().hex[:8]}"
    await t.ensure_topics([TopicSpec(topic, 2)])
    settings = {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": 500}
    leader, follower = (t.consumer(group_id=group, **settings) for _ in range(2))
    noted = _Assigned(), _Assigned()
    try:
        leader.subscribe([topic], noted[0])
        await leader.start()
        follower.subscribe([topic], noted[1])
        await follower.start()  # returns once its first assignment came
        mine = id(follower._consumer._client)
        sent = [what for cid, what in wire if cid == mine]
        assert "SyncGroupRequest (follower)" in sent
        assert "DescribeGroupsRequest" not in sent, sent  # no wait for the leader's plan on Kafka
        assert len(noted[1].assigned) == 1

        began = time.monotonic()
        await follower.stop()  # aiokafka's LeaveGroup (generation >= 1 on Kafka)
        while len(noted[0].assigned) != 2:
            await leader.getmany(timeout_ms=100)
            assert time.monotonic() - began < SESSION_MS / 2000, "the leaver's partition waited for its session"
    finally:
        await follower.stop()
        await leader.stop()
        await t.close()
