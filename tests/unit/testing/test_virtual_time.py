"""Virtual time in the harness (issue 32): windows with grace, late records, on_window_close at
expiry, timers, crontabs, ``take(within=)`` and ``max_task_idle``, each driven by
``AppHarness(app, virtual_time=True)`` and ``advance()`` instead of real waiting.

Every scenario here would take from 30 seconds to a day in real time; none waits for real time
(no wall-clock assertion: the point is shown by the virtual times the app saw).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import agentstream
from agentstream.clock import VIRTUAL_EPOCH, clock_for
from agentstream.testing import AppHarness

pytestmark = pytest.mark.asyncio

T0 = VIRTUAL_EPOCH  # 2024-01-01T00:00:00Z, where virtual time starts


def windows_of(h: AppHarness, table: str) -> dict[tuple[Any, tuple[float, float]], Any]:
    return {(k, (round(s - T0), round(e - T0))): v for (k, (s, e)), v in h.table(table).items()}


async def test_tumbling_window_with_grace_drops_a_late_record_and_closes_at_expiry() -> None:
    app = agentstream.App("vt-tumbling", topic_partitions=1)
    clicks = app.topic("clicks", key_type=str, value_type=int)
    closed: list[tuple[Any, tuple[float, float], Any, float]] = []

    def on_close(key: Any, value: Any) -> None:
        k, (start, end) = key
        closed.append((k, (round(start - T0), round(end - T0)), value, clock_for(app).time() - T0))

    counts = app.Table("counts", default=int).tumbling(60, expires=120, grace=10, on_window_close=on_close)

    @app.agent(clicks)
    async def count(stream: Any) -> None:
        async for event in stream.events():
            counts[event.key] += event.value

    async with AppHarness(app, virtual_time=True) as h:
        assert h.now() == T0
        await h.send("clicks", 1, key="a", timestamp=T0 + 5)
        await h.send("clicks", 2, key="a", timestamp=T0 + 59)
        await h.send("clicks", 4, key="a", timestamp=T0 + 65)  # window [60, 120)
        await h.send("clicks", 8, key="a", timestamp=T0 + 30)  # stream time 65 < 60 + grace 10: still counted
        await h.send("clicks", 16, key="a", timestamp=T0 + 75)  # stream time 75: [0, 60) closes (60 + 10)
        await h.send("clicks", 32, key="a", timestamp=T0 + 40)  # late: its window closed
        assert windows_of(h, "counts") == {("a", (0, 60)): 11, ("a", (60, 120)): 20}
        assert counts.late_dropped == 1
        assert closed == []  # closed to writes, not expired yet (end + expires = 180)

        # No more records: stream time stands at 75. Faust's table cleanup (every 30 s) closes
        # windows as the wall clock passes their end + expires; here the partition's time goes on
        # with the wall clock from where the first cleanup (at 30) saw it: 75 + (now - 30). [0, 60)
        # is due at 180 of that time, so at now = 135: the cleanup at 150 closes it.
        await h.advance(149)
        assert closed == []
        await h.advance(1)
        assert closed == [("a", (0, 60), 11, 150.0)]
        assert windows_of(h, "counts") == {("a", (60, 120)): 20}
        await h.advance(60)  # [60, 120) is due at 240: now = 195, the cleanup at 210
        assert closed[1:] == [("a", (60, 120), 20, 210.0)]
        assert windows_of(h, "counts") == {}
        # a record for a window the wall clock closed is late too (not a window re-created at 0)
        await h.send("clicks", 64, key="a", timestamp=T0 + 100)
        assert windows_of(h, "counts") == {} and counts.late_dropped == 2


async def test_hopping_window_with_grace() -> None:
    app = agentstream.App("vt-hopping", topic_partitions=1)
    temps = app.topic("temps", key_type=str, value_type=int)
    totals = app.Table("totals", default=int).hopping(60, 30, expires=300, grace=5)

    @app.agent(temps)
    async def add(stream: Any) -> None:
        async for event in stream.events():
            totals[event.key] += event.value  # every window the record's time falls in

    async with AppHarness(app, virtual_time=True) as h:
        await h.send("temps", 20, key="x", timestamp=T0 + 10)  # windows [-30, 30) and [0, 60)
        await h.send("temps", 25, key="x", timestamp=T0 + 40)  # [0, 60) and [30, 90)
        await h.send("temps", 30, key="x", timestamp=T0 + 64)  # [30, 90) and [60, 120)
        await h.send("temps", 99, key="x", timestamp=T0 + 58)  # stream time 64 < 60 + grace: [0, 60) open
        await h.send("temps", 1, key="x", timestamp=T0 + 66)  # stream time 66: [0, 60) closes
        await h.send("temps", 50, key="x", timestamp=T0 + 59)  # [0, 60) closed, [30, 90) open: counted there
        assert totals.late_dropped == 0
        await h.send("temps", 7, key="x", timestamp=T0 + 20)  # both its windows closed: late
        assert totals.late_dropped == 1
        assert windows_of(h, "totals") == {
            ("x", (-30, 30)): 20,
            ("x", (0, 60)): 20 + 25 + 99,
            ("x", (30, 90)): 25 + 30 + 99 + 1 + 50,
            ("x", (60, 120)): 30 + 1,
        }
        # stream time 66 at the first cleanup (30), then on with the wall clock: [30, 90) is due
        # at 390 (end + expires), at now = 354, so the cleanup at 360; [60, 120) at 420: now = 384,
        # the cleanup at 390
        await h.advance(360)
        assert windows_of(h, "totals") == {("x", (60, 120)): 31}
        await h.advance(30)
        assert windows_of(h, "totals") == {}


async def test_a_one_hour_timer_fires_on_the_hour() -> None:
    app = agentstream.App("vt-timer", topic_partitions=1)
    out = app.topic("ticks", value_type=float)
    fired: list[float] = []

    @app.timer(3600)
    async def hourly() -> None:
        fired.append(clock_for(app).time() - T0)
        await out.send(value=clock_for(app).time())

    async with AppHarness(app, virtual_time=True) as h:
        await h.advance(3599)
        assert fired == []
        await h.advance(1)
        assert fired == [3600.0]
        await h.advance(3 * 3600)
        assert fired == [3600.0, 7200.0, 10800.0, 14400.0]
        assert [v for _, v in h.read("ticks")] == [T0 + s for s in fired]


async def test_a_daily_crontab() -> None:
    app = agentstream.App("vt-cron", topic_partitions=1)
    runs: list[str] = []

    @app.crontab("30 6 * * *")  # 06:30 UTC every day
    async def report() -> None:
        runs.append(datetime.fromtimestamp(clock_for(app).time(), UTC).isoformat(timespec="seconds"))

    async with AppHarness(app, virtual_time=True) as h:
        await h.advance(6 * 3600 + 29 * 60)
        assert runs == []
        await h.advance(3 * 86400 + 60)  # to 2024-01-04T06:30
        assert runs == [
            "2024-01-01T06:30:00+00:00",
            "2024-01-02T06:30:00+00:00",
            "2024-01-03T06:30:00+00:00",
            "2024-01-04T06:30:00+00:00",
        ]


async def test_take_within_flushes_a_partial_batch() -> None:
    app = agentstream.App("vt-take", topic_partitions=1)
    numbers = app.topic("numbers", value_type=int)
    batches: list[tuple[list[int], float]] = []

    @app.agent(numbers)
    async def batcher(stream: Any) -> None:
        async for batch in stream.take(100, within=30):
            batches.append((list(batch), clock_for(app).time() - T0))

    async with AppHarness(app, virtual_time=True) as h:
        for i in range(7):
            await h.send("numbers", i)
        await h.advance(29.5)
        assert batches == []  # 7 of 100, and 30 s have not passed
        await h.advance(0.5)
        assert batches == [(list(range(7)), 30.0)]
        for i in range(100, 250):
            await h.send("numbers", i)
        assert [b for b, _ in batches[1:]] == [list(range(100, 200))]  # full: no wait
        await h.advance(30)
        assert [b for b, _ in batches[2:]] == [list(range(200, 250))]


@pytest.mark.parametrize("max_task_idle", [0.0, 5.0])
async def test_max_task_idle_chooses_between_two_inputs(max_task_idle: float) -> None:
    app = agentstream.App("vt-idle", topic_partitions=1)
    both = app.topic("left", "right", value_type=str)
    seen: list[str] = []

    @app.agent(both)
    async def merge(stream: Any) -> None:
        async for value in stream:
            seen.append(value)

    async with AppHarness(app, virtual_time=True, max_task_idle=max_task_idle) as h:
        await h.send("left", "left@2", timestamp=T0 + 2)
        await h.advance(1)  # the right input is empty and its lag unknown
        if max_task_idle:
            assert seen == []  # waits for the right input (up to 5 s)
        else:
            assert seen == ["left@2"]  # never waits
        await h.send("right", "right@1", timestamp=T0 + 1)
        if max_task_idle:
            assert seen == ["right@1", "left@2"]  # the lower timestamp first
        else:
            assert seen == ["left@2", "right@1"]
        # The right input is now known to be caught up (KIP-695): no reason to wait any more.
        await h.send("left", "left@3", timestamp=T0 + 3)
        assert seen[2:] == ["left@3"]


async def test_max_task_idle_gives_up_waiting_after_the_idle_time() -> None:
    app = agentstream.App("vt-idle-enforced", topic_partitions=1)
    both = app.topic("left", "right", value_type=str)
    seen: list[tuple[str, float]] = []

    @app.agent(both)
    async def merge(stream: Any) -> None:
        async for value in stream:
            seen.append((value, clock_for(app).time() - T0))

    async with AppHarness(app, virtual_time=True, max_task_idle=5) as h:
        await h.send("left", "left@2", timestamp=T0 + 2)
        await h.advance(4.9)
        assert seen == []
        await h.advance(0.1)
        assert seen == [("left@2", 5.0)]  # enforced processing: the right input never came


async def test_exactly_once_chained_agents_settle() -> None:
    """The second agent reads the first's output only once its transaction commits (read_committed):
    the harness commits and looks again rather than waiting for records it cannot fetch yet."""
    app = agentstream.App("vt-eos", topic_partitions=1, processing_guarantee="exactly_once")
    first_in = app.topic("first-in", value_type=int)
    second_in = app.topic("second-in", value_type=int)
    got: list[tuple[int, float]] = []

    @app.agent(first_in)
    async def first(stream: Any) -> None:
        async for v in stream:
            await second_in.send(value=v * 10)

    @app.agent(second_in)
    async def second(stream: Any) -> None:
        async for v in stream:
            got.append((v, clock_for(app).time() - T0))

    async with AppHarness(app, virtual_time=True) as h:
        await h.send("first-in", 1)
        await h.advance(1)
        await h.send("first-in", 2)
        assert got == [(10, 0.0), (20, 1.0)]


async def test_a_harness_that_fails_to_start_gives_the_app_back() -> None:
    app = agentstream.App("vt-bad-start", topic_partitions=1)
    before = app.settings

    @app.agent(app.topic("t"))
    async def agent(stream: Any) -> None:
        async for _ in stream:
            pass

    with pytest.raises(agentstream.ConfigError, match="commit_interval"):
        async with AppHarness(app, virtual_time=True, commit_interval=-1):
            pass
    assert app.settings is before and clock_for(app).virtual is False
