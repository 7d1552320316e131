"""Partition-number assignment: balanced, sticky, co-partitioned, with standbys."""

from __future__ import annotations

import json
import logging

import pytest

from agentstream.transport.base import TP, MemberInfo
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


# -- issue 45 finding 1: one member's malformed user data never stops the leader ------------------------

MALFORMED = [
    b"[1, 2]",  # a JSON list
    b'{"prev": 5}',
    b'{"prev": ["x"]}',
    b'{"prev": [true]}',
    b'{"lags": {"0": Infinity}}',
    b'{"lags": {"0": NaN}}',
    b'{"lags": {"0": 1e400}}',
    b'{"lags": {"0": -5}}',  # would count as caught up
    b'{"lags": {"x": 0}}',
    b'{"lags": [0]}',
    b'{"host": 7}',
    b'{"rack": {"a": 1}}',
    b'{"prev": [' + b"9" * 5000 + b"]}",
    b"[" * 100_000 + b"]" * 100_000,  # deeply nested
    b'{"a": ' * 5000 + b"1" + b"}" * 5000,
    b"\xff\xfe not utf-8",
    b"{" + b" " * (2 << 20) + b"}",  # over the size bound
]


def _stateful(host: str, lags: dict[int, int | None], prev: list[int]) -> PartitionNumberAssignor:
    a = PartitionNumberAssignor(host=host, acceptable_recovery_lag=10, max_warmup_replicas=2)
    a.lags = lambda: lags
    a.previous = prev
    return a


@pytest.mark.parametrize("bad", MALFORMED, ids=range(len(MALFORMED)))
def test_a_member_with_malformed_user_data_gets_nothing_and_the_plan_goes_on(
    bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    leader = _stateful("h1:1", {0: 0, 1: 0, 2: 0, 3: 0}, [0, 1, 2, 3])
    members = [
        MemberInfo("good", frozenset({"x"}), leader.member_user_data()),
        MemberInfo("rogue", frozenset({"x"}), bad),
    ]
    with caplog.at_level(logging.WARNING, logger="agentstream.worker.assignor"):
        result = leader.assign({"x": 4}, members)
    # every partition is assigned once; the good member's caught-up state keeps all of them active
    # (the rogue, planned as holding nothing, only warms up)
    numbers = sorted(tp.partition for tps, _ in result.values() for tp in tps)
    assert numbers == [0, 1, 2, 3]
    assert {tp.partition for tp in result["good"][0]} == {0, 1, 2, 3}
    assert json.loads(result["rogue"][1])["warmup"] == [2, 3]
    assert leader.malformed_members == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "rogue" in warnings[0], warnings


def test_a_negative_lag_no_longer_counts_as_caught_up() -> None:
    leader = _stateful("h1:1", {}, [])
    rogue = json.dumps({"host": "h2:2", "prev": [], "lags": {"0": -1, "1": -1}}).encode()
    honest = _stateful("h3:3", {0: 5, 1: 5}, []).member_user_data()
    members = [
        MemberInfo("a", frozenset({"x"}), leader.member_user_data()),
        MemberInfo("b", frozenset({"x"}), honest),
        MemberInfo("c", frozenset({"x"}), rogue),
    ]
    result = leader.assign({"x": 2}, members)
    # partitions with state somewhere caught up go to that member: b, never the rogue c
    assert {tp.partition for tp in result["b"][0]} == {0, 1}
    assert result["c"][0] == []


@pytest.mark.parametrize(
    "bad", MALFORMED + [b'{"active": [1, "x"]}', b'{"owners": {"1": 5}}'], ids=range(len(MALFORMED) + 2)
)
def test_a_malformed_assignment_from_the_leader_falls_back_to_the_assigned_partitions(bad: bytes) -> None:
    a = PartitionNumberAssignor(host="h:1")
    a.on_assignment([TP("x", 2), TP("y", 2), TP("x", 0)], bad)
    assert a.assignment.active == [0, 2] and a.assignment.standby == [] and a.assignment.owners == {}
    assert json.loads(a.member_user_data())["prev"] == [0, 2]
