"""A group follower sends its SyncGroup once the leader's plan is in.

In the group protocol the leader computes every member's assignment and sends it in its
SyncGroup; a follower's SyncGroup is answered once that came. Kafka's coordinator holds an early
follower's request and answers it the moment the leader's plan arrives, so sending early costs
nothing there. A coordinator that instead answers an early follower by polling (the tansu dev
broker: the request sleeps a second, then looks again) hands it its assignment up to a second
after the leader's. On a probing rebalance that second is one in which the partitions moving to
the follower are owned by no one: the member asking for the rebalance joins first, so it is
always early.

So before its SyncGroup, a follower asks the coordinator for the group's state (DescribeGroups,
which a group member may always do) until it is ``Stable`` (the plan is in), another rebalance
began (Kafka's ``PreparingRebalance``; on tansu, which calls both generations "forming", a change
in the group's members), or :data:`MAX_WAIT_S` passed; then it sends SyncGroup as aiokafka would
have. Any error from the describe (an ACL, a lost connection) ends the wait: the SyncGroup then
meets it.

Only on the dev broker. Kafka's coordinator holds an early follower's SyncGroup, so there the wait
cannot help, and it costs at least a DescribeGroups round trip plus up to a poll period after the
leader's sync. Measured with the scale-out soak on a 3-broker cluster (issue 39; 200k keys, 200
records/s, two busy cores): a scale-out's longest pause per partition had a median of 1.2 s over five
runs with the wait and 0.7 s over four without (single partitions ranged 0.5-4.1 s). So at a consumer's
first follower SyncGroup the coordinator is asked once for the cluster's id (a Metadata request),
and the wait applies only where it is tansu's (:data:`DEV_BROKER_CLUSTER_ID`, which
``agentstream dev-broker`` keeps); everywhere else followers sync at once, as aiokafka does.

This hooks aiokafka's client per consumer (its ``send``), pinned to aiokafka 0.14.x like the fetch
hook: :func:`install` checks the shape it relies on and otherwise leaves the consumer alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka.client import ConnectionGroup  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.admin import DescribeGroupsRequest  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.group import SyncGroupRequest  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.metadata import MetadataRequest  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "install",
    "leader_synced",
    "polling_coordinator",
    "DEV_BROKER_CLUSTER_ID",
    "FIRST_POLL_S",
    "MAX_POLL_S",
    "MAX_WAIT_S",
]

log = logging.getLogger(__name__)

FIRST_POLL_S = 0.005  # the first look comes at once; then polls back off from this ...
MAX_POLL_S = 0.05  # ... to this, so a slow leader in a big group is not flooded with describes
# A polling coordinator answers an early follower at its next poll (tansu: a second later), so
# waiting longer than that can only lose: the wait ends here at the latest.
MAX_WAIT_S = 1.0

# The cluster id tansu reports unless told otherwise (its --kafka-cluster-id); the dev broker keeps it.
DEV_BROKER_CLUSTER_ID = "tansu_cluster"

# States in which the leader's plan will not come for this generation: stop waiting.
_DONE = frozenset({"stable", "preparingrebalance", "empty", "dead"})


def leader_synced(state: str) -> bool:
    """Whether a follower should stop waiting, given DescribeGroups' state of its group.

    ``Stable``: the plan is in. ``PreparingRebalance``/``Empty``/``Dead``: another rebalance
    began or the group is gone, and the SyncGroup will say so. Anything else
    (``CompletingRebalance``, tansu's ``Unknown``/``Assigning`` while forming) means waiting.
    """
    return state.replace("_", "").lower() in _DONE


def _follower_sync_group(request: Any) -> str | None:
    """The group of a follower's SyncGroup (one with no assignments), else None."""
    if not isinstance(request, SyncGroupRequest):
        return None
    if getattr(request, "_group_assignment", True):  # a leader's (or an unknown shape): send as is
        return None
    group = getattr(request, "_group", None)
    return group if isinstance(group, str) else None


def _shape_ok() -> bool:
    probe = SyncGroupRequest("g", 1, "m", None, [])
    return getattr(probe, "_group", None) == "g" and getattr(probe, "_group_assignment", None) == []


def _members(group: Any) -> frozenset[str]:
    members = group[5] if len(group) > 5 else ()
    return frozenset(str(m[0]) for m in members or ())


async def _wait_for_leader(send: Any, node_id: int, group_id: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    pause = FIRST_POLL_S
    joined: frozenset[str] | None = None  # the generation's members, as first described
    while True:
        try:
            response = await send(node_id, DescribeGroupsRequest([group_id]), group=ConnectionGroup.COORDINATION)
            group = response.groups[0]
            error_code, state, members = group[0], group[2], _members(group)
        except Exception as exc:  # any failure (an ACL, a cut, an odd answer) ends the wait: SyncGroup meets it
            log.debug("group %s: describing it before SyncGroup failed (%r): syncing now", group_id, exc)
            return
        if error_code != 0 or leader_synced(state):
            return
        if joined is None:
            joined = members
        elif members != joined:  # a member left or joined: another rebalance began (tansu says "forming" for both)
            return
        if time.monotonic() + pause > deadline:
            log.debug(
                "group %s: the leader's plan is not in after %.1fs (state %s): syncing now", group_id, limit_s, state
            )
            return
        await asyncio.sleep(pause)
        pause = min(pause * 2, MAX_POLL_S)


async def polling_coordinator(send: Any, node_id: int) -> bool:
    """Whether the coordinator at ``node_id`` answers an early follower by polling: the tansu dev broker,
    known by its cluster id in a Metadata answer (no topics asked). A failure says no: followers then sync
    at once, as aiokafka does."""
    try:
        response = await send(node_id, MetadataRequest([]), group=ConnectionGroup.COORDINATION)
    except Exception as exc:  # a cut, an ACL: the SyncGroup meets it
        log.debug("asking coordinator %s for the cluster id failed (%r): followers sync at once", node_id, exc)
        return False
    return getattr(response, "cluster_id", None) == DEV_BROKER_CLUSTER_ID


def install(consumer: Any, limit_s: float = MAX_WAIT_S) -> bool:
    """Make ``consumer`` (an AIOKafkaConsumer, before ``start``) wait for the leader's plan before
    a follower's SyncGroup, for at most ``limit_s``, where its coordinator is the dev broker's. False, with a debug line, if aiokafka's shape
    is not the one this relies on (the consumer then syncs at once)."""
    client: Any = getattr(consumer, "_client", None)
    original = getattr(client, "send", None)
    if original is None or not _shape_ok():
        log.debug("aiokafka's client or SyncGroupRequest changed shape: followers sync at once")
        return False

    polling: list[bool] = []  # decided at the first follower SyncGroup: the dev broker's coordinator or not

    async def send(node_id: Any, request: Any, *, group: Any = ConnectionGroup.DEFAULT) -> Any:
        group_id = _follower_sync_group(request)
        if group_id is not None:
            if not polling:
                polling.append(await polling_coordinator(original, node_id))
            if polling[0]:
                await _wait_for_leader(original, node_id, group_id, limit_s)
        return await original(node_id, request, group=group)

    client.send = send
    return True
