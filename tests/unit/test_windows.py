"""Window assignment, edges, grace, expiry, and windowed-key ordering."""

from __future__ import annotations

import random

import pytest

from agentstream.tables.store import MemoryStore
from agentstream.tables.windows import (
    HoppingWindow,
    TumblingWindow,
    parse_window_key,
    window_key,
    window_key_range,
)


def test_tumbling_assignment_and_edges() -> None:
    w = TumblingWindow(10)
    assert w.ranges(0) == [(0.0, 10.0)]
    assert w.ranges(9.999) == [(0.0, 10.0)]
    assert w.ranges(10.0) == [(10.0, 20.0)]  # end is exclusive: the edge opens the next window
    assert w.ranges(1_700_000_005.5) == [(1_700_000_000.0, 1_700_000_010.0)]
    assert w.current(25) == w.earliest(25) == (20.0, 30.0)


def test_hopping_assignment_and_edges() -> None:
    w = HoppingWindow(size=10, step=5)
    assert w.ranges(12) == [(5.0, 15.0), (10.0, 20.0)]
    assert w.ranges(15) == [(10.0, 20.0), (15.0, 25.0)]  # [5, 15) no longer contains 15
    assert w.ranges(14.999) == [(5.0, 15.0), (10.0, 20.0)]
    assert w.current(12) == (10.0, 20.0)
    assert w.earliest(12) == (5.0, 15.0)
    # windows never start before epoch 0 (Kafka Streams)
    assert w.ranges(3) == [(0.0, 10.0)]
    w3 = HoppingWindow(size=10, step=3)
    assert w3.ranges(20) == [(12.0, 22.0), (15.0, 25.0), (18.0, 28.0)]
    assert w3.ranges(21) == [(12.0, 22.0), (15.0, 25.0), (18.0, 28.0), (21.0, 31.0)]


def test_every_timestamp_is_in_size_over_step_windows() -> None:
    rng = random.Random(0)
    w = HoppingWindow(size=60, step=15)
    for _ in range(500):
        ts = rng.uniform(100, 10_000)
        rs = w.ranges(ts)
        assert len(rs) == 4
        assert all(s <= round(ts, 3) < e and e - s == 60 for s, e in rs)


def test_float_steps_use_millisecond_arithmetic() -> None:
    w = TumblingWindow(0.1)
    assert w.ranges(0.3) == [(0.3, 0.4)]  # 0.3 / 0.1 == 2.9999999999999996 in floats
    assert TumblingWindow(1).ranges(1.001) == [(1.0, 2.0)]


def test_delta_and_negative_timestamps() -> None:
    w = TumblingWindow(60)
    assert w.delta(3600 + 30, 3600) == (0.0, 60.0)
    assert w.ranges(-1) == []
    with pytest.raises(ValueError):
        w.current(-1)


@pytest.mark.parametrize(("size", "step"), [(0, 0), (10, 11), (10, 0), (0.0001, 0.0001)])
def test_invalid_windows(size: float, step: float) -> None:
    with pytest.raises(ValueError):
        HoppingWindow(size, step)


def test_closed_and_stale_with_grace() -> None:
    w = HoppingWindow(size=10, step=5)
    assert not w.closed(20, stream_time=19.999)
    assert w.closed(20, stream_time=20)  # stream_time >= end + grace
    assert not w.closed(20, stream_time=21, grace=2)
    assert w.closed(20, stream_time=22, grace=2)
    # ts 12 is in [5,15) and [10,20): late only once the later one, [10,20), has closed
    assert not w.stale(12, stream_time=15)  # [5,15) closed, [10,20) still open
    assert not w.stale(12, stream_time=19.999)
    assert w.stale(12, stream_time=20)
    assert not w.stale(12, stream_time=24, grace=5)
    assert w.stale(12, stream_time=25, grace=5)
    assert w.stale(-1, stream_time=0)


def test_expiry_defaults_to_size_and_never_precedes_close() -> None:
    w = TumblingWindow(10)
    assert w.expires == 10
    assert not w.expired(10, stream_time=19.999)
    assert w.expired(10, stream_time=20)  # end + expires <= stream_time
    w2 = TumblingWindow(10, expires=3600)
    assert not w2.expired(10, stream_time=3609)
    assert w2.expired(10, stream_time=3610)
    # grace longer than expires: keep the window until it is closed
    assert not w.expired(10, stream_time=20, grace=30)
    assert w.expired(10, stream_time=40, grace=30)
    assert w.closed(10, stream_time=40, grace=30)


def test_window_key_roundtrip() -> None:
    for key in (b"", b"a", b"\x00\xff" * 5, bytes(range(256))):
        for start in (0.0, 1.5, 1_700_000_000.123, -5.0):
            assert parse_window_key(window_key(key, start)) == (key, start)
    for junk in (b"", b"\x00\x00\x00\x05abc", window_key(b"ab", 1) + b"x"):
        with pytest.raises(ValueError):
            parse_window_key(junk)


def test_window_keys_of_one_key_are_contiguous_and_sorted_by_start() -> None:
    rng = random.Random(1)
    # keys chosen to trip a naive key+start layout: prefixes of each other, embedded 0x00/0xff
    keys = [b"a", b"a\x00", b"a\x00\x00\x00\x00\x00\x00\x00\x00", b"a\xff", b"", b"b", b"\xff"]
    starts = [rng.randrange(0, 10**10) / 1000 for _ in range(20)]
    encoded = sorted(window_key(k, s) for k in keys for s in starts)
    decoded = [parse_window_key(e) for e in encoded]
    for k in keys:
        positions = [i for i, (dk, _) in enumerate(decoded) if dk == k]
        assert positions == list(range(positions[0], positions[0] + len(starts)))  # contiguous
        assert [decoded[i][1] for i in positions] == sorted(starts)


def test_window_key_range_scans_exactly_one_key() -> None:
    store = MemoryStore()
    for k in (b"a", b"a\x00", b"b", b""):
        for s in (0, 10, 20, 30):
            store.put(window_key(k, s), k + b"@%d" % s)
    lo, hi = window_key_range(b"a")
    assert [parse_window_key(k) for k, _ in store.items(lo, hi)] == [
        (b"a", 0.0),
        (b"a", 10.0),
        (b"a", 20.0),
        (b"a", 30.0),
    ]
    lo, hi = window_key_range(b"a", start_from=10, start_to=30)
    assert [v for _, v in store.items(lo, hi)] == [b"a@10", b"a@20"]


def test_sliding_window_is_one_window_around_each_timestamp() -> None:
    from agentstream.tables.windows import SlidingWindow

    w = SlidingWindow(before=5, after=2, expires=30)
    assert w.ranges(10.0) == [(5.0, 12.0)] and w.current(10.0) == w.earliest(10.0) == (5.0, 12.0)
    assert w.delta(10.0, 3) == (2.0, 9.0)
    assert not w.stale(10.0, 11.9) and w.stale(10.0, 12.0) and not w.stale(10.0, 12.0, grace=1)
    assert w.expired(12.0, 42.0) and not w.expired(12.0, 41.9)
    with pytest.raises(ValueError):
        SlidingWindow(0, 0, 10)


def test_faust_window_keys_are_faust_bytes_both_ways() -> None:
    from agentstream.tables.windows import faust_window_key, parse_faust_window_key

    # what faust-streaming 0.15 writes for ("hello", (1795392000.0, 1795478399.9)), size one day
    raw = b'["hello",[1795392000.0,1795478399.9]]'
    assert faust_window_key(b'"hello"', 1795392000.0, 86400.0) == raw
    assert parse_faust_window_key(raw) == (b'"hello"', 1795392000.0)
    assert faust_window_key(b'"k"', 120.0, 60.0) == b'["k",[120.0,179.9]]'
    for bad in (b"\xff\xff", b'"hello"', b'["a",[1]]', b"[1,2]"):
        with pytest.raises(ValueError):
            parse_faust_window_key(bad)
