"""The task's choice of the next record: lowest head timestamp, and max_task_idle."""

from __future__ import annotations

from agentstream.transport.base import TP
from agentstream.transport.message import Message
from agentstream.worker.partition_group import PartitionGroup, RecordQueue, Wait

A, B = TP("a", 0), TP("b", 0)


def rec(tp: TP, offset: int, ts: int) -> Message:
    return Message(tp.topic, tp.partition, offset, ts, 0, None, b"x", None, -1, 1, ())


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drain(group: PartitionGroup) -> list[tuple[str, int]]:
    out = []
    while True:
        item = group.next()
        if item is None or isinstance(item, Wait):
            return out
        out.append((item.topic, item.timestamp_ms))


def test_lowest_head_timestamp_first_across_partitions() -> None:
    g = PartitionGroup([A, B])
    g.add(A, [rec(A, 0, 10), rec(A, 1, 30), rec(A, 2, 50)])
    g.add(B, [rec(B, 0, 20), rec(B, 1, 40), rec(B, 2, 60)])
    assert drain(g) == [("a", 10), ("b", 20), ("a", 30), ("b", 40), ("a", 50), ("b", 60)]


def test_order_within_a_partition_is_kept_even_when_timestamps_go_back() -> None:
    g = PartitionGroup([A, B])
    g.add(A, [rec(A, 0, 50), rec(A, 1, 5)])
    g.add(B, [rec(B, 0, 20)])
    # a's head is 50, so b's 20 goes first; a's out-of-order 5 still comes after a's 50
    assert drain(g) == [("b", 20), ("a", 50), ("a", 5)]


def test_ties_are_broken_by_partition_order_deterministically() -> None:
    g = PartitionGroup([B, A])
    g.add(A, [rec(A, 0, 10)])
    g.add(B, [rec(B, 0, 10)])
    assert drain(g) == [("a", 10), ("b", 10)]


def test_empty_but_lagging_input_waits_up_to_max_task_idle_then_goes_on() -> None:
    clock = Clock()
    lagging = {B}
    g = PartitionGroup([A, B], max_task_idle=2.0, lagging=lambda q: q.tp in lagging, clock=clock)
    g.add(A, [rec(A, 0, 10), rec(A, 1, 20)])
    first = g.next()
    assert isinstance(first, Wait) and first.seconds == 2.0
    clock.now += 1.5
    second = g.next()
    assert isinstance(second, Wait) and abs(second.seconds - 0.5) < 1e-9
    clock.now += 0.5
    item = g.next()
    assert not isinstance(item, Wait) and item is not None and item.timestamp_ms == 10
    assert g.enforced == 1


def test_lagging_input_that_delivers_in_time_keeps_timestamp_order() -> None:
    clock = Clock()
    g = PartitionGroup([A, B], max_task_idle=5.0, lagging=lambda q: True, clock=clock)
    g.add(A, [rec(A, 0, 30)])
    assert isinstance(g.next(), Wait)
    clock.now += 1.0
    g.add(B, [rec(B, 0, 10)])  # the lagging input's older record arrives within max_task_idle
    assert drain(g)[:1] == [("b", 10)]


def test_empty_input_without_lag_never_waits() -> None:
    g = PartitionGroup([A, B], max_task_idle=5.0, lagging=lambda q: False)
    g.add(A, [rec(A, 0, 30)])
    assert drain(g) == [("a", 30)]


def test_max_task_idle_zero_does_not_wait_for_an_input_of_unknown_lag() -> None:
    g = PartitionGroup([A, B], max_task_idle=0.0, lagging=lambda q: None)
    g.add(A, [rec(A, 0, 30)])
    assert drain(g) == [("a", 30)]


def test_nothing_buffered_returns_none() -> None:
    assert PartitionGroup([A]).next() is None
    assert PartitionGroup([A, B]).next() is None


def test_queue_tracks_next_offset() -> None:
    q = RecordQueue(A)
    assert q.next_offset is None
    q.add([rec(A, 7, 1), rec(A, 8, 1)])
    assert q.next_offset == 9 and len(q) == 2


def test_max_task_idle_zero_still_waits_for_the_fetch_of_a_partition_with_known_lag() -> None:
    """KIP-695: 0 means no *extra* idling, but an input the broker has records for (known lag) is
    waited for until its fetch lands; an input whose lag is unknown is not."""
    from agentstream.worker.partition_group import PartitionGroup, Wait

    a, b = TP("a", 0), TP("b", 0)
    known: dict[TP, bool | None] = {b: True}
    group = PartitionGroup([a, b], max_task_idle=0.0, lagging=lambda q: known.get(q.tp))
    group.add(a, [rec(a, 0, 10)])
    assert isinstance(group.next(), Wait)  # b has records on the broker: wait for its fetch
    known[b] = None  # lag not known (no fetch answered yet): go on
    got = group.next()
    assert not isinstance(got, Wait) and got is not None
