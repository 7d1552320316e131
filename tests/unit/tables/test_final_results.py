"""Final results of windowed tables (``final_results()``, Kafka Streams' suppress(untilWindowCloses)):
one per key and window once stream time passes end + grace, none before, none again for late
records; the suppression buffer restored by the next owner emits a closed window once."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.tables.final_results import FinalResults, WindowFinal
from agentstream.tables.windows import SlidingWindow
from agentstream.testing import AppHarness
from tests.support.workers import run_worker

pytestmark = pytest.mark.asyncio

GUARANTEES = ["at_least_once", "exactly_once"]


class Unsendable:
    """A value codec that fails: the finals of an app using it are never sent."""

    def dumps(self, obj: Any) -> bytes:
        raise agentstream.SerializationError("broker said no")

    def loads(self, data: bytes | None) -> Any:
        raise AssertionError("never sent")


def final_app(
    kind: str = "tumbling", *, broker: str = "memory://", app_id: str | None = None, unsendable: bool = False
) -> tuple[Any, Any]:
    app = agentstream.App(app_id or f"final-{uuid.uuid4().hex[:6]}", broker=broker, topic_partitions=2)
    topic = app.topic("events", key_type=str, value_type=dict)
    table = app.Table("counts", default=int, key_type=str)
    if kind == "tumbling":
        wt = table.tumbling(10, expires=1000, grace=5)
    elif kind == "hopping":
        wt = table.hopping(10, 5, expires=1000, grace=5)
    else:
        wt = table.using_window(SlidingWindow(2, 3, expires=1000), grace=5)
    wt.final_results(app.topic("count-finals", value_serializer=Unsendable()) if unsendable else "count-finals")

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    return app, wt


def finals(h: AppHarness) -> list[tuple[str, float, float, int]]:
    out = []
    for key, value in h.read("count-finals"):
        final = WindowFinal(**value) if isinstance(value, dict) else value
        assert key == final.key
        out.append((final.key, final.start, final.end, final.value))
    return sorted(out)


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_one_final_per_tumbling_window_when_it_closes_none_before_none_for_late(guarantee: str) -> None:
    app, _ = final_app()
    async with AppHarness(app, virtual_time=True, processing_guarantee=guarantee) as h:
        for ts, key in [(1, "a"), (3, "a"), (4, "b"), (12, "a"), (14.999, "b")]:
            await h.send("events", {}, key=key, timestamp=ts)
        assert finals(h) == []  # [0, 10) closes at 10 + grace 5: not yet, in either partition
        # keys a and b may sit in different partitions: each closes by its own stream time
        await h.send("events", {}, key="a", timestamp=15.0)
        await h.send("events", {}, key="b", timestamp=15.0)
        assert finals(h) == [("a", 0.0, 10.0, 2), ("b", 0.0, 10.0, 1)]
        await h.send("events", {}, key="a", timestamp=2.0)  # late: dropped, no second final
        await h.send("events", {}, key="a", timestamp=16.0)
        await h.send("events", {}, key="b", timestamp=16.0)
        assert finals(h) == [("a", 0.0, 10.0, 2), ("b", 0.0, 10.0, 1)]
        await h.send("events", {}, key="a", timestamp=40.0)
        await h.send("events", {}, key="b", timestamp=40.0)
        assert finals(h) == [
            ("a", 0.0, 10.0, 2),
            ("a", 10.0, 20.0, 3),
            ("b", 0.0, 10.0, 1),
            ("b", 10.0, 20.0, 3),
        ]


@pytest.mark.parametrize("kind", ["hopping", "sliding"])
async def test_hopping_and_sliding_windows_each_get_exactly_one_final(kind: str) -> None:
    app, wt = final_app(kind)
    records = [(t, k) for t in (1.0, 2.0, 6.0, 7.5, 11.0, 13.0) for k in ("a",)]
    async with AppHarness(app, virtual_time=True) as h:
        for ts, key in records:
            await h.send("events", {}, key=key, timestamp=ts)
        before_close = finals(h)
        await h.send("events", {}, key="a", timestamp=100.0)  # closes every earlier window
        table = {k: v for k, v in wt.as_dict().items() if k[1][1] <= 100.0 - 5}
        got = finals(h)
    # exactly the windows the table holds (closed by now), each once, with the table's value
    assert sorted((k, s, e, v) for (k, (s, e)), v in table.items()) == got
    assert len({(k, s) for k, s, _, _ in got}) == len(got)
    # none was emitted before its end + grace: at stream time 13 only windows ending by 8
    assert all(e + 5 <= 13.0 for _, _, e, _ in before_close)
    if kind == "hopping":
        assert ("a", 0.0, 10.0, 4) in got and ("a", 5.0, 15.0, 4) in got
    else:  # a window per record [t - 2, t + 3): counts the records in it when it was written
        assert [(s, e) for _, s, e, _ in got] == [(t - 2, t + 3) for t, _ in records]


async def test_final_results_declared_twice_is_refused() -> None:
    app, wt = final_app()
    with pytest.raises(agentstream.TopologyError, match="already sends its final results"):
        wt.final_results("other")


async def test_buffer_is_a_changelogged_table_of_the_open_windows() -> None:
    app, wt = final_app()
    async with AppHarness(app, virtual_time=True) as h:
        await h.send("events", {}, key="a", timestamp=1.0)
        buffer = app.tables["counts-suppress"]
        assert [k for k, _ in buffer.items()] != []  # the open window [0, 10) is buffered
        await h.send("events", {}, key="a", timestamp=30.0)
        # emitted: gone from the buffer (the open [30, 40) remains)
        assert len(list(buffer.items())) == 1
        changelog = h.transport.read_topic(f"{app.id}-counts-suppress-changelog")
        assert any(m.value is None for m in changelog)  # the emitted window's tombstone


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_next_owner_emits_a_window_that_closed_without_its_final_once(guarantee: str) -> None:
    """Worker A closes [0, 10) but its final never reaches the topic (the send fails); A's commit
    still carries stream time past the close. B, the next owner, restores the buffer and sends the
    final once: at once after the restore (at_least_once), at the partition's next record
    (exactly_once, which writes only inside a task's transaction)."""
    broker, app_id = f"memory://final-{uuid.uuid4().hex[:8]}", f"final-{uuid.uuid4().hex[:6]}"
    app, _ = final_app(broker=broker, app_id=app_id, unsendable=True)
    app.settings = app.settings.replace(processing_guarantee=guarantee, commit_interval=0.05)
    ha = await run_worker(app)
    try:
        for ts in (1.0, 3.0, 20.0):
            await ha.send("events", {}, key="a", timestamp=ts)
        await ha.wait_idle()
        state: FinalResults = app.tables["counts"]._windowed.final
        assert state.errors == 1
    finally:
        await ha.worker.stop()
    assert app.transport.read_topic("count-finals") == []

    app2, _ = final_app(broker=broker, app_id=app_id)
    app2.settings = app2.settings.replace(processing_guarantee=guarantee, commit_interval=0.05)
    hb = await run_worker(app2)
    try:
        if guarantee == "exactly_once":
            await hb.send("events", {}, key="a", timestamp=4.0)  # late: moves nothing, but closes the due ones
        await hb.wait_idle()
        for _ in range(200):  # at_least_once: sent after the restore, before any new record
            if app2.transport.read_topic("count-finals", committed=True):
                break
            await asyncio.sleep(0.01)
            await hb.worker.commit()
        assert len(app2.transport.read_topic("count-finals", committed=True)) == 1
        await hb.send("events", {}, key="a", timestamp=21.0)
        await hb.wait_idle()
        await hb.worker.commit()
        got = [m.value for m in app2.transport.read_topic("count-finals", committed=True)]
    finally:
        await hb.worker.stop()
    assert len(got) == 1 and b'"start":0.0' in got[0] and b'"value":2' in got[0]


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_a_window_closed_by_the_wall_clock_cleanup_gets_its_final_once(guarantee: str) -> None:
    """``expires=`` windows also close while no record comes (Faust's table cleanup): their final is
    sent then, and a record arriving later for them is late (no second final)."""
    app = agentstream.App(f"final-wall-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int, key_type=str).tumbling(10, expires=20, grace=2)
    wt.final_results("count-finals")

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    async with AppHarness(app, virtual_time=True, processing_guarantee=guarantee) as h:
        t0 = h.now()  # a multiple of 10
        await h.send("events", {}, key="a", timestamp=t0 + 1)
        await h.send("events", {}, key="a", timestamp=t0 + 2)
        await h.advance(30)
        assert finals(h) == []
        await h.advance(30)  # the cleanup at t0 + 60 lets time go on from t0 + 2 by 30 s: [t0, t0 + 10) closes
        assert finals(h) == [("a", t0, t0 + 10, 2)]
        await h.send("events", {}, key="a", timestamp=t0 + 5)
        await h.advance(120)
        assert finals(h) == [("a", t0, t0 + 10, 2)]


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_a_put_into_a_window_the_wall_clock_closed_is_late_and_sends_no_second_final(guarantee: str) -> None:
    """``wt[key][(start, end)] = v`` into a window the cleanup closed (stream time still short of its
    end + grace) is refused as late, like ``wt[key] += 1`` there: no second final, no reopened window."""
    app = agentstream.App(f"final-put-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int, key_type=str).tumbling(10, expires=20, grace=2)
    wt.final_results("count-finals")

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            if "put" in event.value:
                start = event.value["put"]
                wt[event.key][(start, start + 10)] = 99
            else:
                wt[event.key] += 1

    async with AppHarness(app, virtual_time=True, processing_guarantee=guarantee) as h:
        t0 = h.now()  # a multiple of 10
        await h.send("events", {}, key="a", timestamp=t0 + 1)
        await h.send("events", {}, key="a", timestamp=t0 + 2)
        await h.advance(60)  # the cleanup closes [t0, t0 + 10) (stream time is still t0 + 2)
        assert finals(h) == [("a", t0, t0 + 10, 2)]
        await h.send("events", {"put": t0}, key="a", timestamp=t0 + 3)
        await h.advance(120)
        assert finals(h) == [("a", t0, t0 + 10, 2)]
        assert wt.late_dropped == 1
        assert wt.as_dict() == {}


async def test_a_window_the_app_deletes_gets_no_final() -> None:
    app = agentstream.App(f"final-del-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int, key_type=str).tumbling(10, expires=1000)
    wt.final_results("count-finals")

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            if event.value.get("delete"):
                del wt[event.key]
            else:
                wt[event.key] += 1

    async with AppHarness(app, virtual_time=True) as h:
        await h.send("events", {}, key="a", timestamp=1.0)
        await h.send("events", {}, key="b", timestamp=1.0)
        await h.send("events", {"delete": True}, key="a", timestamp=2.0)
        await h.send("events", {}, key="c", timestamp=30.0)
        assert finals(h) == [("b", 0.0, 10.0, 1)]


async def test_final_results_declared_after_the_worker_started_is_refused_at_the_first_write() -> None:
    """Its suppression buffer would have no partitions: no final could be kept, so the write says so."""
    app = agentstream.App(f"final-late-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int, key_type=str).tumbling(10, expires=1000)
    errors: list[BaseException] = []

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            try:
                wt[event.key] += 1
            except agentstream.TopologyError as exc:
                errors.append(exc)

    async with AppHarness(app, virtual_time=True) as h:
        wt.final_results("count-finals")
        await h.send("events", {}, key="a", timestamp=1.0)
    assert len(errors) == 1 and "final_results() was called after the worker started" in str(errors[0])
