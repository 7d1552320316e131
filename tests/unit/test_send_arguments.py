"""Faust's send arguments (issue 40 items 2, 3): headers as a mapping, per-send serializers,
callback, reply_to/correlation_id on agent.send, ask() waiting as Faust's does. Side by side with
faust-streaming: tests/faust_compat/scenarios/sending.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import agentstream
from agentstream.agents.replies import CORRELATION_ID
from agentstream.testing import AppHarness
from agentstream.topics import prepare_headers


def test_prepare_headers_takes_a_mapping_or_pairs() -> None:
    assert prepare_headers({"a": b"1", "b": "2", "c": None}) == [("a", b"1"), ("b", b"2"), ("c", None)]
    assert prepare_headers((("a", b"1"),)) == [("a", b"1")]
    assert prepare_headers([(b"k", bytearray(b"v"))]) == [("k", b"v")]
    assert prepare_headers({}) is None and prepare_headers(None) is None
    with pytest.raises(TypeError, match=r"header 'n': a value must be bytes or str, got int"):
        prepare_headers({"n": 5})
    with pytest.raises(TypeError, match="a mapping or \\(name, value\\) pairs"):
        prepare_headers(["abc"])


def _app(name: str, **settings: Any) -> tuple[agentstream.App, Any, Any, list[Any]]:
    app = agentstream.App(name, broker="memory://", topic_partitions=1, **settings)
    src = app.topic("src", value_type=str)
    seen: list[Any] = []

    @app.agent(src)
    async def upper(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for event in stream.events():
            seen.append((event.key, event.value, dict(event.headers)))
            yield event.value.upper()

    return app, src, upper, seen


async def test_dict_headers_and_per_send_serializers_and_callbacks() -> None:
    app, src, upper, seen = _app("send-args")
    delivered: list[Any] = []
    async with AppHarness(app) as h:
        await src.send(key="k", value="a", headers={"h": b"1"})
        await app.send(src, value="b", headers={"h": "2"})
        await upper.send(value="c", headers={"h": b"3"}, callback=delivered.append)
        await upper.cast("d", headers={"h": b"4"}, timestamp=1_700_000_000.0)
        await src.send(key="k", value="e", value_serializer=_Shout(), callback=delivered.append)
        await h.wait_idle()
    assert [(v, hd.get("h")) for _, v, hd in seen] == [("a", b"1"), ("b", b"2"), ("c", b"3"), ("d", b"4"), ("E!", None)]
    assert len(delivered) == 2 and all(d.done() for d in delivered)


class _Shout:
    """A codec object given as ``value_serializer``: its bytes are what the agent reads."""

    def dumps(self, value: Any) -> bytes:
        return f'"{value.upper()}!"'.encode()

    def loads(self, data: bytes) -> Any:
        raise NotImplementedError


async def test_agent_send_reply_to_another_agent_sends_the_answer_there() -> None:
    app, src, upper, _ = _app("send-reply-to", reply_topics="answers")  # agentstream answers on allowed topics
    answers = app.topic("answers", value_type=str)
    got: list[Any] = []

    @app.agent(answers)
    async def collect(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            got.append((event.value, event.headers.get(CORRELATION_ID)))

    async with AppHarness(app) as h:
        await upper.send(value="x", reply_to=collect, correlation_id="c1")
        await h.wait_idle()
        await h.wait_idle()  # the reply, read by `collect`
    assert got == [("X", b"c1")]


async def test_ask_waits_past_thirty_seconds_unless_given_a_timeout() -> None:
    """Faust's ask has no timeout: the loop's clock is moved 60 s on while the agent holds the
    request, and the answer still arrives (before, ask gave up after 30 s)."""
    app = agentstream.App("ask-waits", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    release = asyncio.Event()
    holding = asyncio.Event()

    @app.agent(src)
    async def slow(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            holding.set()
            await release.wait()
            yield value * 2

    loop = asyncio.get_running_loop()
    real_time = loop.time
    async with AppHarness(app):
        asking = asyncio.ensure_future(slow.ask(21))
        await holding.wait()
        loop.time = lambda: real_time() + 60.0  # type: ignore[method-assign]
        try:
            await asyncio.sleep(0.05)  # any 30 s timer would fire now
            assert not asking.done()
            release.set()
            assert await asking == 42
        finally:
            del loop.time
        with pytest.raises(TypeError, match="ask_nowait"):
            await slow.ask(1, reply_to="elsewhere")
