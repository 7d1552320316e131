"""Session windows (``table.session(gap, grace=)``) on whole apps (memory transport): Kafka Streams'
documented session-window example on both stores, after a restore from the changelog and under
the harness' virtual time; late records; a custom merge; the refusal of a default that cannot be
added; the web views; the exporter's rows."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import agentstream
from agentstream.tables.sessions import parse_session_key
from agentstream.testing import AppHarness
from agentstream.transport.memory import MemoryTransport
from tests.support.workers import run_worker

M = 60.0  # the example's times are minutes
T0 = 1_700_000_000.0
GAP = 5 * M

# Kafka Streams' DSL guide, "Session Windows" (inactivity gap of 5 minutes): first three records,
# then three more, two of them out of order (green at 4, blue at 5). The guide's example predates
# grace periods (SessionWindows.with() kept sessions 24 hours), so grace here lets the
# out-of-order records in, as there.
FIRST = [("green", 0), ("green", 6), ("blue", 2)]
THEN = [("green", 4), ("blue", 5), ("blue", 11)]
GRACE = 10 * M


def at(minute: float) -> float:
    return T0 + minute * M


def span(a: float, b: float) -> tuple[float, float]:
    return (at(a), at(b))


# After the first three records: two sessions for green (0 and 6), one for blue (2).
AFTER_FIRST = {("green", span(0, 0)): 1, ("green", span(6, 6)): 1, ("blue", span(2, 2)): 1}
# After all six: green's two sessions merged into [0, 6] with 3 records; blue's extended to [2, 5]
# with 2; a new blue session [11, 11].
AFTER_ALL = {("green", span(0, 6)): 3, ("blue", span(2, 5)): 2, ("blue", span(11, 11)): 1}


def session_app(
    name: str,
    *,
    broker: str = "memory://",
    grace: float = GRACE,
    closed: list[Any] | None = None,
    merge: Any = None,
    **settings: Any,
) -> tuple[Any, Any]:
    """An app counting `events` per key and session (gap 5 minutes) in a session table `counts`."""
    app_id = settings.pop("app_id", f"{name}-{uuid.uuid4().hex[:6]}")
    app = agentstream.App(app_id, broker=broker, topic_partitions=settings.pop("partitions", 1), **settings)
    topic = app.topic("events", key_type=str, value_type=dict)
    st = app.Table("counts", default=int, key_type=str).session(
        GAP, grace=grace, merge=merge, on_window_close=None if closed is None else closed.append_pair
    )

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            st[event.key] += 1

    return app, st


class Closed(list[Any]):
    """on_window_close's calls, as ``((key, (start, end)), value)``."""

    def append_pair(self, window_key: Any, value: Any) -> None:
        self.append((window_key, value))


async def send_all(h: AppHarness, records: list[tuple[str, float]]) -> None:
    for key, minute in records:
        await h.send("events", {}, key=key, timestamp=at(minute))
    await h.wait_idle()


@pytest.mark.parametrize("store", ["memory://", "rocksdb://"])
async def test_kafka_streams_session_example_on_both_stores(store: str, tmp_path: Path) -> None:
    app, st = session_app("kexample", store=store, data_dir=str(tmp_path))
    async with AppHarness(app) as h:
        await send_all(h, FIRST)
        assert st.as_dict() == AFTER_FIRST
        await send_all(h, THEN)
        assert st.as_dict() == AFTER_ALL
        assert h.table("counts") == AFTER_ALL
        assert st.sessions("blue") == {span(2, 5): 2, span(11, 11): 1}
        assert st["blue"] == 1 and st["green"] == 3  # outside an agent: the key's latest session
        assert h.table("counts").window("blue", at(3)) == 2
        assert st.late_dropped == 0
        # the changelog's latest record per store key (what compaction keeps, and a restore reads)
        latest: dict[bytes, bytes | None] = {}
        for m in h.transport.read_topic(f"{app.id}-counts-changelog"):
            latest[m.key] = m.value
        live = {}
        for raw, value in latest.items():
            try:
                kb, start, end = parse_session_key(raw)
            except ValueError:
                continue  # the stream-time entry
            if value is not None:
                live[(kb.decode(), (start / 1000, end / 1000))] = int(value)
        assert live == AFTER_ALL


async def test_the_record_reads_the_session_it_joins() -> None:
    app = agentstream.App(f"reads-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    st = app.Table("counts", default=int, key_type=str).session(GAP, grace=GRACE)
    seen: list[tuple[str, int, bool]] = []

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            seen.append((event.key, st[event.key], event.key in st))
            st[event.key] += 1

    async with AppHarness(app) as h:
        await send_all(h, FIRST + THEN)
    # before each record's own update: what the sessions it joins hold together
    assert seen == [
        ("green", 0, False),
        ("green", 0, False),
        ("blue", 0, False),
        ("green", 2, True),  # bridges [0, 0] and [6, 6]: 1 + 1
        ("blue", 1, True),
        ("blue", 0, False),
    ]


def restore_app(broker: str, app_id: str, store: str, data_dir: Path, closed: list[Any]) -> tuple[Any, Any]:
    return session_app(
        "restore",
        broker=broker,
        app_id=app_id,
        store=store,
        data_dir=str(data_dir),
        closed=closed,
        partitions=2,
        commit_interval=0.05,
        max_warmup_replicas=0,
    )


@pytest.mark.parametrize(
    "store,same_dir",
    [("memory://", False), ("rocksdb://", False), ("rocksdb://", True)],
    ids=["memory", "rocksdb-from-changelog", "rocksdb-local-copy"],
)
async def test_sessions_and_stream_time_survive_a_restart(store: str, same_dir: bool, tmp_path: Path) -> None:
    broker, app_id = f"memory://sess-{uuid.uuid4().hex[:8]}", f"sess-{uuid.uuid4().hex[:6]}"
    closed: Closed = Closed()
    app, st = restore_app(broker, app_id, store, tmp_path / "w1", closed)
    h = await run_worker(app)
    try:
        await send_all(h, FIRST + [("green", 4)])
        before = st.as_dict()
    finally:
        await h.worker.stop()
    assert before == {("green", span(0, 6)): 3, ("blue", span(2, 2)): 1}

    app2, st2 = restore_app(broker, app_id, store, tmp_path / ("w1" if same_dir else "w2"), closed)
    h2 = await run_worker(app2)
    try:
        assert st2.as_dict() == before  # restored (from the changelog, or the local copy and its tail)
        await send_all(h2, [("blue", 5), ("blue", 11)])
        assert st2.as_dict() == AFTER_ALL
        # stream time (11) came back too: a session ending before 11 - gap - grace = -4 is closed
        assert st2.stream_time("blue") == at(11)
        await send_all(h2, [("red", -5)])
        assert st2.late_dropped == 1
        assert ("red", span(-5, -5)) not in st2.as_dict()
        assert closed == []
    finally:
        await h2.worker.stop()


async def test_late_record_is_dropped_and_counted_and_closed_sessions_call_on_window_close() -> None:
    closed: Closed = Closed()
    app, st = session_app("late", grace=0.0, closed=closed)
    async with AppHarness(app) as h:
        # [0, 0] closes once stream time passes 0 + gap + grace = 5: the record at 20 closes it
        await send_all(h, [("k", 0), ("k", 20)])
        assert closed == [(("k", span(0, 0)), 1)]
        assert st.as_dict() == {("k", span(20, 20)): 1}
        # close time 20 - 5 = 15: a record at 10 (joining nothing) is late; one at 16 is not, and
        # it is out of order: it joins [20, 20] (20 <= 16 + 5), making [16, 20]
        await send_all(h, [("k", 10), ("k", 16)])
        assert st.late_dropped == 1
        assert h.table("counts").late_dropped == 1
        assert st.as_dict() == {("k", span(16, 20)): 2}
        # a late record's own session must not be re-created later either
        await send_all(h, [("k", 2)])
        assert st.late_dropped == 2
        assert st.as_dict() == {("k", span(16, 20)): 2}
        assert [w for (_, w), _ in closed] == [span(0, 0)]


async def test_a_record_exactly_gap_apart_joins_and_one_ms_more_does_not() -> None:
    app, st = session_app("edges")
    async with AppHarness(app) as h:
        for ts in (at(0), at(0) + GAP, at(0) + 2 * GAP + 0.001):
            await h.send("events", {}, key="k", timestamp=ts)
        await h.wait_idle()
        assert st.as_dict() == {
            ("k", (at(0), at(0) + GAP)): 2,
            ("k", (at(0) + 2 * GAP + 0.001, at(0) + 2 * GAP + 0.001)): 1,
        }


async def test_custom_merge_combines_the_bridged_sessions() -> None:
    app, st = session_app("merge", merge=max)
    async with AppHarness(app) as h:
        await send_all(h, FIRST + THEN)
        # green at 4 bridges two sessions of 1: max(1, 1) + 1 = 2 (the default + gives 3)
        assert st.as_dict() == {("green", span(0, 6)): 2, ("blue", span(2, 5)): 2, ("blue", span(11, 11)): 1}
    assert st.merge is max


async def test_merge_of_lists_keeps_the_records_of_both_sessions_in_time_order() -> None:
    app = agentstream.App(f"pages-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    pages = app.Table("pages", default=list, key_type=str).session(GAP, grace=GRACE, merge=lambda a, b: a + b)

    @app.agent(topic)
    async def collect(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            pages[event.key] = pages[event.key] + [event.value["page"]]

    async with AppHarness(app) as h:
        for minute, page in ((0, "/a"), (6, "/c"), (4, "/b")):
            await h.send("events", {"page": page}, key="u", timestamp=at(minute))
        await h.wait_idle()
        assert pages.as_dict() == {("u", span(0, 6)): ["/a", "/c", "/b"]}


@pytest.mark.parametrize("default", [list, dict, str, None])
def test_a_default_that_cannot_be_added_needs_merge(default: Any) -> None:
    app = agentstream.App(f"refuse-{uuid.uuid4().hex[:6]}", broker="memory://")
    table = app.Table("t", default=default)
    with pytest.raises(agentstream.TopologyError, match=r"session\(merge=\.\.\.\) is required"):
        table.session(GAP)
    assert table._windowed is None  # refused before anything changed: the table can still be windowed
    table.session(GAP, merge=lambda a, b: b)


def test_session_arguments_are_checked() -> None:
    app = agentstream.App(f"args-{uuid.uuid4().hex[:6]}", broker="memory://")
    with pytest.raises(ValueError, match="gap"):
        app.Table("a", default=int).session(0)
    with pytest.raises(ValueError, match="grace"):
        app.Table("b", default=int).session(10, grace=-1)
    with pytest.raises(agentstream.TopologyError, match="merge"):
        app.Table("c", default=int).session(10, merge=3)
    st = app.Table("d", default=int).session(dt.timedelta(minutes=5), grace=dt.timedelta(seconds=30))
    assert (st.gap, st.grace) == (300.0, 30.0)
    with pytest.raises(agentstream.TopologyError, match="already windowed"):
        st.table.tumbling(10)
    with pytest.raises(agentstream.TopologyError, match="already windowed"):
        app.Table("e", default=int).tumbling(10).table.session(10)
    config = app.tables["d"].changelog_topic.config
    assert config["cleanup.policy"] == "compact,delete"
    assert int(config["retention.ms"]) == 330_000 + 86_400_000


async def test_sessions_under_virtual_time() -> None:
    closed: Closed = Closed()
    app, st = session_app("virtual", closed=closed)
    async with AppHarness(app, virtual_time=True, start=at(0)) as h:
        await send_all(h, FIRST)
        await h.advance(30 * M)  # sessions close by stream time, not the clock: nothing closes
        assert st.as_dict() == AFTER_FIRST and closed == []
        await h.send("events", {}, key="green", timestamp=h.now())  # stream time 30: past 6 + gap + grace
        await h.wait_idle()
        assert sorted(closed) == sorted((k, 1) for k in AFTER_FIRST)
        assert st.as_dict() == {("green", span(30, 30)): 1}


async def test_web_views_list_and_look_up_sessions() -> None:
    app, st = session_app("web", partitions=2)
    async with AppHarness(app) as h:
        await send_all(h, FIRST + THEN)

        async def get(path: str) -> tuple[int, Any]:
            async with aiohttp.ClientSession() as s:
                async with s.get(h.web.url + path, allow_redirects=False) as r:
                    return r.status, await r.json()

        status, body = await get("/tables/counts/blue")
        assert status == 200
        assert (body["window"], body["value"]) == ([at(11), at(11)], 1)  # the latest session
        assert body["sessions"] == [
            {"window": [at(2), at(5)], "value": 2},
            {"window": [at(11), at(11)], "value": 1},
        ]
        status, body = await get(f"/tables/counts/blue?window={at(3)}")
        assert (status, body["window"], body["value"]) == (200, [at(2), at(5)], 2)
        status, body = await get(f"/tables/counts/blue?window={at(8)}")  # between sessions
        assert status == 404
        status, body = await get("/tables/counts/nobody")
        assert status == 404
        status, body = await get("/tables/counts")
        assert sorted((i["key"], tuple(i["window"]), i["value"]) for i in body["items"]) == sorted(
            (k, w, v) for (k, w), v in AFTER_ALL.items()
        )
        assert body["total"] == 3
        status, body = await get("/tables")
        assert body["tables"][0]["windowed"] == {"kind": "session", "gap": GAP, "grace": GRACE, "late_dropped": 0}


async def test_exporter_rows_one_per_key_and_session() -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from agentstream.exporter.schema import table_spec
    from agentstream.exporter.source import ChangelogPartition, ChangelogReader, _Columns, _PartitionReader

    app, st = session_app("export")
    async with AppHarness(app) as h:
        await send_all(h, FIRST + THEN)
        transport = h.transport
        assert isinstance(transport, MemoryTransport)
        messages = list(transport.read_topic(f"{app.id}-counts-changelog"))
    spec = table_spec(st.table)
    assert spec.windowed and spec.window_format == "session"
    reader = ChangelogReader({"bootstrap.servers": "127.0.0.1:1", "spec": spec.dumps()}, spec.spark_schema())
    part = _PartitionReader(reader, ChangelogPartition(0, 0, messages[-1].offset + 1))
    rows = _Columns()
    part._add(rows, messages)
    got = part._batch(rows).to_pylist()
    # what read_changelog(latest=True) computes: the last record per changelog key, tombstones dropped
    last: dict[bytes, dict[str, Any]] = {}
    for r in got:
        last[r["raw_key"]] = r
    live = sorted(
        (r["key"], r["window_start"].timestamp(), r["window_end"].timestamp(), r["value"])
        for r in last.values()
        if not r["tombstone"]
    )
    assert live == sorted((k, s, e, v) for (k, (s, e)), v in AFTER_ALL.items())


async def test_partition_coming_back_from_standby_has_the_sessions_and_stream_time_written_elsewhere(
    tmp_path: Path,
) -> None:
    broker, app_id = f"memory://sstandby-{uuid.uuid4().hex[:8]}", f"sstandby-{uuid.uuid4().hex[:6]}"
    closed: Closed = Closed()

    def make(data_dir: str) -> tuple[Any, Any]:
        return session_app(
            "standby",
            broker=broker,
            app_id=app_id,
            closed=closed,
            partitions=2,
            store="memory://",
            data_dir=data_dir,
            commit_interval=0.05,
            max_warmup_replicas=0,
            table_standby_replicas=1,
        )

    app_a, st_a = make(str(tmp_path / "a"))
    ha = await run_worker(app_a)
    hb: AppHarness | None = None
    try:
        from agentstream.transport.partitioner import default_partition

        codec = app_a.topics["events"].key_codec
        key_of = {default_partition(codec.dumps(k), 2): k for k in "abcdefgh"}
        await send_all(ha, [(k, 0) for k in key_of.values()])

        # B joins and takes one partition; A keeps following it as a standby
        app_b, _ = make(str(tmp_path / "b"))
        hb = await run_worker(app_b)
        await app_a.transport.settle()
        await asyncio.wait_for(ha.worker.assigned.wait(), 30)
        (moved,) = hb.worker.assignor.assignment.active
        key = key_of[moved]
        await send_all(hb, [(key, 4), (key, 40)])  # on B: [0, 4] extended, then closed by 40 > 4 + 5 + 10
        await hb.worker.stop()
        hb = None

        # B left: the partition is active on A again, with B's sessions and stream time
        await app_a.transport.settle()
        await asyncio.wait_for(ha.worker.assigned.wait(), 30)
        assert moved in ha.worker.assignor.assignment.active
        assert st_a.sessions(key) == {span(40, 40): 1}
        await send_all(ha, [(key, 20)])  # 20 < 40 - 5 - 10: late on A too
        assert st_a.late_dropped == 1
        await send_all(ha, [(key, 36)])  # joins [40, 40]
        assert st_a.sessions(key) == {span(36, 40): 2}
        assert ((key, span(0, 4)), 2) in closed
    finally:
        if hb is not None:
            await hb.worker.stop()
        await ha.worker.stop()


async def test_the_tables_own_and_async_on_window_close_run_for_closed_sessions() -> None:
    app = agentstream.App(f"cb-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    topic = app.topic("events", key_type=str, value_type=dict)
    sync_closed: list[Any] = []
    async_closed: list[Any] = []

    async def later(window_key: Any, value: Any) -> None:
        await asyncio.sleep(0)
        async_closed.append((window_key, value))

    by_table = app.Table("a", default=int, key_type=str, on_window_close=lambda k, v: sync_closed.append((k, v)))
    st_a = by_table.session(GAP)
    st_b = app.Table("b", default=int, key_type=str).session(GAP, on_window_close=later)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            st_a[event.key] += 1
            st_b[event.key] += 2

    async with AppHarness(app) as h:
        await send_all(h, [("k", 0), ("k", 1), ("k", 20)])
        await st_b.wait_callbacks()
    assert sync_closed == [(("k", span(0, 1)), 2)]
    assert async_closed == [(("k", span(0, 1)), 4)]


def test_cli_tables_lists_the_session_window(capsys: pytest.CaptureFixture[str]) -> None:
    import orjson

    from agentstream.cli import main

    app = agentstream.App(f"cli-{uuid.uuid4().hex[:6]}", broker="memory://")
    app.Table("visits", default=int).session(GAP, grace=30)
    assert main(["tables", "--json"], app=app) == 0
    (row,) = orjson.loads(capsys.readouterr().out)
    assert row["window"] == {"kind": "session", "gap": GAP, "grace": 30.0}
    assert main(["tables"], app=app) == 0
    assert "window=session gap=300s grace=30s" in capsys.readouterr().out
