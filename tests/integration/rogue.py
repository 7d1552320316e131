"""A rogue member of a worker group: an aiokafka consumer that joins with the group's protocol name
(``agentstream``) and sends malformed user data, as an old or foreign client sharing the group id
could. It processes nothing and commits nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

BAD_SUBSCRIPTION = b'{"host": "rogue:1", "prev": 5, "lags": {"0": Infinity, "1": -3}}'
BAD_ASSIGNMENT = b"[" * 50_000 + b"]" * 50_000  # deeply nested: json.loads raises RecursionError


class _RogueAssignor:
    """Offers the group protocol ``name`` with ``user_data``; as leader it gives every other member
    all partitions with ``assignment_data`` as their user data."""

    version = 0

    def __init__(self, name: str, user_data: bytes, assignment_data: bytes) -> None:
        self.name = name
        self.user_data = user_data
        self.assignment_data = assignment_data
        self.led = threading.Event()

    def metadata(self, topics: Iterable[str]) -> Any:
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), self.user_data)

    def assign(self, cluster: Any, members: Mapping[str, Any]) -> dict[str, Any]:
        topics = sorted({t for meta in members.values() for t in meta.subscription})
        parts = [(t, sorted(cluster.partitions_for_topic(t) or ())) for t in topics]
        mine = self._member_id
        out = {
            m: ConsumerProtocolMemberAssignment(self.version, [] if m == mine else parts, self.assignment_data)
            for m in members
        }
        self.led.set()
        return out

    def on_assignment(self, assignment: Any) -> None:
        pass

    _member_id = ""


class RogueMember(threading.Thread):
    """Runs the rogue consumer in a thread of its own until :meth:`leave`."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], *, protocol: str = "agentstream") -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topics = bootstrap, group, topics
        self.assignor = _RogueAssignor(protocol, BAD_SUBSCRIPTION, BAD_ASSIGNMENT)
        self.joined = threading.Event()
        self._leaving = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by leave()
            self.error = exc

    async def _main(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            enable_auto_commit=False,
            partition_assignment_strategy=[self.assignor],
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
            max_poll_interval_ms=60000,
        )
        consumer.subscribe(self.topics)
        await consumer.start()
        try:
            while not self._leaving.is_set():
                self.assignor._member_id = consumer._coordinator.member_id or ""
                await consumer.getmany(timeout_ms=200)
                if consumer._coordinator.generation > 0:
                    self.joined.set()
        finally:
            await consumer.stop()

    def leave(self) -> None:
        self._leaving.set()
        self.join(30)
        assert not self.is_alive(), "the rogue consumer did not stop"
        if self.error is not None:
            raise self.error
