"""The CLI's listings and ``reset`` never run agent code (an agent's preamble may open
connections or write somewhere): what they need of the topology comes from the declarations and
the broker. (They used to run every agent up to its first ``async for`` to find its split points.)"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.cli import main
from agentstream.transport.base import TopicSpec


def app_with_a_preamble(runs: list[str], broker: str = "memory://") -> agentstream.App:
    app = agentstream.App(f"clinocode{uuid.uuid4().hex[:6]}", broker=broker, topic_partitions=1)

    @app.agent(app.topic("orders", value_type=dict))
    async def by_user(stream: agentstream.Stream) -> None:
        runs.append("preamble")
        async for _ in stream.group_by(lambda v: v["user"], name="by_user"):
            pass

    return app


@pytest.mark.parametrize("command", [["agents"], ["agents", "--json"], ["topics"], ["topics", "--json"]])
def test_listings_do_not_run_the_agents(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    runs: list[str] = []
    app = app_with_a_preamble(runs)
    assert main(command, app=app) == 0
    assert "orders" in capsys.readouterr().out
    assert runs == []


def test_reset_offsets_names_the_existing_repartition_topics_without_running_the_agents(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    runs: list[str] = []
    app = app_with_a_preamble(runs, broker=f"memory://clinocode-{uuid.uuid4().hex[:6]}")
    repartition = f"{app.id}-by_user-repartition"
    other_apps = "someoneelse-by_user-repartition"

    async def create() -> None:
        await app.transport.ensure_topics([TopicSpec(repartition, 1), TopicSpec(other_apps, 1)])

    asyncio.run(create())
    assert main(["reset", "--offsets", "--data-dir", str(tmp_path)], app=app) == 1  # the plan, without --yes
    out = capsys.readouterr().out
    assert f"rewind {repartition}, orders to the earliest offset" in out, out
    assert other_apps not in out
    assert runs == []
