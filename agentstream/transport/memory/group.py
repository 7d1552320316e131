"""Consumer groups on the memory broker: members, committed offsets and Kafka's eager rebalance.

A rebalance runs as a background task, as the group coordinator does: every member gives back
all it owns, the leader's assignor (or Kafka's RangeAssignor) makes a plan, the plan is checked,
and every member still in the group receives its part.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeAlias

from agentstream.exceptions import TransportError
from agentstream.transport.base import TP, Assignor, MemberInfo

from .partitions import TopicLog

__all__ = ["GroupMember", "ConsumerGroup", "Plan", "range_assignment", "check_plan"]

log = logging.getLogger(__name__)

Plan: TypeAlias = dict[str, tuple[list[TP], bytes]]  # member id -> its partitions and the assignor's bytes for it


class GroupMember(Protocol):
    """What a group needs of a member (the memory consumer) to run a rebalance."""

    @property
    def member_id(self) -> str: ...

    @property
    def subscription(self) -> tuple[str, ...]:
        """The topics it subscribed to."""
        ...

    @property
    def assignor(self) -> Assignor | None: ...

    async def revoke_all(self) -> None:
        """Give back every partition it owns (its listener's revoke hook runs first)."""

    async def take_assignment(self, partitions: list[TP], user_data: bytes) -> None:
        """Own ``partitions`` from now on (its assignor's and listener's hooks run)."""

    def rebalance_failed(self, exc: Exception) -> None:
        """The rebalance failed: raise ``exc`` from the member's next getmany."""


class ConsumerGroup:
    """Members (join order, first is leader), committed offsets and the rebalance runner."""

    def __init__(self, topics: Mapping[str, TopicLog], group_id: str) -> None:
        self.topics = topics  # the broker's topics (live): partition counts for the plan
        self.group_id = group_id
        self.members: list[GroupMember] = []
        self.committed: dict[TP, int] = {}
        self._dirty = False
        self._task: asyncio.Task[None] | None = None

    def request_rebalance(self) -> None:
        """Mark the group for a rebalance; one runner task serializes and coalesces them."""
        self._dirty = True
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._run(), name=f"memory-rebalance-{self.group_id}")

    def pending(self) -> asyncio.Task[None] | None:
        task = self._task
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            return None
        return task

    async def _run(self) -> None:
        while self._dirty:
            self._dirty = False
            members = list(self.members)
            try:
                await self._rebalance(members)
            except Exception as exc:  # surfaced from every member's next getmany
                log.exception("memory transport: rebalance of group %r failed", self.group_id)
                for m in members:
                    m.rebalance_failed(exc)

    async def _rebalance(self, members: list[GroupMember]) -> None:
        for m in members:  # eager protocol: everyone gives everything back first
            await m.revoke_all()
        members = [m for m in self.members if m in members]  # some may have left meanwhile
        if not members:
            return
        topics = {t for m in members for t in m.subscription}
        counts = {t: len(self.topics[t].partitions) for t in sorted(topics) if t in self.topics}
        leader = members[0].assignor
        if leader is not None:
            infos = [
                MemberInfo(m.member_id, frozenset(m.subscription), m.assignor.member_user_data() if m.assignor else b"")
                for m in members
            ]
            plan = leader.assign(counts, infos)
        else:
            plan = range_assignment(counts, members)
        check_plan(plan, counts)
        for m in members:
            if m in self.members:
                tps, user_data = plan.get(m.member_id, ([], b""))
                await m.take_assignment(tps, user_data)


def range_assignment(counts: Mapping[str, int], members: Sequence[GroupMember]) -> Plan:
    """Kafka's RangeAssignor: per topic, contiguous ranges by member id (keeps co-partitioning)."""
    plan: Plan = {m.member_id: ([], b"") for m in members}
    for topic, n in counts.items():
        subs = sorted(m.member_id for m in members if topic in m.subscription)
        per, extra = divmod(n, len(subs)) if subs else (0, 0)
        start = 0
        for i, mid in enumerate(subs):
            size = per + (1 if i < extra else 0)
            plan[mid][0].extend(TP(topic, p) for p in range(start, start + size))
            start += size
    return plan


def check_plan(plan: Plan, counts: Mapping[str, int]) -> None:
    """Catch assignor bugs here; a real broker would silently let two members read one partition."""
    owner: dict[TP, str] = {}
    for mid, (tps, _) in plan.items():
        for tp in tps:
            if not 0 <= tp.partition < counts.get(tp.topic, 0):
                raise TransportError(
                    f"assignor gave member {mid!r} {tp}, which no member subscribes to or does not exist"
                )
            if tp in owner:
                raise TransportError(
                    f"assignor gave {tp} to both {owner[tp]!r} and {mid!r}; each partition needs one owner"
                )
            owner[tp] = mid
