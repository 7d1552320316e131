"""Determinism (issue 32): the same harness test run twice gives the same events in the same order.

The scenario has what could vary between runs: keyless records spread over partitions, a
repartition (group_by) into a second sub-topology, two tasks per sub-topology feeding one output
partition, a windowed table whose windows close, a timer, agents yielding, and an ``ask()`` (whose
reply topic name and correlation id a worker draws at random; the harness seeds them). Its full record
(every record appended to every topic, in append order, with partition, offset, key, value,
timestamp and headers; every yield; every timer tick and window close with the virtual time it saw)
must be equal between two runs in one process and between two processes with different hash seeds
(set and dict-of-str order differ there).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream.clock import VIRTUAL_EPOCH, clock_for
from agentstream.ids import new_id
from agentstream.testing import AppHarness

ROOT = Path(__file__).resolve().parents[3]
T0 = VIRTUAL_EPOCH


async def run_scenario(**settings: Any) -> dict[str, Any]:
    app = agentstream.App("determinism", broker="memory://", topic_partitions=2, **settings)
    clicks = app.topic("clicks", key_type=str, value_type=int)
    pings = app.topic("pings", value_type=int)  # keyless: the producer spreads them over the partitions
    out = app.topic("out", key_type=str, value_type=str, partitions=1)
    log: list[list[Any]] = []

    def closed(key: Any, value: Any) -> None:
        log.append(["closed", key[0], key[1][0] - T0, value, clock_for(app).time() - T0])

    per_user = app.Table("per_user", default=int).tumbling(10, expires=20, grace=2, on_window_close=closed)

    @app.agent(clicks)
    async def count(stream: Any) -> Any:
        async for event in stream.group_by(lambda value: f"user{value % 3}", name="by_user").events():
            per_user[event.key] += 1
            await out.send(key=event.key, value=f"click {event.value}")
            await pings.send(value=event.value)
            yield event.value

    @app.agent(pings)
    async def echo(stream: Any) -> Any:
        async for event in stream.events():
            await out.send(key=None, value=f"ping {event.value} from {event.partition}")
            yield event.value * 10

    @app.timer(7.0)
    async def tick() -> None:
        log.append(["tick", clock_for(app).time() - T0])
        await out.send(key="timer", value="tick")

    async with AppHarness(app, virtual_time=True) as h:
        for i in range(12):
            await h.send("clicks", i, key=f"page{i % 5}", timestamp=T0 + i * 3)
        await h.advance(30)
        await h.send("clicks", 99, key="late", timestamp=T0 + 1)  # late for every window by now
        await h.advance(10)
        log.append(["asked", await echo.ask(value=5)])  # a reply topic and correlation ids: seeded
        await h.settle()
    return {
        "events": [
            [r.topic, r.partition, r.offset, repr(r.key), repr(r.value), r.timestamp - T0, repr(r.headers)]
            for r in h.sent()
        ],
        "yields": [[y.agent, y.value, y.topic, y.partition, y.offset] for y in h.yields("count") + h.yields("echo")],
        "log": log,
    }


def _in_subprocess(hash_seed: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.asyncio
async def test_the_same_scenario_twice_in_one_process_gives_the_same_events() -> None:
    first = json.loads(json.dumps(await run_scenario()))
    second = json.loads(json.dumps(await run_scenario()))
    assert first == second
    kinds = {e[0] for e in first["events"]}
    assert {"clicks", "pings", "out", "determinism-by_user-repartition", "determinism-per_user-changelog"} <= kinds
    assert len({e[1] for e in first["events"] if e[0] == "pings"}) == 2  # keyless records went to both partitions
    assert [entry[0] for entry in first["log"]].count("tick") == 5  # 7, 14, 21, 28, 35 s
    assert any(entry[0] == "closed" for entry in first["log"])
    assert ["asked", 50] in first["log"] and any(e[0].startswith("determinism-replies-") for e in first["events"])


@pytest.mark.asyncio
async def test_ids_are_seeded_for_the_run_only() -> None:
    app = agentstream.App("determinism-ids", broker="memory://", topic_partitions=1)
    app.topic("numbers", value_type=int)
    drawn = []
    for _ in range(2):
        async with AppHarness(app, virtual_time=True):
            drawn.append(new_id(app))
    assert drawn[0] == drawn[1]
    assert new_id(app) != new_id(app) != drawn[0]  # a worker's: random


def test_two_processes_with_different_hash_seeds_give_the_same_events() -> None:
    assert _in_subprocess("1") == _in_subprocess("2")


if __name__ == "__main__":  # the subprocess side of the test above
    print(json.dumps(asyncio.run(run_scenario())))
