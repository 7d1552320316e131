"""The app's exception handlers (KIP-1033 / KIP-1034), agent retries and the dead-letter headers,
shown on the in-process harness: every answer of each handler, and what a dead letter carries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import agentstream
from agentstream.error_handling import ErrorAnswer, ErrorContext
from agentstream.exceptions import ConfigError
from agentstream.testing import AppHarness
from agentstream.transport.base import TP
from agentstream.transport.memory import MemoryTransport


def _app(name: str, **settings: Any) -> agentstream.App:
    return agentstream.App(name, broker="memory://", topic_partitions=1, **settings)


def _dead(app: agentstream.App) -> list[Any]:
    return MemoryTransport.read_topic(app.transport, app.settings.dead_letter_topic)  # type: ignore[arg-type]


async def _committed(h: AppHarness, topic: str = "src") -> int | None:
    offset: int | None = await h.worker.consumer.committed(TP(topic, 0))
    return offset


def _fragile(app: agentstream.App, got: list[int]) -> None:
    src = app.topic("src", value_type=int)

    @app.agent(src)
    async def fragile(stream: agentstream.Stream) -> None:
        async for value in stream:
            if value == 2:
                raise RuntimeError("two is bad")
            got.append(value)


# -- processing_exception_handler ----------------------------------------------------------------


@pytest.mark.parametrize("answer", ["continue", ErrorAnswer.CONTINUE])
async def test_continue_skips_the_record_whatever_the_policy(answer: Any) -> None:
    seen: list[ErrorContext] = []

    def handler(ctx: ErrorContext) -> Any:
        seen.append(ctx)
        return answer

    app = _app("h-continue", on_agent_error="stop", processing_exception_handler=handler)
    got: list[int] = []
    _fragile(app, got)
    async with AppHarness(app) as h:
        for i in range(4):
            await h.send("src", i, key=f"k{i}")
        await h.wait_idle()
        assert await _committed(h) == 4
        assert _dead(app) == []
    assert got == [0, 1, 3]
    (ctx,) = seen
    assert (ctx.stage, ctx.topic, ctx.partition, ctx.offset, ctx.agent) == ("agent", "src", 0, 2, "fragile")
    assert (ctx.raw_key, ctx.raw_value, ctx.key, ctx.value) == (b"k2", b"2", b"k2", 2)
    assert isinstance(ctx.exception, RuntimeError) and ctx.attempts == 1 and ctx.source == "src[0]@2"


async def test_fail_stops_without_committing_the_record_whatever_the_policy() -> None:
    app = _app("h-fail", on_agent_error="skip", processing_exception_handler=lambda ctx: "fail")
    got: list[int] = []
    _fragile(app, got)
    async with AppHarness(app) as h:
        for i in range(4):
            await h.send("src", i)
        with pytest.raises(agentstream.AgentStreamError, match="src\\[0\\]@2.*'fail'"):
            await h.wait_idle()
        committed = await _committed(h)
    assert committed is None or committed <= 2
    assert 3 not in got


async def test_dead_letter_answer_copies_the_record_with_kip_1034_headers() -> None:
    async def handler(ctx: ErrorContext) -> ErrorAnswer:  # a coroutine function answers too
        return ErrorAnswer.DEAD_LETTER

    app = _app("h-dlq", processing_exception_handler=handler)  # policy skip: the handler decides
    got: list[int] = []
    _fragile(app, got)
    async with AppHarness(app) as h:
        for i in range(4):
            await h.send("src", i, key=f"k{i}", headers={"trace": b"t-2"})
        await h.wait_idle()
        (dead,) = _dead(app)
    assert got == [0, 1, 3]
    assert (dead.key, dead.value) == (b"k2", b"2")  # the original bytes
    headers = dict(dead.headers)
    assert headers["trace"] == b"t-2"  # the record's own headers stay
    assert headers["__streams.errors.exception"] == b"builtins.RuntimeError"
    assert headers["__streams.errors.message"] == b"two is bad"
    assert b"Traceback" in headers["__streams.errors.stacktrace"]
    assert b"two is bad" in headers["__streams.errors.stacktrace"]
    assert (headers["__streams.errors.topic"], headers["__streams.errors.partition"]) == (b"src", b"0")
    assert headers["__streams.errors.offset"] == b"2"
    # agentstream's own, read by AppHarness.dead_letters() and earlier tools
    assert headers["agentstream-error"] == b"RuntimeError: two is bad"
    assert headers["agentstream-source"] == b"src[0]@2"


async def test_none_leaves_the_record_to_the_policy_and_decode_errors_reach_the_handler() -> None:
    seen: list[tuple[str, int]] = []

    def handler(ctx: ErrorContext) -> str | None:
        seen.append((ctx.stage, ctx.offset))
        return "dead-letter" if ctx.stage == "decode" else None

    app = _app("h-none", on_agent_error="skip", processing_exception_handler=handler)
    got: list[int] = []
    _fragile(app, got)
    async with AppHarness(app) as h:
        await h.send("src", 1)
        await app.topic("src").send_raw(None, b"not json")
        await h.send("src", 2)
        await h.send("src", 3)
        await h.wait_idle()
        dead = _dead(app)
    assert seen == [("decode", 1), ("agent", 2)]
    assert got == [1, 3]
    assert [(d.value, dict(d.headers)["agentstream-error-stage"]) for d in dead] == [(b"not json", b"decode")]


@pytest.mark.parametrize("handler", [lambda ctx: 1 / 0, lambda ctx: "maybe"])
async def test_a_broken_handler_fails_the_record(handler: Any) -> None:
    app = _app("h-broken", processing_exception_handler=handler)
    got: list[int] = []
    _fragile(app, got)
    async with AppHarness(app) as h:
        for i in range(4):
            await h.send("src", i)
        with pytest.raises(agentstream.AgentStreamError, match="processing_exception_handler"):
            await h.wait_idle()
        committed = await _committed(h)
    assert committed is None or committed <= 2


@pytest.mark.parametrize("name", ["processing_exception_handler", "production_exception_handler"])
def test_a_handler_that_is_not_callable_is_refused_naming_the_setting(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        _app("h-refused", **{name: "dead-letter"})


@pytest.mark.parametrize(("name", "value"), [("agent_retries", -1), ("agent_retry_backoff", 0)])
def test_bad_retry_settings_are_refused(name: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=name):
        _app("h-retry-refused", **{name: value})


# -- agent_retries --------------------------------------------------------------------------------


async def test_retry_waits_on_the_apps_clock_in_order_and_commits_nothing_past_the_record() -> None:
    calls: list[int] = []
    failures = {"left": 2}  # a web service down for two attempts

    app = _app("h-retry", agent_retries=3, agent_retry_backoff=10.0, on_agent_error="stop")
    src = app.topic("src", value_type=int)

    @app.agent(src)
    async def flaky(stream: agentstream.Stream) -> None:
        async for value in stream:
            calls.append(value)
            if value == 1 and failures["left"]:
                failures["left"] -= 1
                raise ConnectionError("service down")

    async with AppHarness(app, virtual_time=True) as h:
        for i in range(3):
            await h.send("src", i)
        assert calls == [0, 1] and await _committed(h) == 1  # waiting: nothing past record 1
        await h.advance(9.9)
        assert calls == [0, 1] and await _committed(h) == 1
        await h.advance(0.1)  # first backoff: 10 s
        assert calls == [0, 1, 1] and await _committed(h) == 1
        await h.advance(19.9)  # the second doubles
        assert calls == [0, 1, 1]
        await h.advance(0.1)
        assert calls == [0, 1, 1, 1, 2]  # then in order
        assert await _committed(h) == 3


async def test_retries_exhausted_go_to_the_final_answer_with_the_attempts() -> None:
    seen: list[int] = []

    def handler(ctx: ErrorContext) -> str:
        seen.append(ctx.attempts)
        return "dead-letter"

    app = _app("h-retry-final", agent_retries=2, agent_retry_backoff=1.0, processing_exception_handler=handler)
    calls: list[int] = []
    src = app.topic("src", value_type=int)

    @app.agent(src)
    async def broken(stream: agentstream.Stream) -> None:
        async for value in stream:
            calls.append(value)
            if value == 1:
                raise ConnectionError("still down")

    async with AppHarness(app, virtual_time=True) as h:
        for i in range(3):
            await h.send("src", i)
        await h.advance(1.0)
        await h.advance(2.0)
        assert await _committed(h) == 3
        (dead,) = _dead(app)
    assert calls == [0, 1, 1, 1, 2] and seen == [3]
    assert dict(dead.headers)["__streams.errors.message"] == b"still down"


async def test_without_retries_the_record_is_not_run_again() -> None:
    app = _app("h-no-retry")
    got: list[int] = []
    _fragile(app, got)
    async with AppHarness(app, virtual_time=True) as h:
        for i in range(4):
            await h.send("src", i)
        await h.advance(100)
        assert await _committed(h) == 4
    assert got == [0, 1, 3]


# -- production_exception_handler -----------------------------------------------------------------


class Unserialisable:
    """json cannot encode it."""


def _producing(app: agentstream.App, sent: list[Any]) -> None:
    src = app.topic("src", value_type=int)
    out = app.topic("out", value_type=int)
    app.topic("narrow", partitions=1)

    @app.agent(src)
    async def produce(stream: agentstream.Stream) -> None:
        async for value in stream:
            if value == 2:
                sent.append(await out.send(value=Unserialisable()))  # not serialisable
            elif value == 3:
                sent.append(await app.topics["narrow"].send(value=3, partition=5))  # no such partition
            else:
                await out.send(value=value)


@pytest.mark.parametrize("answer", ["continue", "dead-letter"])
async def test_production_handler_continue_and_dead_letter(answer: str) -> None:
    seen: list[ErrorContext] = []

    def handler(ctx: ErrorContext) -> str:
        seen.append(ctx)
        return answer

    app = _app(f"p-{answer}", production_exception_handler=handler)
    sent: list[Any] = []
    _producing(app, sent)
    async with AppHarness(app) as h:
        for i in range(5):
            await h.send("src", i)
        await h.wait_idle()
        out = [v for _, v in h.read("out")]
        dead = _dead(app)
    assert out == [0, 1, 4]
    assert [(c.stage, c.sink_topic, c.offset) for c in seen] == [("produce", "out", 2), ("produce", "narrow", 3)]
    assert isinstance(seen[0].sink_value, Unserialisable) and seen[0].raw_value == b"2"
    assert type(seen[1].exception).__name__ == "RecordRejected"
    assert [s.result() for s in sent] == [None, None]  # the delivery of a send not made
    if answer == "continue":
        assert dead == []
    else:
        assert [d.value for d in dead] == [b"2", b"3"]
        assert [dict(d.headers)["agentstream-error-stage"] for d in dead] == [b"produce", b"produce"]
        assert dict(dead[1].headers)["__streams.errors.exception"] == b"agentstream.exceptions.RecordRejected"


async def test_production_handler_fail_stops_without_committing_the_record() -> None:
    app = _app("p-fail", on_agent_error="skip", production_exception_handler=lambda ctx: "fail")
    sent: list[Any] = []
    _producing(app, sent)
    async with AppHarness(app) as h:
        for i in range(5):
            await h.send("src", i)
        with pytest.raises(agentstream.AgentStreamError, match="production_exception_handler answered fail"):
            await h.wait_idle()
        committed = await _committed(h)
    assert committed is None or committed <= 2


async def test_production_handler_none_keeps_the_errors_course() -> None:
    """None (or no handler): a value that does not serialise goes to on_agent_error as before."""
    app = _app("p-none", on_agent_error="dead-letter", production_exception_handler=lambda ctx: None)
    src = app.topic("src", value_type=int)
    out = app.topic("out", value_type=int)

    @app.agent(src)
    async def produce(stream: agentstream.Stream) -> None:
        async for value in stream:
            await out.send(value=Unserialisable() if value == 1 else value)

    async with AppHarness(app) as h:
        for i in range(3):
            await h.send("src", i)
        await h.wait_idle()
        assert [v for _, v in h.read("out")] == [0, 2]
        assert [dict(d.headers)["agentstream-error-stage"] for d in _dead(app)] == [b"agent"]


# -- reading and replaying dead letters (agentstream.dead_letters: the CLI's dead-letters command) --


async def test_dead_letters_are_listed_and_a_replay_reprocesses_the_fixed_records_once() -> None:
    from agentstream.dead_letters import choose, read_dead_letters, replay

    app = _app("dl-replay", on_agent_error="dead-letter")
    src = app.topic("src", value_type=int)
    bug = {"on": True}
    got: list[tuple[int, tuple[tuple[str, bytes], ...]]] = []

    @app.agent(src)
    async def picky(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            if bug["on"] and event.value % 2:
                raise ValueError(f"odd {event.value}")
            got.append((event.value, tuple(event.headers.items())))

    async with AppHarness(app) as h:
        for i in range(6):
            await h.send("src", i, key=f"k{i}", headers={"trace": f"t{i}".encode()})
        await h.wait_idle()
        letters = await read_dead_letters(app)
        assert [(d.offset, d.source, d.exception, d.message) for d in letters] == [
            (0, "src[0]@1", "builtins.ValueError", "odd 1"),
            (1, "src[0]@3", "builtins.ValueError", "odd 3"),
            (2, "src[0]@5", "builtins.ValueError", "odd 5"),
        ]
        assert [d.offset for d in choose(letters, first=1, last=2)] == [1, 2]
        bug["on"] = False  # the fix
        await replay(app, choose(letters, first=1))
        await h.wait_idle()
        assert [v for v, _ in got] == [0, 2, 4, 3, 5]  # once each; 1 was not chosen
        assert dict(got[3][1]) == {"trace": b"t3"}  # the record's own headers, no error headers
        replayed = MemoryTransport.read_topic(app.transport, "src")[-2:]  # type: ignore[arg-type]
        assert [(m.key, m.value) for m in replayed] == [(b"k3", b"3"), (b"k5", b"5")]
        assert len(await read_dead_letters(app)) == 3  # nothing new dead-lettered


def test_a_letter_that_does_not_say_where_it_came_from_is_listed_and_not_replayed() -> None:
    from agentstream.dead_letters import parse
    from agentstream.transport.message import Message

    bad = Message("x-dead-letters", 0, 7, 1000, 0, b"k", b"v", None, 1, 1, [("__streams.errors.topic", b"../etc")])
    letter = parse(bad)
    assert (letter.source, letter.source_topic, letter.offset) == ("?", "", 7)
    own = [("agentstream-source", b"src[2]@41"), ("agentstream-error", b"KeyError: 'a'")]
    old = Message("x-dead-letters", 0, 8, 1000, 0, b"k", b"v", None, 1, 1, own)
    assert (parse(old).source, parse(old).exception, parse(old).message) == ("src[2]@41", "KeyError", "'a'")


async def test_a_worker_stopping_during_a_retry_wait_stops_at_once_without_committing_the_record() -> None:
    app = _app("h-retry-stop", agent_retries=5, agent_retry_backoff=3600.0)
    calls: list[int] = []
    src = app.topic("src", value_type=int)

    @app.agent(src)
    async def down(stream: agentstream.Stream) -> None:
        async for value in stream:
            calls.append(value)
            raise ConnectionError("down")

    h = AppHarness(app, virtual_time=True)
    async with h:
        await h.send("src", 0)
        await h.send("src", 1)
        assert calls == [0] and await _committed(h) in (None, 0)
        await asyncio.wait_for(h.worker.stop(), 10)  # the hour-long wait ends with the task
        assert calls == [0]  # nothing past the record either
