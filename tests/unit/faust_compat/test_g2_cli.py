"""``agentstream -A app send @agent VALUE``: as in Faust (cli/base.py ``to_topic``), ``@name`` names an
agent (Faust imports it relative to the app's module), and the record goes to the agent's channel,
not to a topic literally named ``@name``."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest

import agentstream
from agentstream.cli import main
from agentstream.transport.memory import MemoryTransport

NAME = f"g2cli-{uuid.uuid4().hex[:8]}"
app = agentstream.App(NAME, broker=f"memory://{NAME}", store="memory://", web_enabled=False, topic_partitions=1)
jobs = app.topic("jobs", value_type=int)


@app.agent(jobs)
async def work(stream: agentstream.Stream) -> None:
    async for _ in stream:
        pass


def _make_topics() -> None:
    asyncio.run(app.transport.ensure_topics([t.spec() for t in app.topics.values()]))


@pytest.mark.parametrize("ref", ["@work", f"@{__name__}.work"])
def test_send_at_agent_goes_to_the_agents_channel(ref: str, capsys: pytest.CaptureFixture[str]) -> None:
    _make_topics()
    assert main(["send", ref, "7"], app=app) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert orjson.loads(line)["topic"] == "jobs"
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    assert [r.value for r in transport.read_topic("jobs")][-1] == b"7"


def test_send_at_an_unknown_agent_names_the_agents(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["send", "@wrok", "7"], app=app) == 2
    assert "@wrok names no agent" in capsys.readouterr().err
