"""Partition assignment for an agentstream consumer group (Kafka Streams' StreamsPartitionAssignor,
much reduced).

A worker owns *partition numbers*, not topic partitions: whoever owns number ``p`` gets partition
``p`` of every topic the app reads, so co-partitioned inputs (and the table partitions they
update) always meet in the same worker. Assignment is balanced and sticky (a number stays with
its previous owner when that keeps the balance), and hands out standby partition numbers for
warm table replicas. Members exchange JSON in the group protocol's user data.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..transport.base import TP, MemberInfo

log = logging.getLogger(__name__)

__all__ = ["PartitionNumberAssignor", "Assignment", "plan"]


@dataclass
class Assignment:
    """What this worker was given in the last rebalance."""

    active: list[int] = field(default_factory=list)
    standby: list[int] = field(default_factory=list)
    owners: dict[int, str] = field(default_factory=dict)  # partition number -> owner's web address
    generation: int = 0


def plan(
    partitions: int,
    members: Sequence[str],
    previous: Mapping[str, Sequence[int]],
    standby_replicas: int = 0,
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Balanced, sticky active assignment of ``range(partitions)`` plus standby numbers."""
    members = sorted(members)
    n = len(members)
    active: dict[str, list[int]] = {m: [] for m in members}
    if n == 0:
        return active, {}
    base, extra = divmod(partitions, n)
    capacity = {m: base for m in members}
    # Members that owned the most keep the extra slots, so stickiness decides who is "+1".
    by_prev = sorted(members, key=lambda m: (-len(previous.get(m, ())), m))
    for m in by_prev[:extra]:
        capacity[m] += 1
    taken: set[int] = set()
    for m in members:
        for p in sorted(set(previous.get(m, ()))):
            if 0 <= p < partitions and p not in taken and len(active[m]) < capacity[m]:
                active[m].append(p)
                taken.add(p)
    for p in range(partitions):
        if p in taken:
            continue
        m = min((x for x in members if len(active[x]) < capacity[x]), key=lambda x: (len(active[x]), x))
        active[m].append(p)
        taken.add(p)
    standby: dict[str, list[int]] = {m: [] for m in members}
    if standby_replicas > 0 and n > 1:
        owner = {p: m for m, ps in active.items() for p in ps}
        for p in range(partitions):
            start = members.index(owner[p])
            for i in range(1, min(standby_replicas, n - 1) + 1):
                standby[members[(start + i) % n]].append(p)
    return {m: sorted(ps) for m, ps in active.items()}, standby


class PartitionNumberAssignor:
    """The group protocol ``agentstream``: implements :class:`~agentstream.transport.base.Assignor`."""

    name = "agentstream"

    def __init__(self, host: str = "", standby_replicas: int = 0, name: str = "agentstream") -> None:
        self.name = name  # "faust" under topic_naming='faust' (see naming.group_protocol_name)
        self.host = host
        self.standby_replicas = standby_replicas
        self.assignment = Assignment()
        self.previous: list[int] = []
        self.is_leader = False
        self._assigned_as_leader = False
        self.sensors: Any = None  # the app's sensors while any is registered (Faust's on_assignment_*)

    def member_user_data(self) -> bytes:
        return json.dumps({"host": self.host, "prev": self.previous}).encode()

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberInfo]
    ) -> dict[str, tuple[list[TP], bytes]]:
        """The group leader's plan, between Faust's ``on_assignment_start`` and
        ``on_assignment_completed`` (or ``on_assignment_error``) when sensors are registered."""
        sensors = self.sensors
        if sensors is None:
            return self._assign(partitions_per_topic, members)
        state = sensors.on_assignment_start(self)
        try:
            result = self._assign(partitions_per_topic, members)
        except Exception as exc:
            sensors.on_assignment_error(self, state, exc)
            raise
        sensors.on_assignment_completed(self, state)
        return result

    def _assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberInfo]
    ) -> dict[str, tuple[list[TP], bytes]]:
        info: dict[str, dict[str, object]] = {}
        for m in members:
            try:
                info[m.member_id] = json.loads(m.user_data or b"{}")
            except ValueError:
                info[m.member_id] = {}
        subscribed = {t for m in members for t in m.topics}
        counts = {t: n for t, n in partitions_per_topic.items() if t in subscribed}
        total = max(counts.values(), default=0)
        previous = {mid: list(d.get("prev", []) or []) for mid, d in info.items()}  # type: ignore[call-overload]
        active, standby = plan(total, [m.member_id for m in members], previous, self.standby_replicas)
        owners = {p: str(info[mid].get("host", "")) for mid, ps in active.items() for p in ps}
        result: dict[str, tuple[list[TP], bytes]] = {}
        for m in members:
            tps = [TP(t, p) for t in sorted(m.topics) for p in active[m.member_id] if p < counts.get(t, 0)]
            data = {"active": active[m.member_id], "standby": standby.get(m.member_id, []), "owners": owners}
            result[m.member_id] = (tps, json.dumps(data).encode())
        log.debug("assignment plan: %s", active)
        self._assigned_as_leader = True
        return result

    def on_assignment(self, partitions: list[TP], user_data: bytes) -> None:
        try:
            data = json.loads(user_data or b"{}")
        except ValueError:
            data = {}
        self.assignment = Assignment(
            active=list(data.get("active", sorted({tp.partition for tp in partitions}))),
            standby=list(data.get("standby", [])),
            owners={int(k): v for k, v in data.get("owners", {}).items()},
            generation=self.assignment.generation + 1,
        )
        self.previous = list(self.assignment.active)
        self.is_leader, self._assigned_as_leader = self._assigned_as_leader, False
