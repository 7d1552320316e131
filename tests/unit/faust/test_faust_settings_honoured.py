"""Faust settings agentstream used to refuse and now honours (issue 40, item 7): each test shows
the setting's effect."""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.agents.replies import ReplyConsumer, reply_topic_allowed
from agentstream.testing import AppHarness
from agentstream.transport.base import TP, TopicSpec
from agentstream.transport.memory import MemoryTransport
from agentstream.worker.worker import Worker


def _memory_app(name: str, **options: Any) -> agentstream.App:
    return agentstream.App(name, broker=f"memory://{name}-{uuid.uuid4().hex[:8]}", store="memory://", **options)


async def test_topic_allow_declare_false_checks_and_never_creates() -> None:
    app = _memory_app("nodeclare", topic_allow_declare=False, topic_partitions=2)
    orders = app.topic("orders", partitions=2)
    with pytest.raises(agentstream.ConfigError) as err:
        await orders.maybe_declare()
    assert err.value.setting == "topic_allow_declare" and "missing: orders" in str(err.value)
    assert await app.transport.partition_count("orders") is None  # never created
    broker = app.transport.broker  # type: ignore[attr-defined]
    await MemoryTransport.ensure_topics(app.transport, [TopicSpec("orders", 3)])  # operations made it, with 3
    assert "orders" in broker.topics
    with pytest.raises(agentstream.ConfigError, match=r"orders \(has 3 partitions, the app needs 2\)"):
        await orders.maybe_declare()


async def test_topic_allow_declare_false_fails_the_worker_start_naming_the_missing_topics() -> None:
    app = _memory_app("nodeclare-w", topic_allow_declare=False, topic_partitions=1)

    @app.agent(app.topic("src"))
    async def agent(stream: Any) -> None:
        async for _ in stream:
            pass

    worker = Worker(app)
    try:
        with pytest.raises(agentstream.ConfigError, match="missing: src"):
            await worker.start()
    finally:
        await worker.stop()
    assert await app.transport.partition_count("src") is None


def test_topic_disable_leader_true_is_what_agentstream_does() -> None:
    app = _memory_app("noleader", topic_disable_leader=True)
    app.topic("src")
    names = [spec.name for spec in Worker(app)._topic_specs()]
    assert names == ["src"] and not any("leader" in n for n in names)


def _printing_app(name: str, **options: Any) -> agentstream.App:
    app = agentstream.App(name, topic_partitions=1, **options)

    @app.agent(app.topic("words", value_type=str))
    async def shout(stream: Any) -> None:
        async for word in stream:
            print(f"printed {word}")

    return app


async def test_worker_redirect_stdouts_true_sends_print_to_the_log(caplog: pytest.LogCaptureFixture) -> None:
    app = _printing_app("redirect-on", worker_redirect_stdouts=True, worker_redirect_stdouts_level="ERROR")
    before = sys.stdout
    with caplog.at_level(logging.DEBUG, logger="agentstream.stdout"):
        async with AppHarness(app) as h:
            await h.send("words", "hello")
            await h.wait_idle()
    assert sys.stdout is before  # put back when the worker stops
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "agentstream.stdout"]
    assert lines == [(logging.ERROR, "printed hello")]


async def test_worker_redirect_stdouts_false_leaves_print_alone(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _printing_app("redirect-off", worker_redirect_stdouts=False)
    with caplog.at_level(logging.DEBUG, logger="agentstream.stdout"):
        async with AppHarness(app) as h:
            await h.send("words", "hi")
            await h.wait_idle()
    assert "printed hi" in capsys.readouterr().out
    assert not [r for r in caplog.records if r.name == "agentstream.stdout"]


def test_worker_redirect_stdouts_level_is_checked_at_start() -> None:
    with pytest.raises(agentstream.ConfigError) as err:
        agentstream.App("bad-level", worker_redirect_stdouts_level="LOUD")
    assert err.value.setting == "worker_redirect_stdouts_level"


async def test_broker_commit_every_commits_after_that_many_records() -> None:
    app = agentstream.App("commit-every", topic_partitions=1, broker_commit_every=3)

    @app.agent(app.topic("src", value_type=str))
    async def agent(stream: Any) -> None:
        async for _ in stream:
            pass

    async with AppHarness(app, commit_interval=3600.0) as h:  # the interval alone would not commit
        for i in range(4):
            await h.send("src", str(i))
        consumer = h.worker.consumer
        for _ in range(400):
            if (await consumer.committed(TP("src", 0)) or 0) >= 3:
                break
            await asyncio.sleep(0.01)
        assert (await consumer.committed(TP("src", 0)) or 0) >= 3


def _blocking_app(name: str, release: asyncio.Event, seen: list[str], **options: Any) -> agentstream.App:
    app = agentstream.App(name, topic_partitions=1, **options)

    @app.agent(app.topic("src", value_type=str))
    async def slow(stream: Any) -> None:
        async for value in stream:
            seen.append(value)
            try:
                await release.wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

    return app


async def _until(check: Any, rounds: int = 500) -> None:
    for _ in range(rounds):
        if check():
            return
        await asyncio.sleep(0.01)


async def test_stream_wait_empty_false_cancels_the_record_in_hand_at_stop() -> None:
    release, seen = asyncio.Event(), []
    app = _blocking_app("no-wait-empty", release, seen, stream_wait_empty=False)
    h = AppHarness(app, shutdown_timeout=60.0)  # waiting for the record would take a minute
    await h.__aenter__()
    try:
        await h.send("src", "a")
        await _until(lambda: seen == ["a"])
    finally:
        await asyncio.wait_for(h.__aexit__(None, None, None), 20)
    assert seen == ["a", "cancelled"]
    assert not release.is_set()


async def test_stream_processing_timeout_warns_naming_the_agent_and_record(caplog: pytest.LogCaptureFixture) -> None:
    release, seen = asyncio.Event(), []
    app = _blocking_app("stuck", release, seen, stream_processing_timeout=0.1)
    with caplog.at_level(logging.WARNING, logger="agentstream.worker"):
        async with AppHarness(app) as h:
            await h.send("src", "a")
            await _until(lambda: any("stream_processing_timeout" in r.getMessage() for r in caplog.records))
            release.set()
            await h.wait_idle()
    warnings = [r.getMessage() for r in caplog.records if "stream_processing_timeout" in r.getMessage()]
    assert len(warnings) == 1 and "agent slow" in warnings[0] and "src[0]@0" in warnings[0]


def test_reply_to_and_reply_to_prefix_name_the_reply_topic() -> None:
    app = agentstream.App("replies-named", reply_to="ops-replies")
    assert ReplyConsumer(app).topic_name == "ops-replies"
    assert reply_topic_allowed(app, "ops-replies")
    app = agentstream.App("replies-prefixed", reply_to_prefix="r-")
    name = ReplyConsumer(app).topic_name
    assert name.startswith("r-") and reply_topic_allowed(app, name)


async def test_reply_expires_is_the_reply_topic_s_retention() -> None:
    from datetime import timedelta

    app = _memory_app("reply-expires", reply_expires=timedelta(hours=1))
    replies = await app.replies()
    try:
        spec = app.transport.broker.topics[replies.topic_name].spec  # type: ignore[attr-defined]
        assert spec.config == {"retention.ms": "3600000"}
    finally:
        await app.stop_clients()


def test_table_class_settings_make_the_app_s_tables() -> None:
    from agentstream.tables.kinds import GlobalTable, SetGlobalTable, SetTable

    class MyTable(agentstream.Table):
        pass

    class MySet(SetTable):
        pass

    class MyGlobal(GlobalTable):
        pass

    class MySetGlobal(SetGlobalTable):
        pass

    app = agentstream.App(
        "table-classes", Table=MyTable, SetTable=MySet, GlobalTable=MyGlobal, SetGlobalTable=MySetGlobal
    )
    assert type(app.Table("a", default=int)) is MyTable
    assert type(app.SetTable("b")) is MySet
    assert type(app.GlobalTable("c", default=int)) is MyGlobal
    assert type(app.SetGlobalTable("d")) is MySetGlobal
    assert type(app.Table("e", default=int, is_global=True)) is MyGlobal
    with pytest.raises(agentstream.ConfigError) as err:
        agentstream.App("table-classes-bad", Table=dict)
    assert err.value.setting == "Table"


def test_monitor_and_worker_class_settings() -> None:
    from agentstream.sensors import Monitor

    class MyMonitor(Monitor):
        pass

    class MyWorker(agentstream.Worker):
        pass

    app = agentstream.App("class-settings", Monitor=MyMonitor, Worker=MyWorker)
    assert type(app.monitor) is MyMonitor
    worker = app.Worker(install_signal_handlers=False)
    assert type(worker) is MyWorker and worker.app is app
    plain = agentstream.App("class-default").Worker(install_signal_handlers=False)
    assert type(plain) is agentstream.Worker


async def test_blocking_timeout_warns_when_the_loop_is_blocked(caplog: pytest.LogCaptureFixture) -> None:
    import time

    app = agentstream.App("blocking", topic_partitions=1, blocking_timeout=0.05)

    @app.agent(app.topic("src", value_type=str))
    async def blocker(stream: Any) -> None:
        async for _ in stream:
            time.sleep(0.3)  # a blocking call in an agent

    with caplog.at_level(logging.WARNING, logger="agentstream.worker"):
        async with AppHarness(app) as h:
            await h.send("src", "a")
            await h.wait_idle()
            await _until(lambda: any("blocking_timeout" in r.getMessage() for r in caplog.records))
    assert any("event loop was blocked" in r.getMessage() for r in caplog.records)


async def test_stream_recovery_delay_waits_before_the_tasks_start() -> None:
    from agentstream.clock import VirtualClock, use_clock
    from agentstream.testing import use_memory

    app = agentstream.App("recovery-delay", topic_partitions=1, stream_recovery_delay=30.0)

    @app.agent(app.topic("src"))
    async def agent(stream: Any) -> None:
        async for _ in stream:
            pass

    use_memory(app, f"recovery-delay-{uuid.uuid4().hex[:8]}")
    clock = VirtualClock(1_700_000_000.0)
    use_clock(app, clock)
    app.settings = app.settings.replace(web_enabled=False, commit_interval=86_400.0)
    worker = Worker(app)
    try:
        await worker.start()
        await _until(lambda: bool(worker.tasks))  # assigned: the tasks exist
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert not worker.assigned.is_set()  # still waiting: 30 s of the app's clock have not passed
        clock.advance_to(clock.time() + 30.0)
        await asyncio.wait_for(worker.assigned.wait(), 10)
    finally:
        await worker.stop()


async def test_broker_commit_livelock_soft_timeout_warns_when_commits_stall(caplog: pytest.LogCaptureFixture) -> None:
    release, seen = asyncio.Event(), []
    app = _blocking_app("livelock", release, seen, broker_commit_livelock_soft_timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="agentstream.worker"):
        async with AppHarness(app, commit_interval=0.05) as h:
            await h.send("src", "a")
            await h.send("src", "b")
            await _until(lambda: any("livelock" in r.getMessage() for r in caplog.records))
            release.set()
            await h.wait_idle()
    told = [r.getMessage() for r in caplog.records if "broker_commit_livelock_soft_timeout" in r.getMessage()]
    assert len(told) == 1 and "agent slow" in told[0]
