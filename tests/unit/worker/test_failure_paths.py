"""Issue 13: every failure path keeps its guarantee (memory transport).

Each test breaks something on purpose in the middle of processing (a failed producer flush, a
failed transaction commit, a failed offset commit at revoke, an agent that raises) and checks
what a reader of the output, the offsets and the tables sees afterwards.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

import agentstream
from agentstream.exceptions import CommitFailed, ConfigError, ProducerError, StoreUnavailable, TransportError
from agentstream.transport.base import TP
from agentstream.transport.memory import MemoryProducer, MemoryTransport
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio

_n = 0


def url(name: str) -> str:
    global _n
    _n += 1
    return f"memory://fp-{name}-{_n}"


async def feed(
    app: agentstream.App, topic: str, values: list[Any], *, key: Any = None, partition: int | None = 0
) -> None:
    t = app.topics[topic]
    for v in values:
        await t.send(key=key, value=v, partition=partition)


async def until(cond: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def committed(worker: Worker, tp: TP) -> int:
    transport = worker.app.transport
    assert isinstance(transport, MemoryTransport)
    group = transport._broker.groups.get(worker.app.id)
    return 0 if group is None else group.committed.get(tp, 0)


def passthrough_app(name: str, **settings: Any) -> tuple[agentstream.App, list[Any]]:
    settings.setdefault("shutdown_timeout", 2.0)
    app = agentstream.App(
        name,
        broker=url(name),
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        commit_interval=1000.0,
        **settings,
    )
    source = app.topic("src", value_type=int)
    out = app.topic("out", value_type=int)
    seen: list[Any] = []

    @app.agent(source)
    async def forward(stream: agentstream.Stream) -> None:
        async for v in stream:
            await out.send(value=v)
            seen.append(v)

    return app, seen


# -- defect 1 ------------------------------------------------------------------------------------------
async def test_alo_failed_flush_commits_no_offset_even_at_stop() -> None:
    """A failed producer flush stops the worker; stop() must not commit the offsets past it."""
    app, seen = passthrough_app("d1")
    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", list(range(5)))
        await until(lambda: len(seen) == 5)
        assert await worker.commit()
        tp = TP("src", 0)
        assert await committed(worker, tp) == 5
        producer = app.producer
        real_flush = producer.flush
        failures = [0]

        async def flush_fails_once() -> None:
            if failures[0] == 0:
                failures[0] += 1
                raise ProducerError("batch to out[0] failed: broker said NOT_LEADER")  # reported once
            await real_flush()

        producer.flush = flush_fails_once  # type: ignore[method-assign]
        await feed(app, "src", list(range(5, 10)))
        await until(lambda: len(seen) == 10)
        with pytest.raises(ProducerError):
            await worker.commit()
    finally:
        await worker.stop()
    # The records 5..9 may not have reached "out": their offsets must stay uncommitted.
    assert await committed(worker, tp) == 5


async def test_eos_a_record_cut_short_by_the_shutdown_timeout_commits_none_of_its_output() -> None:
    """exactly_once: an agent still in the middle of a record when ``shutdown_timeout`` runs out is
    cancelled; the record's offset is not committed, so its output must not be either (its transaction
    is aborted), or the record's next handling repeats that output."""
    app = agentstream.App(
        "cutshort",
        broker=url("cutshort"),
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        commit_interval=1000.0,
        shutdown_timeout=0.3,
        processing_guarantee="exactly_once",
    )
    source = app.topic("src", value_type=int)
    out = app.topic("out", value_type=int)
    stuck = asyncio.Event()

    @app.agent(source)
    async def forward(stream: agentstream.Stream) -> None:
        async for v in stream:
            await out.send(value=v)
            if v == 2:
                await stuck.wait()  # e.g. a call to a service that hangs: never set

    worker = Worker(app)
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", [0, 1, 2])
        await until(lambda: len(transport.read_topic("out")) == 3)  # 2's output is sent, 2 is not finished
    finally:
        await worker.stop()
    done = await committed(worker, TP("src", 0))
    visible = [orjson.loads(r.value) for r in transport.read_topic("out", committed=True) if r.value is not None]
    assert visible == list(range(done)), f"committed offset {done}, committed output {visible}"


# -- defect 2 ------------------------------------------------------------------------------------------
async def test_eos_aborted_transaction_offsets_are_not_committed_at_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    app, seen = passthrough_app("d2", processing_guarantee="exactly_once")
    real = MemoryProducer.commit_transaction
    calls = [0]

    async def fails_once(self: MemoryProducer) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise TransportError("COORDINATOR_NOT_AVAILABLE (transient)")
        await real(self)

    monkeypatch.setattr(MemoryProducer, "commit_transaction", fails_once)
    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", list(range(5)))
        await until(lambda: len(seen) == 5)
        with pytest.raises(TransportError):
            await worker.commit()
    finally:
        await worker.stop()
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    delivered = transport.read_topic("out", committed=True)
    offset = await committed(worker, TP("src", 0))
    assert len(delivered) >= offset, f"offset {offset} committed, but only {len(delivered)} outputs committed"


# -- defect 5 ------------------------------------------------------------------------------------------
async def test_failed_commit_at_revoke_drops_cache_and_restores() -> None:
    app = agentstream.App(
        "d5",
        broker=url("d5"),
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        commit_interval=1000.0,
        shutdown_timeout=2.0,
    )
    source = app.topic("src", key_type=str, value_type=int)
    table = app.Table("counts", default=int, partitions=1)
    handled = [0]

    @app.agent(source)
    async def count(stream: agentstream.Stream) -> None:
        async for key, _ in stream.items():
            table[key] += 1
            handled[0] += 1

    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", [1] * 5, key="a")
        await until(lambda: handled[0] == 5)
        assert await worker.commit()
        await feed(app, "src", [1] * 4, key="a")
        await until(lambda: handled[0] == 9)
        assert worker.consumer is not None
        assignment = set(worker.consumer.assignment())

        async def evicted(offsets: Any) -> None:
            raise CommitFailed("member was evicted from the group")

        real_commit = worker.consumer.commit
        worker.consumer.commit = evicted  # type: ignore[method-assign]
        await worker.on_partitions_revoked(assignment)
        worker.consumer.commit = real_commit  # type: ignore[method-assign]
        # Meanwhile the partition's next owner counted on: the changelog says 19.
        producer = app.transport.producer()
        await producer.start()
        await producer.send(table.changelog_topic.name, b"a", b"19", partition=0)  # raw str key: the table key encoding
        worker.assigned.clear()
        await worker.on_partitions_assigned(assignment)
        await until(worker.assigned.is_set)
        assert table["a"] >= 19, "a stale cache or pending write hides the changelog's value"
    finally:
        await worker.stop()


# -- defect 6 ------------------------------------------------------------------------------------------
async def test_write_to_a_partition_this_worker_does_not_own_raises() -> None:
    from agentstream.tables.partition import TableNotActive

    name = url("d6")
    apps, workers = [], []
    for i in range(2):
        app = agentstream.App(
            "d6",
            broker=name,
            topic_partitions=2,
            store="memory://",
            web_enabled=False,
            commit_interval=0.05,
            table_standby_replicas=1,
            data_dir=f"/tmp/d6-{_n}-{i}",
        )
        src = app.topic("src", key_type=str, value_type=int)
        app.Table("counts", default=int, partitions=2)

        @app.agent(src)
        async def count(stream: agentstream.Stream) -> None:
            async for _ in stream:
                pass

        apps.append(app)
    try:
        for app in apps:
            w = Worker(app)
            workers.append(w)
            await w.start()
        await until(lambda: all(len(w.consumer.assignment()) == 1 for w in workers if w.consumer is not None))
        w0 = workers[0]
        table = apps[0].tables["counts"]

        def standby_open() -> set[int]:  # assigned as a standby, and its table partition opened as one
            assignment = w0.assignor.assignment
            return {p for p in set(assignment.standby) - set(assignment.active) if p in table.parts}

        await until(standby_open)
        standby = standby_open()
        from agentstream.transport.partitioner import default_partition

        key = next(
            k for k in (f"k{i}" for i in range(100)) if default_partition(k.encode(), 2) in standby
        )  # str keys are raw UTF-8
        with pytest.raises(TableNotActive, match="standby"):
            table[key] = 1  # a timer or web view writing a standby partition
    finally:
        for w in workers:
            await w.stop()


# -- defect 7 ------------------------------------------------------------------------------------------
def dl_app(name: str, shape: str, concurrency: int = 1) -> tuple[agentstream.App, list[Any]]:
    app = agentstream.App(
        name,
        broker=url(name),
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        commit_interval=0.02,
        shutdown_timeout=2.0,
        on_agent_error="dead-letter",
    )
    source = app.topic("src", value_type=int)
    seen: list[Any] = []

    @app.agent(source, concurrency=concurrency)
    async def agent(stream: agentstream.Stream) -> None:
        if shape == "filter":
            async for v in stream.filter(lambda v: v != 1):
                await asyncio.sleep(0)
                if v == 3:
                    raise ValueError("bad record 3")
                seen.append(v)
        elif shape == "group_by":

            def key(v: int) -> str:
                if v == 3:
                    raise ValueError("no key for 3")
                return f"k{v % 2}"

            async for v in stream.group_by(key, name="by_parity"):
                seen.append(v)
        elif shape == "take":
            async for batch in stream.take(3, within=0.5):
                if 4 in batch:
                    raise ValueError("bad batch")
                seen.extend(batch)

    return app, seen


def dead_letters(app: agentstream.App) -> list[int]:
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    return [orjson.loads(r.value) for r in transport.read_topic(app.settings.dead_letter_topic)]


async def test_dead_letter_acts_on_the_record_of_a_filtered_stream() -> None:
    app, seen = dl_app("d7a", "filter")
    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", list(range(6)))
        await until(lambda: 5 in seen)
        await until(lambda: dead_letters(app) == [3])
    finally:
        await worker.stop()


async def test_dead_letter_acts_on_the_record_whose_group_by_key_failed() -> None:
    app, seen = dl_app("d7g", "group_by")
    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", list(range(6)))
        await until(lambda: sorted(seen) == [0, 1, 2, 4, 5])
        await until(lambda: dead_letters(app) == [3])
    finally:
        await worker.stop()


async def test_dead_letter_acts_on_the_whole_batch_of_take() -> None:
    app, seen = dl_app("d7b", "take")
    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", list(range(9)))
        await until(lambda: 8 in seen)
        await until(lambda: sorted(dead_letters(app)) == [3, 4, 5])
        assert sorted(seen) == [0, 1, 2, 6, 7, 8]
    finally:
        await worker.stop()


async def test_concurrency_2_filtered_stream_error_does_not_stall_commits() -> None:
    app, seen = dl_app("d7c", "filter", concurrency=2)
    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", list(range(20)))
        await until(lambda: len(seen) == 18)
        tp = TP("src", 0)

        async def caught_up() -> None:
            while await committed(worker, tp) < 20:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(caught_up(), 20)
    finally:
        await worker.stop()


async def test_ask_gets_its_reply_from_an_agent_over_a_filtered_stream() -> None:
    app = agentstream.App(
        "d7d", broker=url("d7d"), topic_partitions=1, store="memory://", web_enabled=False, commit_interval=0.05
    )
    source = app.topic("src", value_type=int)

    @app.agent(source)
    async def double(stream: agentstream.Stream) -> Any:
        async for v in stream.filter(lambda v: v >= 0):
            yield v * 2

    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        assert await double.ask(21, timeout=30) == 42
    finally:
        await worker.stop()


# -- defect 8 ------------------------------------------------------------------------------------------
async def test_agent_crashing_before_its_first_record_backs_off_then_stops_the_worker() -> None:
    app = agentstream.App(
        "d8",
        broker=url("d8"),
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        agent_restart_max=4,
        agent_restart_backoff=0.01,
    )
    source = app.topic("src", value_type=int)
    ticks = [0]
    seen_ticks: list[int] = []

    class Escape(BaseException):
        pass

    @app.agent(source)
    async def broken(stream: agentstream.Stream) -> None:
        # raises in its preamble every time, the first (at discovery) too: an agent error, not a
        # failed start (the first run's error is handled by the policy when its task adopts it)
        seen_ticks.append(ticks[0])
        if len(seen_ticks) > 50:
            raise Escape("restarted in a tight loop")
        raise ValueError("cannot connect to the enrichment service")

    async def ticker() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    tick_task = asyncio.ensure_future(ticker())
    worker = Worker(app)
    try:
        code = await asyncio.wait_for(worker.run(), 30)
    finally:
        tick_task.cancel()
    assert code == 1
    assert isinstance(worker.crashed, ValueError) or isinstance(worker.crashed.__cause__, ValueError), worker.crashed
    assert len(seen_ticks) == 5  # the first run and 4 restarts
    assert all(b > a for a, b in zip(seen_ticks, seen_ticks[1:])), "the event loop did not tick between restarts"


async def test_agent_restart_max_is_validated() -> None:
    with pytest.raises(ConfigError, match="agent_restart_max"):
        agentstream.App("d8v", broker="memory://", agent_restart_max=-1)


# -- suspected: store/transport errors inside agent code ----------------------------------------------
async def test_store_error_inside_an_agent_stops_the_worker_not_skipped() -> None:
    app = agentstream.App(
        "s1",
        broker=url("s1"),
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        commit_interval=0.02,
        on_agent_error="skip",
    )
    source = app.topic("src", value_type=int)
    seen: list[int] = []

    @app.agent(source)
    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            if v == 2:
                raise StoreUnavailable("/data/x", "disk full")
            seen.append(v)

    worker = Worker(app)
    code = asyncio.ensure_future(worker.run())
    try:
        await until(worker.assigned.is_set)
        await feed(app, "src", list(range(5)))
        assert await asyncio.wait_for(code, 20) == 1
    finally:
        worker.request_stop()
        await asyncio.gather(code, return_exceptions=True)
    assert isinstance(worker.crashed, StoreUnavailable)
    assert seen == [0, 1]
    assert await committed(worker, TP("src", 0)) <= 2


# -- the final commit at stop is bounded by shutdown_timeout -------------------------------------------
async def test_stop_is_bounded_when_the_offset_commit_hangs() -> None:
    app, seen = passthrough_app("stopbound", shutdown_timeout=0.5)
    worker = Worker(app)
    await worker.start()
    await until(worker.assigned.is_set)
    await feed(app, "src", list(range(3)))
    await until(lambda: len(seen) == 3)
    assert worker.consumer is not None

    async def hangs(offsets: Any) -> None:
        await asyncio.Event().wait()  # a broker that never answers

    worker.consumer.commit = hangs  # type: ignore[method-assign]
    # Generous bound (a loaded machine): without the bound, stop() never returns.
    await asyncio.wait_for(worker.stop(), 30)
    assert await committed(worker, TP("src", 0)) == 0


# -- suspected: async on_window_close output belongs to the commit of the record that closed it --------
async def test_async_on_window_close_output_is_delivered_before_the_offset_commit() -> None:
    app = agentstream.App(
        "wclose", broker=url("wclose"), topic_partitions=1, store="memory://", web_enabled=False, commit_interval=1000.0
    )
    topic = app.topic("events", key_type=str, value_type=int)
    out = app.topic("closed", key_type=str, value_type=int)
    release = asyncio.Event()

    async def on_close(key: Any, value: Any) -> None:
        await release.wait()  # slow I/O (an HTTP call) before the send
        await out.send(key=key[0], value=value)

    wt = app.Table("counts", default=int, on_window_close=on_close).tumbling(10, expires=100)
    handled = [0]

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1
            handled[0] += 1

    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        for ts in (1.0, 2.0, 115.0):  # the third record expires window [0, 10) (on_window_close, as Faust)
            await topic.send(key="k", value=1, timestamp=ts, partition=0)
        await until(lambda: handled[0] == 3)
        transport = app.transport
        assert isinstance(transport, MemoryTransport)
        assert worker.consumer is not None
        real_commit = worker.consumer.commit
        outputs_at_commit: list[int] = []

        async def commit_offsets(offsets: Any) -> None:
            if offsets.get(TP("events", 0)) == 3:
                outputs_at_commit.append(len(transport.read_topic("closed")))
            await real_commit(offsets)

        worker.consumer.commit = commit_offsets  # type: ignore[method-assign]
        commit = asyncio.ensure_future(worker.commit())
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.wait_for(commit, 20)
        assert outputs_at_commit == [1], (
            "the offset of the record that closed the window was committed before its output"
        )
    finally:
        await worker.stop()


# -- suspected: join results queued when the agent errors ----------------------------------------------
async def test_queued_join_results_of_a_failed_record_go_with_it_and_commits_go_on() -> None:
    """A left record matching two buffered right records gives two results; the agent raises on the
    first. The policy acts on the source record once (dead letter), its queued second result goes
    with it (settled: they are that record's effects), and commits go on past it. Joins run with
    concurrency=1 (a join refuses more), so there is no out-of-order ack to stall on."""
    concurrency = 1
    app = agentstream.App(
        f"jq{concurrency}",
        broker=url("jq"),
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        commit_interval=0.02,
        on_agent_error="dead-letter",
    )
    left = app.topic("left", key_type=str, value_type=dict)
    right = app.topic("right", key_type=str, value_type=dict)
    got: list[tuple[str, str]] = []

    @app.agent(left, concurrency=concurrency)
    async def joiner(stream: agentstream.Stream) -> None:
        async for lv, rv in stream.join(right, within=10.0, grace=100.0):
            if lv["id"] == "l1":
                raise ValueError("bad pair")
            got.append((lv["id"], rv["id"]))

    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await right.send(key="k", value={"id": "r1"}, timestamp=1.0, partition=0)
        await right.send(key="k", value={"id": "r2"}, timestamp=1.5, partition=0)
        await until(lambda: worker.tasks and all(t.processed >= 2 for t in worker.tasks.values()))
        await left.send(key="k", value={"id": "l1"}, timestamp=2.0, partition=0)
        await left.send(key="k", value={"id": "l2"}, timestamp=2.5, partition=0)
        await until(lambda: len(got) == 2)
        assert sorted(got) == [("l2", "r1"), ("l2", "r2")]

        async def caught_up() -> None:
            while await committed(worker, TP("left", 0)) < 2 or await committed(worker, TP("right", 0)) < 2:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(caught_up(), 20)
        assert [d["id"] for d in dead_letters_raw(app)] == ["l1"]
    finally:
        await worker.stop()


def dead_letters_raw(app: agentstream.App) -> list[Any]:
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    return [orjson.loads(r.value) for r in transport.read_topic(app.settings.dead_letter_topic)]


async def test_a_background_loop_ended_by_a_stray_cancelled_error_stops_the_worker() -> None:
    """A CancelledError that reaches a background loop from inside (aiokafka's stop() re-raised its
    cancelled sender's into the fence, issue 39) ended that loop silently: the worker looked alive and
    never rejoined. It now stops the worker, naming the loop."""
    app, _ = passthrough_app("stray-cancel")

    @app.task
    async def leaks_a_cancellation() -> None:
        await asyncio.sleep(0.05)
        raise asyncio.CancelledError()  # not a cancellation of this task

    worker = Worker(app)
    code = await asyncio.wait_for(worker.run(), 30)
    assert code == 1
    assert "leaks_a_cancellation" in str(worker.crashed)
