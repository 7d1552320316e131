"""Windowed tables on whole apps (memory transport): window assignment, reads, grace, expiry,
close callbacks, restore after a restart, and the pageviews example app."""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.tables.windows import parse_window_key
from agentstream.testing import AppHarness
from agentstream.transport.memory import MemoryTransport
from agentstream.transport.partitioner import default_partition
from tests.support.workers import run_worker

pytestmark = pytest.mark.asyncio

Window = tuple[float, float]


def windows_of(ts: float, size: float, step: float) -> list[Window]:
    """Every [start, start + size) with start a non-negative multiple of step containing ts (brute force)."""
    out = []
    start = 0.0
    while start <= ts:
        if start <= ts < start + size:
            out.append((start, start + size))
        start += step
    return out


def counting_app(
    name: str,
    *,
    size: float = 10.0,
    step: float | None = None,
    expires: float | None = None,
    grace: float = 0.0,
    partitions: int = 1,
    **table_kwargs: Any,
) -> tuple[Any, Any]:
    """An app counting `events` per key in a windowed table `counts` (time = record timestamp)."""
    app = agentstream.App(f"{name}-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=partitions)
    topic = app.topic("events", key_type=str, value_type=dict)
    table = app.Table("counts", default=int, **table_kwargs)
    wt = table.tumbling(size, expires, grace=grace) if step is None else table.hopping(size, step, expires, grace=grace)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    return app, wt


def changelog(app: Any, table: str) -> list[tuple[tuple[str, float], bytes | None]]:
    """((key, window start), raw value) of every changelog record, in partition order."""
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    out = []
    for m in transport.read_topic(f"{app.id}-{table}-changelog"):
        try:
            kb, start = parse_window_key(m.key)
        except ValueError:
            continue  # not a window (the table's stream-time entry)
        out.append(((app.tables[table].key_codec.loads(kb), start), m.value))
    return out


async def test_tumbling_counts_equal_direct_computation() -> None:
    app, wt = counting_app("tumble", size=10.0, expires=1000.0, partitions=3)
    rng = random.Random(7)
    records = sorted((rng.uniform(0, 95), rng.choice("abcdefg")) for _ in range(300))
    async with AppHarness(app) as h:
        for ts, key in records:
            await h.send("events", {}, key=key, timestamp=ts)
        await h.wait_idle()
        expected = collections.Counter((k, w) for ts, k in records for w in windows_of(ts, 10.0, 10.0))
        assert wt.as_dict() == dict(expected)
        assert h.table("counts") == dict(expected)  # the plain table lists the same windows
        assert wt.late_dropped == 0


async def test_hopping_record_counts_in_every_window_containing_it() -> None:
    app, wt = counting_app("hop", size=10.0, step=2.0, expires=1000.0)
    async with AppHarness(app) as h:
        await h.send("events", {}, key="k", timestamp=25.0)
        await h.wait_idle()
        assert wt.as_dict() == {("k", w): 1 for w in windows_of(25.0, 10.0, 2.0)}
        assert len(wt.as_dict()) == 5  # size / step windows

        times = [26.0, 27.5, 30.0, 33.9, 40.0, 41.0]
        for ts in times:
            await h.send("events", {}, key="k", timestamp=ts)
        await h.wait_idle()
        expected = collections.Counter(("k", w) for ts in [25.0] + times for w in windows_of(ts, 10.0, 2.0))
        assert wt.as_dict() == dict(expected)


async def test_window_reads_inside_the_agent() -> None:
    app = agentstream.App(f"reads-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    by_stream = app.Table("by_stream", default=int).tumbling(10, expires=1000)
    by_field = app.Table("by_field", default=int).tumbling(10, expires=1000).relative_to_field("ts")
    seen: list[tuple[Any, ...]] = []

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            by_stream[event.key] += 1
            by_field[event.key] += 1
            s, f = by_stream[event.key], by_field[event.key]
            seen.append((s.current(), s.value(), s.delta(10), f.value(), f.current()))

    async with AppHarness(app) as h:
        # (record timestamp, field time): the field runs 100 s ahead of the record timestamp
        for ts in [1.0, 2.0, 3.0, 11.0, 12.0, 25.0]:
            await h.send("events", {"ts": ts + 100}, key="k", timestamp=ts)
        await h.wait_idle()
        field_windows = sorted(by_field.keys())
    assert seen == [
        # current/value: count so far in this window; delta(10): the previous window (0 if none);
        # the field table's current() reads the record-timestamp window, which it never wrote
        (1, 1, 0, 1, 0),
        (2, 2, 0, 2, 0),
        (3, 3, 0, 3, 0),
        (1, 1, 3, 1, 0),
        (2, 2, 3, 2, 0),
        (1, 1, 2, 1, 0),  # 25 - 10 = 15 is in [10, 20)
    ]
    assert field_windows == [("k", (100.0, 110.0)), ("k", (110.0, 120.0)), ("k", (120.0, 130.0))]


async def test_window_reads_without_event_need_a_time() -> None:
    app, wt = counting_app("noevent", size=10.0)
    async with AppHarness(app):
        with pytest.raises(agentstream.AgentStreamError, match="inside an agent"):
            wt["k"].current()


async def test_late_records_within_grace_count_later_ones_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    app, wt = counting_app("late", size=10.0, expires=1000.0, grace=5.0)
    # stream time after each: 1, 12, 12 (3 is within grace: [0,10) closes at 15), 16, 16, 16, 16
    times = [1.0, 12.0, 3.0, 16.0, 4.0, 9.99, 10.0]
    async with AppHarness(app) as h:
        with caplog.at_level(logging.DEBUG, logger="agentstream.tables.windowed"):
            for ts in times:
                await h.send("events", {}, key="k", timestamp=ts)
            await h.wait_idle()
        assert wt.as_dict() == {("k", (0.0, 10.0)): 2, ("k", (10.0, 20.0)): 3}
        assert wt.late_dropped == 2
    late_lines = [r for r in caplog.records if "late record" in r.getMessage()]
    assert [r.levelno for r in late_lines].count(logging.DEBUG) == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "dropped" in r.getMessage()]
    assert len(warnings) == 1  # rate-limited summary


async def test_grace_zero_closes_window_at_its_end() -> None:
    app, wt = counting_app("nograce", size=10.0, expires=1000.0)
    async with AppHarness(app) as h:
        for ts in [5.0, 10.0, 9.999]:
            await h.send("events", {}, key="k", timestamp=ts)
        await h.wait_idle()
        assert wt.as_dict() == {("k", (0.0, 10.0)): 1, ("k", (10.0, 20.0)): 1}
        assert wt.late_dropped == 1


async def test_expired_windows_are_removed_and_tombstoned() -> None:
    app, wt = counting_app("expire", size=10.0, expires=10.0)
    async with AppHarness(app) as h:
        for ts, key in [(1.0, "a"), (5.0, "b"), (15.0, "a")]:
            await h.send("events", {}, key=key, timestamp=ts)
        await h.wait_idle()
        # [0, 10) is closed but kept until stream time reaches end + expires = 20
        assert set(wt.keys()) == {("a", (0.0, 10.0)), ("b", (0.0, 10.0)), ("a", (10.0, 20.0))}
        assert all(value is not None for _, value in changelog(app, "counts"))

        await h.send("events", {}, key="c", timestamp=25.0)
        await h.wait_idle()
        assert wt.as_dict() == {("a", (10.0, 20.0)): 1, ("c", (20.0, 30.0)): 1}
        records = changelog(app, "counts")
        assert {k for k, v in records if v is None} == {("a", 0.0), ("b", 0.0)}
        latest = dict(records)  # what compaction keeps
        assert {k for k, v in latest.items() if v is not None} == {("a", 10.0), ("c", 20.0)}

        # a record for an expired window is late: it must not re-create the window from zero
        await h.send("events", {}, key="a", timestamp=2.0)
        await h.wait_idle()
        assert ("a", (0.0, 10.0)) not in wt.as_dict()
        assert wt.late_dropped == 1


async def test_window_is_not_expired_while_it_still_accepts_records() -> None:
    app, wt = counting_app("expgrace", size=10.0, expires=1.0, grace=5.0)
    async with AppHarness(app) as h:
        for ts in [1.0, 12.0, 5.0]:  # 5 is within grace: [0, 10) closes at 15, not at 10 + expires
            await h.send("events", {}, key="k", timestamp=ts)
        await h.wait_idle()
        assert wt.as_dict() == {("k", (0.0, 10.0)): 2, ("k", (10.0, 20.0)): 1}
        await h.send("events", {}, key="k", timestamp=15.0)
        await h.wait_idle()
        assert wt.as_dict() == {("k", (10.0, 20.0)): 2}


async def test_on_window_close_fires_when_the_window_expires_with_its_final_value() -> None:
    """Faust calls on_window_close when the window expires (``expires=``), not at its end."""
    closed: list[tuple[Any, Any]] = []

    def on_close(key: Any, value: Any) -> None:
        closed.append((key, value))

    app, wt = counting_app("close", size=10.0, expires=20.0, grace=2.0, on_window_close=on_close)
    async with AppHarness(app) as h:
        for ts, key in [(1.0, "a"), (2.0, "a"), (4.0, "b"), (11.0, "a"), (9.0, "a")]:
            await h.send("events", {}, key=key, timestamp=ts)
        await h.send("events", {}, key="c", timestamp=12.0)  # [0, 10) stops taking records (end + grace)
        await h.send("events", {}, key="c", timestamp=13.0)
        await h.send("events", {}, key="a", timestamp=8.0)  # late: dropped
        await h.wait_idle()
        assert closed == []  # ... but it expires only at end + expires = 30
        assert wt.late_dropped == 1
        await h.send("events", {}, key="c", timestamp=30.0)  # expires [0, 10)
        await h.wait_idle()
        assert sorted(closed) == [(("a", (0.0, 10.0)), 3), (("b", (0.0, 10.0)), 1)]
        assert ("a", (0.0, 10.0)) not in wt.as_dict()
        await h.send("events", {}, key="a", timestamp=45.0)  # expires [10, 20) for a and c
        await h.wait_idle()
        assert sorted(closed) == [
            (("a", (0.0, 10.0)), 3),
            (("a", (10.0, 20.0)), 1),
            (("b", (0.0, 10.0)), 1),
            (("c", (10.0, 20.0)), 2),
        ]


async def test_failing_on_window_close_is_logged_and_the_record_counts(caplog: pytest.LogCaptureFixture) -> None:
    """An exception in on_window_close neither escapes the table write nor skips the record that
    expired the window: it is logged with the key and the window."""
    calls: list[Any] = []

    def on_close(key: Any, value: Any) -> None:
        calls.append(key)
        raise RuntimeError("callback bug")

    app, wt = counting_app("closefail", size=10.0, expires=10.0, on_window_close=on_close)
    app.settings.on_agent_error = "skip"
    async with AppHarness(app) as h:
        await h.send("events", {}, key="a", timestamp=1.0)
        with caplog.at_level(logging.ERROR):
            await h.send("events", {}, key="b", timestamp=25.0)  # expires [0, 10) of "a"
            await h.send("events", {}, key="b", timestamp=26.0)
            await h.wait_idle()
        assert calls == [("a", (0.0, 10.0))]
        assert wt.as_dict() == {("b", (20.0, 30.0)): 2}  # the record that expired the window counted
        assert "on_window_close raised for key 'a' window (0.0, 10.0)" in caplog.text
        assert wt._state.callback_errors == 1


async def test_async_on_window_close() -> None:
    closed: list[tuple[Any, Any]] = []

    async def on_close(key: Any, value: Any) -> None:
        await asyncio.sleep(0)
        closed.append((key, value))

    app = agentstream.App(f"aclose-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int, on_window_close=on_close).hopping(10, 5, expires=15)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    async with AppHarness(app) as h:
        for ts in [7.0, 8.0, 30.0]:
            await h.send("events", {}, key="k", timestamp=ts)
        await h.wait_idle()
        await wt.wait_callbacks()
    assert sorted(closed) == [(("k", (0.0, 10.0)), 2), (("k", (5.0, 15.0)), 2)]


def restore_app(broker: str, app_id: str, counted: list[float], **settings: Any) -> tuple[Any, Any]:
    """A fresh app object each call, as a restarted process would build it."""
    app = agentstream.App(
        app_id,
        broker=broker,
        store="memory://",
        topic_partitions=2,
        commit_interval=0.05,
        max_warmup_replicas=0,  # a new worker takes its partitions at once: the test is about that move
        **settings,
    )
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int).tumbling(10, expires=1000, grace=5)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1
            if not wt[event.key].stale():
                counted.append(event.timestamp)

    return app, wt


async def test_restarted_worker_restores_windows_and_stream_time() -> None:
    broker, app_id = f"memory://restore-{uuid.uuid4().hex[:8]}", f"restore-{uuid.uuid4().hex[:6]}"
    counted: list[float] = []
    records = [(ts, key) for ts in (1.0, 3.0, 12.0, 14.0, 31.0, 39.0) for key in ("a", "b", "c")]

    app, wt = restore_app(broker, app_id, counted)
    h = await run_worker(app)
    try:
        for ts, key in records:
            await h.send("events", {}, key=key, timestamp=ts)
        await h.wait_idle()
        before = wt.as_dict()
    finally:
        await h.worker.stop()
    assert before == {(k, (s, s + 10.0)): 2 for k in "abc" for s in (0.0, 10.0, 30.0)}

    app2, wt2 = restore_app(broker, app_id, counted)
    h2 = await run_worker(app2)
    try:
        assert wt2.as_dict() == before
        counted.clear()
        # stream time (39 in every partition) survived: [20, 30) closed at 30 + grace = 35, so a
        # record for it is late (the newest window start, 30, would have let it in)
        await h2.send("events", {}, key="a", timestamp=25.0)
        await h2.send("events", {}, key="b", timestamp=35.0)
        await h2.wait_idle()
        assert counted == [35.0]
        assert wt2.late_dropped == 1
        after = dict(before)
        after[("b", (30.0, 40.0))] = 3
        assert wt2.as_dict() == after
    finally:
        await h2.worker.stop()


async def test_windowing_a_table_twice_is_an_error() -> None:
    app = agentstream.App(f"twice-{uuid.uuid4().hex[:6]}", broker="memory://")
    table = app.Table("t", default=int)
    table.tumbling(10)
    with pytest.raises(agentstream.TopologyError, match="already windowed"):
        table.hopping(10, 5)


# -- the pageviews example app -----------------------------------------------------------------------------


async def test_pageviews_counts_equal_direct_computation() -> None:
    from apps.pageviews import app, page_views

    rng = random.Random(3)
    base = 1_700_000_000.0
    views = [
        {"page": rng.choice(["/", "/a", "/b", "/c", "/d"]), "user": f"u{rng.randrange(20)}", "ts": base + i * 2.7}
        for i in range(300)
    ]  # 13.5 minutes of views, in time order
    dropped_before = page_views.late_dropped
    async with AppHarness(app) as h:
        for v in views:
            # one source partition keeps the (re-keyed) views in time order; Kafka timestamps
            # deliberately disagree with `ts`: they must not matter
            await h.send("page-views", v, key=v["user"], partition=0, timestamp=rng.uniform(0, 1e6))
        await h.wait_idle()
        out = h.read("page-view-counts")
        table = page_views.as_dict()

    expected: collections.Counter[tuple[str, int]] = collections.Counter()
    for v in views:
        expected[(v["page"], int(v["ts"] // 60 * 60))] += 1
    assert page_views.late_dropped == dropped_before
    assert len(out) == len(views)  # one update per view
    last: dict[tuple[str, int], int] = {}
    for key, value in out:
        assert key == value["page"]
        assert value["window_end"] - value["window_start"] == 60
        window = (value["page"], value["window_start"])
        assert value["count"] == last.get(window, 0) + 1  # counts go up one by one per window
        last[window] = value["count"]
    assert last == dict(expected)
    assert table == {(page, (float(start), float(start + 60))): n for (page, start), n in expected.items()}


async def test_pageviews_late_view_is_dropped_and_not_reported() -> None:
    from apps.pageviews import app, page_views

    dropped_before = page_views.late_dropped
    async with AppHarness(app) as h:
        for ts in (10.0, 200.0, 20.0, 85.0):  # stream time 200 > 60 + grace: [0, 60) has closed
            await h.send("page-views", {"page": "/late", "user": "u", "ts": ts}, partition=0)
        await h.wait_idle()
        out = [v for _, v in h.read("page-view-counts")]
    assert [(v["window_start"], v["count"]) for v in out] == [(0, 1), (180, 1)]
    assert page_views.late_dropped == dropped_before + 2


async def test_partition_coming_back_from_standby_uses_the_restored_stream_time() -> None:
    broker, app_id = f"memory://standby-{uuid.uuid4().hex[:8]}", f"standby-{uuid.uuid4().hex[:6]}"
    counted_a: list[float] = []
    app_a, wt_a = restore_app(broker, app_id, counted_a, table_standby_replicas=1)
    ha = await run_worker(app_a)
    hb: AppHarness | None = None
    try:
        codec = app_a.topics["events"].key_codec
        key_of = {default_partition(codec.dumps(k), 2): k for k in "abcdefgh"}
        for ts in (1.0, 39.0):
            for key in key_of.values():
                await ha.send("events", {}, key=key, timestamp=ts)
        await ha.wait_idle()

        # B joins and takes one partition; A keeps following it as a standby
        app_b, _ = restore_app(broker, app_id, [], table_standby_replicas=1)
        hb = await run_worker(app_b)
        await app_a.transport.settle()
        await asyncio.wait_for(ha.worker.assigned.wait(), 30)
        (moved,) = hb.worker.assignor.assignment.active
        await hb.send("events", {}, key=key_of[moved], timestamp=50.0)  # stream time 50, on B
        await hb.wait_idle()
        await hb.worker.stop()
        hb = None

        # B left: the partition is active on A again, with B's stream time
        await app_a.transport.settle()
        await asyncio.wait_for(ha.worker.assigned.wait(), 30)
        assert moved in ha.worker.assignor.assignment.active
        counted_a.clear()
        await ha.send("events", {}, key=key_of[moved], timestamp=31.0)  # [30, 40) closed at 45
        await ha.wait_idle()
        assert counted_a == []
        assert wt_a.late_dropped == 1
        assert wt_a.as_dict()[(key_of[moved], (50.0, 60.0))] == 1
    finally:
        if hb is not None:
            await hb.worker.stop()
        await ha.worker.stop()


async def test_faust_window_reads_now_event_ranges_relative_to_and_contains() -> None:
    """Faust's WindowSet/WindowWrapper reads: ``now()`` in an agent is the newest window of the
    partition (not the wall clock), ``wt[k][event]`` binds another event, ranges can be written
    and deleted, ``relative_to(fn)`` takes a callable of the event, ``k in wt`` looks at the
    window of the current time."""
    app = agentstream.App(f"freads-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    hop = app.Table("hop", default=int).hopping(10, 5, expires=1000)
    by_fn = app.Table("by_fn", default=int).tumbling(10, expires=1000).relative_to(lambda e: e.value["t"])
    seen: list[tuple[Any, ...]] = []
    first: list[Any] = []

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            if not first:
                first.append(event)
            hop[event.key] += 1
            by_fn[event.key] += 1
            ws = hop[event.key]
            seen.append((ws.now(), ws.current(), ws[first[0]].current(), event.key in hop, "zz" in hop))
            if event.timestamp == 12.0:
                hop[event.key][(10.0, 20.0)] = 40  # one window by its range
                del hop[event.key][(5.0, 15.0)]

    async with AppHarness(app) as h:
        for ts in [1.0, 7.0, 12.0]:
            await h.send("events", {"t": 1000.0 + ts}, key="k", timestamp=ts)
        await h.wait_idle()
        windows = hop.as_dict()
        fn_windows = sorted(by_fn.keys())
    assert seen == [
        # now() = current(stream time of the partition): [0, 10) at 1, [5, 15) at 7, [10, 20) at 12
        (1, 1, 1, True, False),
        (1, 1, 2, True, False),  # ws[first event] reads the window of t=1: [0, 10) now holds 2
        (1, 1, 2, True, False),
    ]
    assert windows == {("k", (0.0, 10.0)): 2, ("k", (10.0, 20.0)): 40}
    assert fn_windows == [("k", (1000.0, 1010.0)), ("k", (1010.0, 1020.0))]


async def test_sliding_window_and_using_window() -> None:
    """Faust's SlidingWindow(before, after, expires): each record's own window [t - before, t + after);
    ``using_window`` takes any window object."""
    app = agentstream.App(f"slide-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    sliding = app.Table("sliding", default=int).using_window(agentstream.SlidingWindow(5, 2, expires=30))
    tumbling = app.Table("tumbling", default=int).using_window(agentstream.TumblingWindow(10, expires=30))
    values: list[int] = []

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            sliding[event.key] += 1
            tumbling[event.key] += 1
            values.append(sliding[event.key].value())

    async with AppHarness(app) as h:
        for ts in [10.0, 10.0, 14.0, 11.0, 60.0]:  # 11 arrives after stream time 14 >= 11 + 2: late
            await h.send("events", {}, key="k", timestamp=ts)
        await h.wait_idle()
        assert values == [1, 2, 1, 0, 1]
        # at stream time 60 every window ending before 60 - 30 has expired
        assert sliding.as_dict() == {("k", (55.0, 62.0)): 1}
        assert tumbling.as_dict() == {("k", (60.0, 70.0)): 1}
        assert sliding.late_dropped == 1
    with pytest.raises(agentstream.TopologyError, match="using_window"):
        app.Table("other").using_window(object())


async def test_windowed_items_keys_values_views_pick_one_window_per_key() -> None:
    """``wt.items().current()``/``.now()``/``.delta(d)`` (and keys/values) as Faust's views; plain
    iteration still gives every window."""
    app, wt = counting_app("views", size=10.0, expires=1000.0)
    seen: list[Any] = []

    @app.agent(app.topic("probe", key_type=str, value_type=dict))
    async def probe(stream: agentstream.Stream) -> None:
        async for _ in stream:
            seen.append((sorted(wt.items().current()), sorted(wt.keys().now()), sorted(wt.values().delta(10))))

    async with AppHarness(app) as h:
        for ts, key in [(1.0, "a"), (2.0, "b"), (12.0, "a"), (13.0, "a")]:
            await h.send("events", {}, key=key, timestamp=ts)
        await h.wait_idle()
        await h.send("probe", {}, key="a", timestamp=14.0)
        await h.wait_idle()
        assert sorted(wt.items()) == [(("a", (0.0, 10.0)), 1), (("a", (10.0, 20.0)), 2), (("b", (0.0, 10.0)), 1)]
    # current(): the window of t=14, [10, 20) (b: the default 0); now(): the partition's newest
    # window, [10, 20); delta(10): the window of t=4, [0, 10)
    assert seen == [([("a", 2), ("b", 0)], ["a", "b"], [1, 1])]
