"""Faust's app- and agent-level API (each behaviour checked against faust-streaming 0.15.3):
``agent.ask_nowait``/``add_sink``, ``app.send``, ``app.is_leader()``, client-only mode,
``app.finalize()``, ``app.flow_control`` and ``test_context().results`` keyed as Faust keys it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.testing import AppHarness


def new_app(**settings: Any) -> agentstream.App:
    name = f"g2-{uuid.uuid4().hex[:8]}"
    return agentstream.App(name, broker=f"memory://{name}", store="memory://", web_enabled=False, **settings)


# -- test_context results: Faust's dict, keyed by the count of values processed -------------------------------
async def test_results_are_keyed_by_offset_as_faust_documents() -> None:
    app = new_app()

    @app.agent(app.topic("t"))
    async def echo(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            yield value.upper()

    async with echo.test_context() as ctx:
        event = await ctx.put("hey")
        assert ctx.results[event.message.offset] == "HEY"  # Faust's documented pytest example
        event = await ctx.put("you")
        assert ctx.results[event.message.offset] == "YOU"
        assert isinstance(ctx.results, dict) and dict(ctx.results) == {0: "HEY", 1: "YOU"}
        assert ctx.results == ["HEY", "YOU"]  # agentstream's earlier list comparison still holds


async def test_results_count_every_yield_and_record_what_a_sinkless_agent_took() -> None:
    app = new_app()

    @app.agent(app.topic("t"))
    async def twice(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            yield value
            yield value * 10

    @app.agent(app.topic("u"))
    async def quiet(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    async with twice.test_context() as ctx:
        await ctx.put(1)
        await ctx.put(2)
        assert dict(ctx.results) == {0: 1, 1: 10, 2: 2, 3: 20}  # what Faust gives
    async with quiet.test_context() as ctx:
        await ctx.put("a")
        await ctx.put("b")
        assert dict(ctx.results) == {0: "a", 1: "b"}


# -- Faust's pytest fixture: app.finalize(), app.flow_control ----------------------------------------------------
async def test_faust_pytest_fixture_runs() -> None:
    app = new_app()

    @app.agent(app.topic("t"))
    async def echo(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            yield value

    app.finalize()  # Faust's documented fixture: finalize, memory store, resume flow control
    assert app.finalized
    app.conf.store = "memory://"  # type: ignore[misc]
    app.flow_control.resume()
    async with echo.test_context() as agent:
        event = await agent.put("hey")
        assert agent.results[event.message.offset] == "hey"


async def test_flow_control_suspends_and_resumes() -> None:
    flow = new_app().flow_control
    cleared: list[bool] = []
    flow.on_clear(lambda: cleared.append(True))
    flow.suspend()
    assert not flow.is_active()
    waiter = asyncio.ensure_future(flow.acquire())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiter.done()  # acquire() waits while flow is suspended
    flow.resume()
    await asyncio.wait_for(waiter, 5)
    assert flow.is_active() and cleared == [True]  # resume() clears, as Faust's does
    flow.clear()
    assert cleared == [True, True]


# -- app.send, app.is_leader() --------------------------------------------------------------------------------
async def test_app_send_to_a_topic_name_or_object() -> None:
    app = new_app(topic_partitions=1)
    seen: list[Any] = []
    topic = app.topic("numbers", value_type=int)

    @app.agent(topic)
    async def collect(stream: agentstream.Stream) -> None:
        async for value in stream:
            seen.append(value)

    delivered: list[Any] = []
    async with AppHarness(app) as h:
        md = await (await app.send("numbers", value=1))
        assert (md.topic, md.offset) == ("numbers", 0)
        await app.send(topic, key="k", value=2, callback=delivered.append)
        await app.send("numbers", value=b"3", value_serializer="raw")
        await h.wait_idle()
        assert app.is_leader()  # the only worker of the group leads it
        await asyncio.sleep(0)
    assert seen == [1, 2, 3]
    assert len(delivered) == 1
    assert not app.is_leader()  # no worker runs the app any more


# -- agent.add_sink, agent.ask_nowait, client-only mode ----------------------------------------------------------
async def test_add_sink_adds_once() -> None:
    app = new_app()
    got: list[Any] = []

    @app.agent(app.topic("t"))
    async def double(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            yield value * 2

    double.add_sink(got.append)
    double.add_sink(got.append)
    async with double.test_context() as ctx:
        await ctx.put(4)
    assert got == [8]


async def test_ask_nowait_needs_reply_to_and_its_promise_resolves(caplog: pytest.LogCaptureFixture) -> None:
    app = new_app(topic_partitions=1)

    @app.agent(app.topic("requests", value_type=int))
    async def square(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            yield value * value

    with pytest.raises(TypeError, match="Missing reply_to argument"):
        await square.ask_nowait(3)
    async with AppHarness(app):
        replies = await app.replies()
        promise = await square.ask_nowait(3, reply_to=replies.topic_name, correlation_id="c1")
        assert isinstance(promise, asyncio.Future)
        assert (promise.reply_to, promise.correlation_id) == (replies.topic_name, "c1")
        assert await asyncio.wait_for(promise, 10) == 9
        # any topic may be named, as in Faust; this app's agents answer only where reply_topics allows
        other = await square.ask_nowait(3, reply_to="some-other-topic")
        assert other.reply_to == "some-other-topic" and not other.done()
        assert "reply_topics" in caplog.text


async def test_start_client_sends_and_asks_without_consuming() -> None:
    app = new_app(topic_partitions=1)
    requests = app.topic("requests", value_type=int)

    @app.agent(requests)
    async def square(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            yield value * value

    async with AppHarness(app):  # the worker, in this process for the test
        client = agentstream.App(app.id, broker=app.settings.broker, store="memory://", web_enabled=False)
        client_agent = client.agent(client.topic("requests", value_type=int), name="square")(square.fun)
        await client.start_client()
        try:
            assert client.client_only and client.worker is None
            assert await client_agent.ask(5) == 25
        finally:
            await client.stop()


async def test_agent_stream_is_a_stream_over_the_agents_channel() -> None:
    app = new_app()
    channel = app.channel()

    @app.agent(channel)
    async def listen(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    stream = listen.stream()  # Faust: a new stream over the agent's channel
    assert isinstance(stream, agentstream.Stream)
    await channel.send(value="hello")
    assert await asyncio.wait_for(stream.__anext__(), 5) == "hello"
