"""Partition-number assignment: balanced, sticky, co-partitioned, with standbys."""

from __future__ import annotations

import json

from agentstream.transport.base import MemberInfo
from agentstream.worker.assignor import PartitionNumberAssignor, plan


def test_balanced_and_complete() -> None:
    active, _ = plan(8, ["m3", "m1", "m2"], {})
    sizes = sorted(len(v) for v in active.values())
    assert sizes == [2, 3, 3]
    assert sorted(p for v in active.values() for p in v) == list(range(8))


def test_sticky_when_a_member_joins() -> None:
    before, _ = plan(4, ["a"], {})
    after, _ = plan(4, ["a", "b"], {"a": before["a"]})
    assert set(after["a"]) <= set(before["a"]) and len(after["a"]) == 2 and len(after["b"]) == 2


def test_sticky_when_a_member_leaves() -> None:
    before, _ = plan(6, ["a", "b", "c"], {})
    after, _ = plan(6, ["a", "b"], {"a": before["a"], "b": before["b"]})
    assert set(before["a"]) <= set(after["a"]) and set(before["b"]) <= set(after["b"])


def test_standby_never_on_the_owner() -> None:
    active, standby = plan(4, ["a", "b", "c"], {}, standby_replicas=1)
    for m, ps in standby.items():
        assert not set(ps) & set(active[m])
    assert sorted(p for ps in standby.values() for p in ps) == [0, 1, 2, 3]


def test_same_partition_number_of_every_topic_goes_to_one_member() -> None:
    a = PartitionNumberAssignor(host="h1:1")
    members = [
        MemberInfo("m1", frozenset({"x", "y"}), a.member_user_data()),
        MemberInfo("m2", frozenset({"x", "y"}), PartitionNumberAssignor(host="h2:2").member_user_data()),
    ]
    result = a.assign({"x": 4, "y": 4, "other": 9}, members)
    for _member, (tps, data) in result.items():
        numbers = {tp.partition for tp in tps if tp.topic == "x"}
        assert numbers == {tp.partition for tp in tps if tp.topic == "y"}
        assert all(tp.topic != "other" for tp in tps)
        info = json.loads(data)
        assert info["active"] == sorted(numbers)
        assert set(info["owners"].values()) == {"h1:1", "h2:2"}


def test_on_assignment_remembers_previous_for_stickiness() -> None:
    a = PartitionNumberAssignor(host="h:1")
    a.on_assignment([], json.dumps({"active": [1, 3], "standby": [0], "owners": {"1": "h:1"}}).encode())
    assert a.assignment.active == [1, 3] and a.assignment.standby == [0]
    assert json.loads(a.member_user_data())["prev"] == [1, 3]
