"""A follower's SyncGroup waits for the leader's plan (transport/kafka/follower_sync.py).

A fake aiokafka client stands in for the coordinator: it answers DescribeGroups with the states
a test scripts and records what was sent, in order. The broker-level effect (a follower synced
only after the leader on the dev broker) is in tests/integration/test_kafka_transport.py.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.admin import DescribeGroupsRequest  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.group import SyncGroupRequest  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.metadata import MetadataRequest  # type: ignore[import-untyped,unused-ignore]

from agentstream.transport.kafka.follower_sync import install, leader_synced

Described = str | tuple[str, list[str]] | Exception  # a state, a state and its members, a failure


class FakeClient:
    """The coordinator; by default the dev broker's (tansu's cluster id), where followers wait."""

    def __init__(
        self, states: list[Described], error_code: int = 0, cluster_id: str | Exception = "tansu_cluster"
    ) -> None:
        self.states = list(states)
        self.error_code = error_code
        self.cluster_id = cluster_id
        self.sent: list[str] = []
        self.probes = 0  # Metadata requests (the cluster id)

    async def send(self, node_id: Any, request: Any, *, group: Any = None) -> Any:
        if isinstance(request, MetadataRequest):
            self.probes += 1
            if isinstance(self.cluster_id, Exception):
                raise self.cluster_id
            return SimpleNamespace(cluster_id=self.cluster_id, brokers=[], topics=[])
        if isinstance(request, DescribeGroupsRequest):
            described = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            if isinstance(described, Exception):
                self.sent.append("describe:failed")
                raise described
            state, members = described if isinstance(described, tuple) else (described, ["member-1", "member-2"])
            self.sent.append(f"describe:{state}")
            rows = [(m, "client", "host", b"", b"") for m in members]
            return SimpleNamespace(groups=[(self.error_code, "g", state, "consumer", "", rows)])
        self.sent.append(type(request).__name__)
        return "answer"


def consumer_with(client: FakeClient, limit_s: float = 5.0) -> FakeClient:
    assert install(SimpleNamespace(_client=client), limit_s)
    return client


def follower_sync() -> Any:
    return SyncGroupRequest("g", 3, "member-2", None, [])


@pytest.mark.parametrize(
    ("state", "done"),
    [
        ("Stable", True),
        ("PreparingRebalance", True),
        ("Empty", True),
        ("Dead", True),
        ("CompletingRebalance", False),
        ("AwaitingSync", False),
        ("Unknown", False),  # tansu, forming with a leader
        ("Assigning", False),  # tansu, forming without one
    ],
)
def test_which_states_end_the_wait(state: str, done: bool) -> None:
    assert leader_synced(state) is done


async def test_a_follower_syncs_once_the_group_is_stable() -> None:
    client = consumer_with(FakeClient(["CompletingRebalance", "CompletingRebalance", "Stable"]))
    assert await client.send(1, follower_sync()) == "answer"
    assert client.sent == [
        "describe:CompletingRebalance",
        "describe:CompletingRebalance",
        "describe:Stable",
        "SyncGroupRequest",
    ]


async def test_a_leader_syncs_at_once() -> None:
    client = consumer_with(FakeClient(["CompletingRebalance"]))
    await client.send(1, SyncGroupRequest("g", 3, "member-1", None, [("member-1", b"plan")]))
    assert client.sent == ["SyncGroupRequest"]


async def test_other_requests_are_untouched() -> None:
    client = consumer_with(FakeClient(["CompletingRebalance"]))
    await client.send(1, DescribeGroupsRequest(["other"]))
    assert client.sent == ["describe:CompletingRebalance"]


async def test_a_new_rebalance_ends_the_wait() -> None:
    client = consumer_with(FakeClient(["CompletingRebalance", "PreparingRebalance", "Stable"]))
    await client.send(1, follower_sync())
    assert client.sent[-2:] == ["describe:PreparingRebalance", "SyncGroupRequest"]


async def test_a_change_in_the_members_ends_the_wait() -> None:
    """tansu calls a group "forming" until the leader's plan is in, and again once a member leaves or
    joins: then the plan for this generation will not come."""
    left = ("Unknown", ["member-2"])
    client = consumer_with(FakeClient(["Unknown", "Unknown", left, "Stable"]))
    await client.send(1, follower_sync())
    assert client.sent == ["describe:Unknown", "describe:Unknown", "describe:Unknown", "SyncGroupRequest"]


async def test_a_describe_error_or_failure_ends_the_wait() -> None:
    denied = consumer_with(FakeClient(["CompletingRebalance"], error_code=30))  # group authorization failed
    await denied.send(1, follower_sync())
    assert denied.sent == ["describe:CompletingRebalance", "SyncGroupRequest"]

    lost = consumer_with(FakeClient([KafkaConnectionError("cut")]))
    await lost.send(1, follower_sync())
    assert lost.sent == ["describe:failed", "SyncGroupRequest"]


async def test_the_wait_is_bounded() -> None:
    client = consumer_with(FakeClient(["CompletingRebalance"]), limit_s=0.05)
    await client.send(1, follower_sync())
    describes = [s for s in client.sent if s.startswith("describe")]
    assert client.sent[-1] == "SyncGroupRequest"
    assert 1 < len(describes) < 10  # polled, backing off, and gave up at the limit


def test_install_leaves_an_unknown_shape_alone() -> None:
    assert install(SimpleNamespace(), 5.0) is False  # no client: nothing hooked


async def test_on_kafka_a_follower_syncs_at_once_and_the_cluster_is_asked_once() -> None:
    """Kafka's coordinator holds an early follower's SyncGroup until the leader's plan is in: waiting
    there only costs (issue 39's soak on a 3-broker cluster), so followers not on the dev broker sync at
    once; the cluster id is asked once per consumer."""
    client = consumer_with(FakeClient(["CompletingRebalance"], cluster_id="0wW_R00XSs6Dm9cE3CZLvQ"))
    await client.send(1, follower_sync())
    await client.send(1, follower_sync())  # a later rebalance
    assert client.sent == ["SyncGroupRequest", "SyncGroupRequest"]
    assert client.probes == 1


async def test_on_the_dev_broker_the_cluster_is_asked_once_too() -> None:
    client = consumer_with(FakeClient(["Stable"]))
    await client.send(1, follower_sync())
    await client.send(1, follower_sync())
    assert client.sent == ["describe:Stable", "SyncGroupRequest"] * 2
    assert client.probes == 1


async def test_a_failed_cluster_id_request_means_syncing_at_once() -> None:
    client = consumer_with(FakeClient(["CompletingRebalance"], cluster_id=KafkaConnectionError("cut")))
    await client.send(1, follower_sync())
    assert client.sent == ["SyncGroupRequest"]
