"""Scenario of Faust's examples/advanced/rpc.py: an agent that asks another agent while handling
a request, ``agent.join`` and ``agent.map`` from a timer, and ``ask`` from a CLI command.
Faust prints ``JOINED: [...]`` with v**2 * 100 for each value, in the values' order, and one
``RECEIVED REPLY`` per value (in arrival order)."""

from collections.abc import AsyncIterable

import agentstream as faust
from agentstream import StreamT
from agentstream.faust.cli import argument

app = faust.App("fx-rpc", broker="kafka://localhost:9092", reply_create_topic=True, topic_partitions=2)
pow_topic = app.topic("fx-rpc-pow")
mul_topic = app.topic("fx-rpc-mul")

VALUES = [30.3, 40.4, 50.5]


@app.agent(pow_topic)
async def pow(stream: StreamT[float]) -> AsyncIterable[float]:
    async for value in stream:
        yield await mul.ask(value=value**2)


@app.agent(mul_topic)
async def mul(stream: StreamT[float]) -> AsyncIterable[float]:
    async for value in stream:
        yield value * 100.0


done = False


@app.timer(interval=1.0)
async def _sender() -> None:
    global done
    if done:
        return
    done = True
    res = await pow.join(VALUES)
    print(f"JOINED: {res!r}")
    async for value in pow.map(VALUES):
        print(f"RECEIVED REPLY: {value!r}")


@app.command(argument("x"))
async def x100(self, x: str) -> None:
    res = await mul.ask(float(x))
    print(f"{x} * 100 = {res}")
