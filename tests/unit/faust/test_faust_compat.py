"""Faust's API names on agentstream: settings, records with ``__faust`` metadata, codecs, channels,
services, crontab, CLI commands, stream.echo/ack."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import agentstream as faust
from agentstream import crontab
from agentstream.cli import main, option
from agentstream.faust_args import _logged
from agentstream.testing import AppHarness
from tests.support.waiting import until


# -- settings -----------------------------------------------------------------------------------------------
def test_faust_settings_are_translated_and_unknown_ones_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    _logged.discard("setting:cython_optimizations")
    with caplog.at_level(logging.INFO, logger="agentstream.faust"):
        app = faust.App(
            "f-settings",
            broker="memory://",
            broker_commit_interval=timedelta(seconds=2),
            broker_session_timeout=timedelta(seconds=30),
            stream_buffer_maxsize=50,
            cython_optimizations=True,
            datadir="/tmp/x",
            value_serializer="raw",
        )
        faust.App("f-settings-2", broker="memory://", cython_optimizations=True)
    assert app.settings.commit_interval == 2.0 and app.settings.session_timeout == 30.0
    assert app.settings.buffer_max_records == 50 and str(app.settings.data_dir) == "/tmp/x"
    assert app.value_serializer == "raw"
    lines = [r.getMessage() for r in caplog.records if "cython_optimizations" in r.getMessage()]
    assert len(lines) == 1 and "does not apply" in lines[0]  # not applicable: said once, with why
    assert not any("value_serializer" in r.getMessage() for r in caplog.records)


def test_topic_accepts_faust_arguments() -> None:
    app = faust.App("f-topic", broker="memory://")
    t = app.topic("t1", value_type=int, retention=timedelta(days=1), compacting=True, replicas=3, acks=True)
    assert t.compacted and t.config == {"retention.ms": str(86_400_000)}
    both = app.topic("a", "b")  # several names in one topic (issue 16)
    assert both.topics == ("a", "b") and {"a", "b"} <= set(app.topics)
    table = app.Table("totals", default=int, use_partitioner=True, changelog_topic=None)
    assert table.name == "totals"
    assert isinstance(app.SetGlobalTable("sg"), faust.SetGlobalTable)


# -- records -------------------------------------------------------------------------------------------------------
class Animal(faust.Record, include_metadata=True, namespace="test.Animal"):
    name: str


class Dog(Animal, namespace="test.Dog"):
    barks: bool = True


class Plain(faust.Record, coerce=True, decimals=False, include_metadata=False):
    x: int


class Tagged(faust.Record):
    x: int


def test_include_metadata_and_polymorphic_decoding() -> None:
    import orjson

    from agentstream import codecs

    data = orjson.loads(Dog(name="rex").dumps())
    assert data == {"name": "rex", "barks": True, "__faust": {"ns": "test.Dog"}}
    # A topic of Animals decodes a Dog payload as a Dog (Faust's registry lookup by namespace).
    value = codecs.codec_for(Animal).loads(Dog(name="rex").dumps())
    assert type(value) is Dog and value.barks
    # An untyped JSON topic turns Faust-serialized records into their models too.
    assert type(codecs.get("json").loads(Dog(name="a").dumps())) is Dog
    # include_metadata is on by default, as in Faust; include_metadata=False gives just the fields.
    assert orjson.loads(Tagged(x=1).dumps()) == {"x": 1, "__faust": {"ns": f"{__name__}.Tagged"}}
    assert orjson.loads(Plain(x=1).dumps()) == {"x": 1}


# -- codecs -----------------------------------------------------------------------------------------------------------
def test_faust_codec_api() -> None:
    from agentstream.faust.serializers import codecs

    class Reverse(codecs.Codec):
        def _dumps(self, obj: Any) -> bytes:
            return bytes(reversed(obj))

        def _loads(self, s: bytes) -> Any:
            return bytes(reversed(s))

    codecs.register("reverse", Reverse())
    chain = codecs.get_codec("json") | codecs.get_codec("binary")
    assert chain.loads(chain.dumps({"a": 1})) == {"a": 1}
    app = faust.App("f-codec", broker="memory://")
    topic = app.topic("rev", value_serializer="reverse")
    assert topic.value_codec.dumps(b"abc") == b"cba"
    assert codecs.loads("reverse", codecs.dumps("reverse", b"xy")) == b"xy"


# -- channels, services, timers --------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_channel_agent_handles_values_sent_in_process() -> None:
    app = faust.App("f-channel", broker="memory://")
    channel = app.channel(value_type=int)
    seen: list[int] = []

    @app.agent(app.topic("unused"))  # AppHarness waits for an assignment: give the group a topic
    async def idle(stream: faust.Stream) -> None:
        async for _ in stream:
            pass

    @app.agent(channel)
    async def double(stream: faust.Stream) -> Any:
        async for value in stream:
            seen.append(value)
            yield value * 2

    async with AppHarness(app):
        await channel.send(value=1)
        await channel.send(value=2)
        assert await double.ask(21) == 42
        await until(lambda: len(seen) == 3, "the agent saw three values")
    assert seen == [1, 2, 21]


@pytest.mark.asyncio
async def test_service_lifecycle_task_and_timer() -> None:
    events: list[str] = []

    class Svc(faust.Service):
        async def on_start(self) -> None:
            events.append("start")

        async def on_stop(self) -> None:
            events.append("stop")

        @faust.Service.task
        async def _bg(self) -> None:
            while not self.should_stop:
                events.append("bg")
                await self.sleep(10)

        @faust.Service.timer(0.01)
        async def _tick(self) -> None:
            events.append("tick")

    async with Svc():
        await until(lambda: events.count("tick") >= 2 and "bg" in events, "two ticks and the task")
    assert events[0] == "start" and events[-1] == "stop"
    assert events.count("bg") == 1 and events.count("tick") >= 2


def test_crontab_next_fire_times() -> None:
    t = datetime(2024, 1, 31, 23, 59, 30, tzinfo=UTC)
    assert crontab.next_fire("*/15 * * * *", t) == datetime(2024, 2, 1, 0, 0, tzinfo=UTC)
    assert crontab.next_fire("30 9 * * mon-fri", t) == datetime(2024, 2, 1, 9, 30, tzinfo=UTC)
    assert crontab.next_fire("0 0 29 2 *", t) == datetime(2024, 2, 29, tzinfo=UTC)
    assert crontab.next_fire("@hourly", t) == datetime(2024, 2, 1, 0, 0, tzinfo=UTC)
    # dom and dow both restricted: either matches (Vixie cron); Feb 1 2024 is a Thursday.
    assert crontab.next_fire("0 12 15 * thu", t) == datetime(2024, 2, 1, 12, 0, tzinfo=UTC)
    ny = crontab.next_fire("0 8 * * *", t, tz="America/New_York")
    assert ny.hour == 8 and ny.astimezone(UTC) == datetime(2024, 2, 1, 13, 0, tzinfo=UTC)
    for bad in ("* * *", "61 * * * *", "* * * foo *", "5-1 * * * *"):
        with pytest.raises(crontab.CronError):
            crontab.CronSchedule(bad)
    with pytest.raises(crontab.CronError):
        crontab.next_fire("0 0 30 2 *", t)


def test_app_timer_accepts_timedelta_and_crontab_registers() -> None:
    app = faust.App("f-timer", broker="memory://")

    @app.timer(timedelta(milliseconds=250), on_leader=True)
    async def tick() -> None: ...

    @app.crontab("0 * * * *", timezone="Europe/Paris")
    async def hourly() -> None: ...

    assert app.timers[0].interval == 0.25 and app.timers[0].on_leader
    assert len(app.startup_tasks) == 1
    with pytest.raises(crontab.CronError):
        app.crontab("not cron")


# -- CLI commands -------------------------------------------------------------------------------------------------------
def test_app_command_with_options(capsys: pytest.CaptureFixture[str]) -> None:
    app = faust.App("f-cmd", broker="memory://")
    calls: list[Any] = []

    @app.command(
        option("--count", type=int, default=1),
        option("--dry-run", is_flag=True),
        option("--tag", multiple=True),
        faust.cli.argument("name"),
    )
    async def greet_all(self: Any, name: str, count: int, dry_run: bool, tag: list[str]) -> None:
        """Say hello."""
        calls.append((name, count, dry_run, tag))
        self.say(f"hello {name}")

    @app.command()
    def plain() -> int:
        calls.append("plain")
        return 3

    assert main(["greet-all", "bob", "--count", "3", "--dry-run", "--tag", "a", "--tag", "b"], app=app) == 0
    assert main(["plain"], app=app) == 3
    assert calls == [("bob", 3, True, ("a", "b")), "plain"]  # click gives tuples, as in Faust
    assert "hello bob" in capsys.readouterr().out


def test_models_and_reset_commands(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    from tests.faust_apps.word_count import app

    assert main(["-A", "tests.faust_apps.word_count", "models"]) == 0
    assert "tests.faust_apps.word_count.Word" in capsys.readouterr().out
    assert main(["-A", "tests.faust_apps.word_count", "model", "Word"]) == 0
    assert "word\tstr" in capsys.readouterr().out
    saved = app.settings
    try:
        store = tmp_path / "faust-word-count" / "tables" / "word_counts" / "0"
        store.mkdir(parents=True)
        assert main(["-A", "tests.faust_apps.word_count", "reset", "--data-dir", str(tmp_path)]) == 1
        assert store.exists()  # without --yes nothing is deleted
        assert main(["-A", "tests.faust_apps.word_count", "reset", "--data-dir", str(tmp_path), "--yes"]) == 0
        assert not store.exists()
    finally:
        app.settings = saved


# -- streams --------------------------------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_stream_echo_ack_and_current_event() -> None:
    app = faust.App("f-stream", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    copy = app.topic("copy", value_type=int)
    acked: list[bool] = []

    @app.agent(src)
    async def agent(stream: faust.Stream) -> None:
        evens = stream.echo(copy).filter(lambda v: v % 2 == 0)
        async for value in evens:
            event = evens.current_event
            assert event is not None and event.value == value and faust.current_event() is event
            acked.append(evens.ack(event))
            acked.append(evens.ack(event))

    async with AppHarness(app) as h:
        for i in range(4):
            await h.send("src", i)
        await h.wait_idle()
        assert [v for _, v in h.read("copy")] == [0, 1, 2, 3]
    assert acked == [True, False, True, False]  # a second ack of the same event is a no-op
