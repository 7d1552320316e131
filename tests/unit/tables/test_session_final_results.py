"""Final results of session tables (``st.final_results()``): one per key and session once stream time
passes the session's end + gap + grace (when the session closes), none before, none again for late
records; a session merged into another (or whose start an earlier record moved) gets no final of its
own, the session it became gets one with the merged value and bounds; the suppression buffer restored
by the next owner emits a session that closed without its final once, under both guarantees."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.tables.final_results import FinalResults, WindowFinal
from agentstream.testing import AppHarness
from tests.support.workers import run_worker

pytestmark = pytest.mark.asyncio

GUARANTEES = ["at_least_once", "exactly_once"]
GAP, GRACE = 5.0, 2.0  # a session [start, end] closes once stream time passes end + 7


class Unsendable:
    """A value codec that fails: the finals of an app using it are never sent."""

    def dumps(self, obj: Any) -> bytes:
        raise agentstream.SerializationError("broker said no")

    def loads(self, data: bytes | None) -> Any:
        raise AssertionError("never sent")


def session_final_app(
    *, broker: str = "memory://", app_id: str | None = None, unsendable: bool = False, partitions: int = 2
) -> tuple[Any, Any]:
    app = agentstream.App(app_id or f"sfinal-{uuid.uuid4().hex[:6]}", broker=broker, topic_partitions=partitions)
    topic = app.topic("events", key_type=str, value_type=dict)
    st = app.Table("counts", default=int, key_type=str).session(GAP, grace=GRACE)
    st.final_results(app.topic("count-finals", value_serializer=Unsendable()) if unsendable else "count-finals")

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            st[event.key] += 1

    return app, st


def finals(h: AppHarness) -> list[tuple[str, float, float, int]]:
    out = []
    for key, value in h.read("count-finals"):
        final = WindowFinal(**value) if isinstance(value, dict) else value
        assert key == final.key
        out.append((final.key, final.start, final.end, final.value))
    return sorted(out)


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_one_final_per_session_when_it_closes_none_before_none_for_late(guarantee: str) -> None:
    app, st = session_final_app(partitions=1)  # one partition: one stream time for a and b
    async with AppHarness(app, virtual_time=True, processing_guarantee=guarantee) as h:
        for ts, key in [(1, "a"), (3, "a"), (4, "b"), (10, "a")]:
            await h.send("events", {}, key=key, timestamp=ts)
        # a's [1, 3] at stream time 3 + 5 + 2 = 10 could still take a record at 3 + 5: not closed yet
        assert finals(h) == []
        assert st.sessions("a") == {(1.0, 3.0): 2, (10.0, 10.0): 1}
        await h.send("events", {}, key="b", timestamp=10.001)  # passes it: a's [1, 3] closes
        assert finals(h) == [("a", 1.0, 3.0, 2)]
        await h.send("events", {}, key="a", timestamp=11.001)  # and b's [4, 4]
        assert finals(h) == [("a", 1.0, 3.0, 2), ("b", 4.0, 4.0, 1)]
        await h.send("events", {}, key="a", timestamp=2.0)  # late: dropped, no second final
        await h.send("events", {}, key="a", timestamp=3.0)
        await h.send("events", {}, key="a", timestamp=12.0)
        await h.send("events", {}, key="b", timestamp=12.0)
        assert finals(h) == [("a", 1.0, 3.0, 2), ("b", 4.0, 4.0, 1)]
        assert st.late_dropped == 2
        await h.send("events", {}, key="a", timestamp=40.0)
        assert finals(h) == [
            ("a", 1.0, 3.0, 2),
            ("a", 10.0, 12.0, 3),
            ("b", 4.0, 4.0, 1),
            ("b", 10.001, 12.0, 2),
        ]


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_merged_sessions_get_one_final_with_the_merged_value_and_bounds(guarantee: str) -> None:
    app, st = session_final_app(partitions=1)
    async with AppHarness(app, virtual_time=True, processing_guarantee=guarantee) as h:
        for ts in (1.0, 8.0):  # two sessions, [1, 1] and [8, 8]
            await h.send("events", {}, key="a", timestamp=ts)
        await h.send("events", {}, key="a", timestamp=4.5)  # bridges them: [1, 8] of 3 records
        assert st.sessions("a") == {(1.0, 8.0): 3}
        await h.send("events", {}, key="z", timestamp=15.0)  # stream time 8 + 7: [1, 8] is still open
        assert finals(h) == []
        await h.send("events", {}, key="a", timestamp=20.0)  # a new session [20, 20]; [1, 8] closes
        assert finals(h) == [("a", 1.0, 8.0, 3)]  # [1, 1] and [8, 8] got none
        await h.send("events", {}, key="a", timestamp=17.0)  # out of order, earlier: [17, 20], start moved
        assert st.sessions("a") == {(17.0, 20.0): 2}
        await h.send("events", {}, key="a", timestamp=60.0)
        # one for [17, 20], none for the [20, 20] it was before the record at 17
        assert finals(h) == [("a", 1.0, 8.0, 3), ("a", 17.0, 20.0, 2), ("z", 15.0, 15.0, 1)]
        buffer = app.tables["counts-suppress"]
        assert len(list(buffer.items())) == 1  # only the open [60, 60]: nothing merged away lingers


async def test_kafka_streams_session_example_gives_one_final_per_merged_session() -> None:
    """Kafka Streams' DSL-guide example (gap 5 minutes; green at 0 and 6, blue at 2, then green at 4,
    blue at 5 out of order and blue at 11): finals for the three sessions it ends with, only."""
    m, t0 = 60.0, 1_700_000_000.0
    app = agentstream.App(f"sfinal-ks-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    st = app.Table("counts", default=int, key_type=str).session(5 * m, grace=10 * m)
    st.final_results("count-finals")

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            st[event.key] += 1

    async with AppHarness(app, virtual_time=True) as h:
        for user, minute in [("green", 0), ("green", 6), ("blue", 2), ("green", 4), ("blue", 5), ("blue", 11)]:
            await h.send("events", {}, key=user, timestamp=t0 + minute * m)
        assert finals(h) == []
        await h.send("events", {}, key="flush", timestamp=t0 + 60 * m)
        got = [(k, (s - t0) / m, (e - t0) / m, v) for k, s, e, v in finals(h)]
    assert got == [("blue", 2, 5, 2), ("blue", 11, 11, 1), ("green", 0, 6, 3)]


async def test_session_final_results_declared_twice_is_refused() -> None:
    app, st = session_final_app()
    with pytest.raises(agentstream.TopologyError, match="already sends its final results"):
        st.final_results("other")


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_next_owner_emits_a_session_that_closed_without_its_final_once(guarantee: str) -> None:
    """Worker A closes a's [1, 3] but its final never reaches the topic (the send fails); A's commit
    still carries stream time past the close. B, the next owner, restores the buffer and sends the
    final once: at once after the restore (at_least_once), at the partition's next record
    (exactly_once, which writes only inside a task's transaction)."""
    broker, app_id = f"memory://sfinal-{uuid.uuid4().hex[:8]}", f"sfinal-{uuid.uuid4().hex[:6]}"
    app, _ = session_final_app(broker=broker, app_id=app_id, unsendable=True)
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

    app2, _ = session_final_app(broker=broker, app_id=app_id)
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
        await hb.send("events", {}, key="a", timestamp=28.5)  # [20, 21] closes: its own final, the only other
        await hb.wait_idle()
        await hb.worker.commit()
        got = [m.value for m in app2.transport.read_topic("count-finals", committed=True)]
    finally:
        await hb.worker.stop()
    assert len(got) == 2
    assert b'"start":1.0' in got[0] and b'"end":3.0' in got[0] and b'"value":2' in got[0]
    assert b'"start":20.0' in got[1] and b'"end":21.0' in got[1] and b'"value":2' in got[1]


async def test_a_session_reusing_the_start_of_one_whose_final_awaits_its_ack_still_gets_its_final() -> None:
    """at_least_once deletes a final's buffer entry once the broker acknowledged it. A record of the
    closed session's start can still join a newer session (its merged end is recent): that session
    is buffered under the same start. When the old final's acknowledgement comes after, it must not
    delete the new session's entry (which then never got a final)."""
    app, st = session_final_app(partitions=1)
    events = app.topics["events"]
    async with AppHarness(app) as h:
        await events.send(key="a", value={}, timestamp=0.0)
        await events.send(key="a", value={}, timestamp=1.0)  # [0, 1]
        await h.wait_idle()
        # in one batch: [0, 1] closes (its final is sent), then a's [5, 5] starts and the record
        # at 0 extends it back to [0, 5], before the first final's acknowledgement is handled
        for key, ts in [("z", 9.0), ("a", 5.0), ("a", 0.0)]:
            await events.send(key=key, value={}, timestamp=ts)
        await h.wait_idle()
        assert st.sessions("a") == {(0.0, 5.0): 2}
        await events.send(key="z", value={}, timestamp=100.0)
        await h.wait_idle()
        for _ in range(100):
            if len(finals(h)) >= 3:
                break
            await asyncio.sleep(0.01)
        assert finals(h) == [("a", 0.0, 1.0, 2), ("a", 0.0, 5.0, 2), ("z", 9.0, 9.0, 1)]
