"""The group leader's lag-aware plan (agentstream.worker.placement): balance, stickiness, active
tasks only on caught-up copies, bounded warm-ups, standbys on other racks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentstream.worker.placement import balanced, place

MEMBERS = st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=5, unique=True)


@st.composite
def situations(draw: st.DrawFn) -> tuple[int, list[str], dict[str, list[int]], dict[str, dict[int, int | None]], int]:
    partitions = draw(st.integers(1, 12))
    members = draw(MEMBERS)
    previous: dict[str, list[int]] = {}
    for p in range(partitions):
        owner = draw(st.sampled_from([*members, None]))
        if owner is not None:
            previous.setdefault(owner, []).append(p)
    lags = {
        m: draw(st.dictionaries(st.integers(0, partitions - 1), st.one_of(st.none(), st.integers(0, 50_000))))
        for m in members
    }
    return partitions, members, previous, lags, draw(st.integers(0, 3))


@settings(max_examples=300, deadline=None)
@given(situations(), st.integers(0, 3))
def test_every_number_has_one_active_and_warmups_and_standbys_never_overlap_it(
    case: tuple[int, list[str], dict[str, list[int]], dict[str, dict[int, int | None]], int], standbys: int
) -> None:
    partitions, members, previous, lags, warmups = case
    plan = place(partitions, members, previous, standby_replicas=standbys, lags=lags, max_warmup_replicas=warmups)
    owners = [p for ps in plan.active.values() for p in ps]
    assert sorted(owners) == list(range(partitions))
    assert sum(len(w) for w in plan.warmup.values()) <= warmups
    for m in members:
        mine = set(plan.active[m])
        assert not mine & set(plan.standby[m]) and not mine & set(plan.warmup[m])
        assert not set(plan.standby[m]) & set(plan.warmup[m])
    for p in range(partitions):
        copies = sum(p in plan.standby[m] for m in members)
        assert copies == min(standbys, len(members) - 1 - sum(p in plan.warmup[m] for m in members))


@settings(max_examples=300, deadline=None)
@given(situations())
def test_an_active_moves_only_to_a_caught_up_copy_when_one_exists(
    case: tuple[int, list[str], dict[str, list[int]], dict[str, dict[int, int | None]], int],
) -> None:
    partitions, members, previous, lags, warmups = case
    plan = place(partitions, members, previous, lags=lags, max_warmup_replicas=max(1, warmups))
    for m, ps in plan.active.items():
        for p in ps:
            ready = [x for x in members if (lag := lags[x].get(p)) is not None and lag <= 10_000]
            assert not ready or m in ready, (p, m, ready)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 16), MEMBERS)
def test_balanced_when_everyone_is_caught_up(partitions: int, members: list[str]) -> None:
    lags = {m: dict.fromkeys(range(partitions), 0) for m in members}
    plan = place(partitions, members, {}, lags=lags)
    sizes = [len(ps) for ps in plan.active.values()]
    assert max(sizes) - min(sizes) <= 1 and not any(plan.warmup.values())


def test_a_newcomer_gets_warmups_first_and_the_actives_once_caught_up() -> None:
    """The scale-out: a owns 0-3 and is caught up; b joins with nothing."""
    before = {"a": [0, 1, 2, 3]}
    lags: dict[str, dict[int, int | None]] = {"a": dict.fromkeys(range(4), 0), "b": {}}
    first = place(4, ["a", "b"], before, lags=lags, max_warmup_replicas=2)
    assert first.active == {"a": [0, 1, 2, 3], "b": []}  # nothing moves to an empty copy
    assert first.warmup == {"a": [], "b": [2, 3]}  # b restores the two it will take
    lags["b"] = {2: 50_000, 3: 50_000}  # still restoring: the probing plan changes nothing
    assert place(4, ["a", "b"], first.active, lags=lags).active == first.active
    lags["b"] = {2: 120, 3: 0}  # caught up (<= acceptable_recovery_lag)
    second = place(4, ["a", "b"], {"a": [0, 1, 2, 3], "b": []}, lags=lags)
    assert second.active == {"a": [0, 1], "b": [2, 3]} and not any(second.warmup.values())


def test_warmups_are_bounded_and_zero_moves_at_once() -> None:
    lags: dict[str, dict[int, int | None]] = {"a": dict.fromkeys(range(8), 0), "b": {}}
    assert sum(map(len, place(8, ["a", "b"], {"a": list(range(8))}, lags=lags).warmup.values())) == 2
    at_once = place(8, ["a", "b"], {"a": list(range(8))}, lags=lags, max_warmup_replicas=0)
    assert at_once.active == balanced(8, ["a", "b"], {"a": list(range(8))}) and not any(at_once.warmup.values())


def test_numbers_nobody_is_caught_up_on_go_where_balance_says() -> None:
    """A fresh app (no state anywhere): someone must restore it, so balance decides."""
    plan = place(4, ["a", "b"], {}, lags={"a": {}, "b": {}})
    assert plan.active == balanced(4, ["a", "b"], {}) and not any(plan.warmup.values())


def test_stateless_apps_move_at_once() -> None:
    plan = place(4, ["a", "b"], {"a": [0, 1, 2, 3]}, lags=None)
    assert plan.active == {"a": [0, 1], "b": [2, 3]} and not any(plan.warmup.values())


def test_standbys_prefer_another_rack() -> None:
    racks = {"a": "r1", "b": "r1", "c": "r2"}
    plan = place(3, ["a", "b", "c"], {}, standby_replicas=1, racks=racks)
    for p, owner in {p: m for m, ps in plan.active.items() for p in ps}.items():
        (holder,) = [m for m in "abc" if p in plan.standby[m]]
        if racks[owner] == "r1":
            assert holder == "c", (p, owner, plan)
        else:
            assert racks[holder] == "r1"
