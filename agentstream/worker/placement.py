"""Where each partition number's task goes: the group leader's plan (Kafka Streams' KIP-441
HighAvailabilityTaskAssignor, for partition numbers).

Pure functions over what the members reported: no I/O, so they are tested directly.

* **Balanced and sticky** (:func:`balanced`): every member gets ``partitions // members`` numbers
  (the members that owned the most keep the extra ones), and a number stays with its previous
  owner when that keeps the balance.
* **Lag-aware** (:func:`place`): for a stateful app, an active task moves only to a member whose
  copy of its state is caught up (changelog lag <= ``acceptable_recovery_lag``). When the balanced
  plan wants to move a number to a member that is not caught up, the number stays with a
  caught-up member (its previous owner first) and the wanted member gets a **warm-up** replica of
  it (at most ``max_warmup_replicas`` in the whole group), restored like a standby. Once a warm-up
  is caught up, its member asks for a *probing* rebalance and the plan hands it the active task.
  A number no member is caught up on goes where balance says (someone has to restore it).
* **Standbys** go to members other than the owner, on another rack (host) first, then to members
  that hold state for the number, then to the least loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Placement", "balanced", "place"]

Lags = Mapping[str, Mapping[int, int | None]]  # member -> partition number -> changelog lag (None: unknown)


@dataclass
class Placement:
    """The plan: active, standby and warm-up partition numbers per member."""

    active: dict[str, list[int]]
    standby: dict[str, list[int]] = field(default_factory=dict)
    warmup: dict[str, list[int]] = field(default_factory=dict)


def balanced(partitions: int, members: Sequence[str], previous: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
    """Balanced, sticky active assignment of ``range(partitions)``."""
    members = sorted(members)
    n = len(members)
    active: dict[str, list[int]] = {m: [] for m in members}
    if n == 0:
        return active
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
    return {m: sorted(ps) for m, ps in active.items()}


def _caught_up(lags: Lags, member: str, p: int, acceptable: int) -> bool:
    lag = lags.get(member, {}).get(p)
    return lag is not None and lag <= acceptable


def place(
    partitions: int,
    members: Sequence[str],
    previous: Mapping[str, Sequence[int]],
    *,
    standby_replicas: int = 0,
    lags: Lags | None = None,
    acceptable_recovery_lag: int = 10_000,
    max_warmup_replicas: int = 2,
    racks: Mapping[str, str] | None = None,
) -> Placement:
    """The plan for ``range(partitions)`` over ``members``. ``lags``: None for a stateless app
    (every member is caught up on everything); else each member's changelog lag per partition
    number it holds state for (None: state of unknown lag, which does not count as caught up)."""
    members = sorted(members)
    target = balanced(partitions, members, previous)
    if not members:
        return Placement(target)
    owner = {p: m for m, ps in target.items() for p in ps}
    warmup: dict[str, list[int]] = {m: [] for m in members}
    if lags is not None and max_warmup_replicas > 0:  # 0: tasks move at once (and restore there)
        prev_owner = {p: m for m, ps in previous.items() if m in target for p in ps}
        count = {m: len(ps) for m, ps in target.items()}
        budget = max_warmup_replicas
        for p in range(partitions):
            wanted = owner[p]
            ready = [m for m in members if _caught_up(lags, m, p, acceptable_recovery_lag)]
            if not ready or wanted in ready:
                continue
            keeper = prev_owner.get(p)
            if keeper is None or keeper not in ready:
                keeper = min(ready, key=lambda m, p=p: (lags[m].get(p) or 0, count[m], m))  # type: ignore[misc]
            owner[p] = keeper
            count[keeper] += 1
            count[wanted] -= 1
            if budget > 0:
                warmup[wanted].append(p)
                budget -= 1
    active: dict[str, list[int]] = {m: [] for m in members}
    for p, m in sorted(owner.items()):
        active[m].append(p)
    standby = _standbys(partitions, members, owner, warmup, standby_replicas, lags, racks or {})
    return Placement(active, standby, warmup)


def _standbys(
    partitions: int,
    members: list[str],
    owner: Mapping[int, str],
    warmup: Mapping[str, list[int]],
    replicas: int,
    lags: Lags | None,
    racks: Mapping[str, str],
) -> dict[str, list[int]]:
    standby: dict[str, list[int]] = {m: [] for m in members}
    if replicas <= 0 or len(members) < 2:
        return standby
    n = len(members)
    for p in range(partitions):
        used_racks = {racks.get(owner[p], owner[p])}
        candidates = [m for m in members if m != owner[p] and p not in warmup.get(m, ())]
        # round-robin from the owner: the old spread, when nothing else decides
        start = members.index(owner[p])
        order = {m: (members.index(m) - start) % n for m in members}
        for _ in range(min(replicas, len(candidates))):
            ranks = {m: _standby_rank(m, p, used_racks, racks, lags, standby, order) for m in candidates}
            chosen = min(candidates, key=ranks.__getitem__)
            standby[chosen].append(p)
            candidates.remove(chosen)
            used_racks.add(racks.get(chosen, chosen))
    return standby


def _standby_rank(
    m: str,
    p: int,
    used_racks: set[str],
    racks: Mapping[str, str],
    lags: Lags | None,
    standby: Mapping[str, list[int]],
    order: Mapping[str, int],
) -> tuple[int, int, int, int]:
    """Another rack first, then a member holding state for ``p``, then the least loaded."""
    other_rack = 0 if racks.get(m, m) not in used_racks else 1
    has_state = 0 if lags is not None and p in lags.get(m, {}) else 1
    return (other_rack, has_state, len(standby[m]), order[m])
