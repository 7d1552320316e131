"""Partition assignment for an agentstream consumer group (Kafka Streams' StreamsPartitionAssignor,
much reduced).

A worker owns *partition numbers*, not topic partitions: whoever owns number ``p`` gets partition
``p`` of every topic the app reads, so co-partitioned inputs (and the table partitions they
update) always meet in the same worker. Assignment is balanced and sticky (a number stays with
its previous owner when that keeps the balance), and hands out standby partition numbers for
warm table replicas. Members exchange JSON in the group protocol's user data, decoded with bounds
(:mod:`.member_data`): a member whose data is malformed is planned as holding nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..transport.base import TP, MemberInfo
from .member_data import MemberDataError, Subscription, decode_assignment, decode_subscription
from .placement import place

log = logging.getLogger(__name__)

__all__ = ["PartitionNumberAssignor", "Assignment", "plan"]


@dataclass
class Assignment:
    """What this worker was given in the last rebalance."""

    active: list[int] = field(default_factory=list)
    standby: list[int] = field(default_factory=list)  # warm-ups included: both follow their changelogs
    warmup: list[int] = field(default_factory=list)  # standbys to take over once caught up (probing rebalance)
    owners: dict[int, str] = field(default_factory=dict)  # partition number -> owner's web address
    generation: int = 0


def plan(
    partitions: int,
    members: Sequence[str],
    previous: Mapping[str, Sequence[int]],
    standby_replicas: int = 0,
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Balanced, sticky active assignment plus standby numbers, for a stateless app (see
    :func:`agentstream.worker.placement.place` for the lag-aware plan with warm-ups)."""
    placed = place(partitions, members, previous, standby_replicas=standby_replicas)
    return placed.active, placed.standby


class PartitionNumberAssignor:
    """The group protocol ``agentstream``: implements :class:`~agentstream.transport.base.Assignor`."""

    name = "agentstream"

    def __init__(
        self,
        host: str = "",
        standby_replicas: int = 0,
        name: str = "agentstream",
        *,
        acceptable_recovery_lag: int = 10_000,
        max_warmup_replicas: int = 2,
        rack: str = "",
    ) -> None:
        self.name = name  # "faust" under topic_naming='faust' (see naming.group_protocol_name)
        self.host = host
        self.standby_replicas = standby_replicas
        self.acceptable_recovery_lag = acceptable_recovery_lag
        self.max_warmup_replicas = max_warmup_replicas
        self.rack = rack
        # The worker's report of its local state when the app has tables: partition number ->
        # changelog lag (None: state of unknown lag). None: a stateless app (no warm-ups).
        self.lags: Callable[[], Mapping[int, int | None]] | None = None
        self.assignment = Assignment()
        self.previous: list[int] = []
        self.is_leader = False
        self._assigned_as_leader = False
        self.sensors: Any = None  # the app's sensors while any is registered (Faust's on_assignment_*)
        self.malformed_members = 0  # members' join data refused by this worker as leader (counted per join)
        self.malformed_assignments = 0  # leader's data for this worker refused (the assigned partitions used)

    def member_user_data(self) -> bytes:
        data: dict[str, object] = {"host": self.host, "prev": self.previous, "rack": self.rack or self.host}
        if self.lags is not None:
            try:
                # a negative lag (a bug) is reported as unknown: the leader refuses negative lags
                data["lags"] = {str(p): None if lag is None or lag < 0 else lag for p, lag in self.lags().items()}
            except Exception as exc:  # never fail a join over the report: the leader then sees no state here
                log.warning("could not report the local state's changelog lags: %s", exc)
                data["lags"] = {}
        return json.dumps(data).encode()

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
        info = {m.member_id: self._subscription(m) for m in members}
        subscribed = {t for m in members for t in m.topics}
        counts = {t: n for t, n in partitions_per_topic.items() if t in subscribed}
        total = max(counts.values(), default=0)
        previous = {mid: list(d.prev) for mid, d in info.items()}
        stateful = self.lags is not None
        lags = {mid: d.lags for mid, d in info.items()} if stateful else None
        placed = place(
            total,
            [m.member_id for m in members],
            previous,
            standby_replicas=self.standby_replicas,
            lags=lags,
            acceptable_recovery_lag=self.acceptable_recovery_lag,
            max_warmup_replicas=self.max_warmup_replicas,
            racks={mid: d.rack or d.host or mid for mid, d in info.items()},
        )
        active = placed.active
        owners = {p: info[mid].host for mid, ps in active.items() for p in ps}
        result: dict[str, tuple[list[TP], bytes]] = {}
        for m in members:
            tps = [TP(t, p) for t in sorted(m.topics) for p in active[m.member_id] if p < counts.get(t, 0)]
            data = {
                "active": active[m.member_id],
                "standby": placed.standby.get(m.member_id, []),
                "warmup": placed.warmup.get(m.member_id, []),
                "owners": owners,
            }
            result[m.member_id] = (tps, json.dumps(data).encode())
        if any(placed.warmup.values()):
            log.info("assignment plan: %s; warm-ups %s", active, {m: w for m, w in placed.warmup.items() if w})
        else:
            log.debug("assignment plan: %s", active)
        self._assigned_as_leader = True
        return result

    def _subscription(self, member: MemberInfo) -> Subscription:
        """The member's join data; malformed: a member holding nothing (no previous numbers, no state)."""
        try:
            return decode_subscription(member.user_data)
        except MemberDataError as exc:
            self.malformed_members += 1
            log.warning(
                "group member %s sent malformed subscription data (%s); planned as holding no partitions "
                "and no state. A worker of another version, or a client that is not an agentstream worker "
                "using the group's protocol name %r?",
                member.member_id,
                exc,
                self.name,
            )
            return Subscription()

    def on_assignment(self, partitions: list[TP], user_data: bytes) -> None:
        given = sorted({tp.partition for tp in partitions})
        try:
            data = decode_assignment(user_data)
        except MemberDataError as exc:
            self.malformed_assignments += 1
            log.warning(
                "the group leader's assignment data is malformed (%s); taking the assigned partitions %s "
                "as active, with no standbys and no owner map",
                exc,
                given,
            )
            data = decode_assignment(b"")
        warmup = list(data.warmup)
        self.assignment = Assignment(
            active=given if data.active is None else list(data.active),
            standby=sorted({*data.standby, *warmup}),
            warmup=warmup,
            owners=dict(data.owners),
            generation=self.assignment.generation + 1,
        )
        self.previous = list(self.assignment.active)
        if warmup:
            log.info(
                "warm-up replicas of partitions %s: following their changelogs while their owners process "
                "them; taken over in a probing rebalance once caught up",
                warmup,
            )
        self.is_leader, self._assigned_as_leader = self._assigned_as_leader, False
