"""Agents: ask_nowait, add_sink, agent.stream(), and the test fixture Faust's testing guide shows."""

from __future__ import annotations

from typing import Any

import faust

from .. import kit
from ..registry import scenario


@scenario("Faust's pytest fixture: app.finalize(), app.flow_control; test_context results keyed by offset")
async def testing_fixture_results_by_offset() -> Any:
    app = faust.App("compat-fixture", broker="kafka://localhost:9092")
    src = app.topic("compat-fixture-src", value_type=str)

    @app.agent(src)
    async def upper(stream: Any) -> Any:
        async for value in stream:
            yield value.upper()

    kit.setup(app)  # on agentstream: nothing; the guide's calls follow, as a Faust test suite has them
    app.finalize()
    app.conf.store = "memory://"
    app.flow_control.resume()
    async with upper.test_context() as agent:
        first = await agent.put("hey")
        second = await agent.put("you")
        print("by offset", agent.results[first.message.offset], agent.results[second.message.offset])
        return sorted(agent.results.items())


@scenario("agent.ask_nowait sends the request with reply_to and returns a ReplyPromise")
async def agent_ask_nowait() -> Any:
    app = faust.App("compat-asknw", broker="kafka://localhost:9092")
    src = app.topic("compat-asknw-src", value_type=int)

    @app.agent(src)
    async def double(stream: Any) -> Any:
        async for value in stream:
            yield value * 2

    kit.setup(app)
    promise = await double.ask_nowait(21, key="k", reply_to="compat-asknw-replies", correlation_id="c1")
    print("promise", type(promise).__name__, promise.reply_to, promise.correlation_id)
    # Faust puts reply_to/correlation_id in headers (use_reply_headers) or wraps the value
    return {"sent": kit.sent("compat-asknw-src"), "headers": kit.sent_headers("compat-asknw-src")}


@scenario("agent.add_sink: every value the agent yields goes to the sink (callable and topic)")
async def agent_add_sink() -> Any:
    app = faust.App("compat-sink", broker="kafka://localhost:9092")
    src = app.topic("compat-sink-src", value_type=int)
    out = app.topic("compat-sink-out", value_type=int)
    seen: list[int] = []

    @app.agent(src)
    async def square(stream: Any) -> Any:
        async for value in stream:
            yield value * value

    square.add_sink(seen.append)
    square.add_sink(out)
    kit.setup(app)
    async with square.test_context() as agent:
        for i in (2, 3):
            await agent.put(i)
    return {"callable": seen, "topic": kit.sent("compat-sink-out")}


@scenario("agent.stream(): a stream over the agent's channel")
async def agent_stream() -> Any:
    app = faust.App("compat-agstream", broker="kafka://localhost:9092")
    src = app.topic("compat-agstream-src", value_type=int)

    @app.agent(src)
    async def noop(stream: Any) -> None:
        async for _ in stream:
            pass

    kit.setup(app)
    s = noop.stream()
    return {"is_stream": isinstance(s, faust.Stream), "channel": s.channel.get_topic_name()}
