"""The topology is found from each agent's first instance, which is kept: agent code runs only to
handle records, as many times as Faust runs it (once per agent instance), never once more for
discovery nor in the stages before a ``group_by``/``through`` (those only forward)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

import agentstream
import agentstream.topology
from agentstream.exceptions import StopProcessing, TopologyError
from agentstream.testing import AppHarness


def new_app(**settings: Any) -> agentstream.App:
    return agentstream.App(
        f"first{uuid.uuid4().hex[:6]}",
        broker="memory://",
        store="memory://",
        web_enabled=False,
        **{"topic_partitions": 4, **settings},
    )


@pytest.mark.parametrize("concurrency", [1, 3])
@pytest.mark.parametrize("split", ["none", "group_by", "through"])
async def test_the_preamble_runs_once_per_agent_instance_as_in_faust(concurrency: int, split: str) -> None:
    """Faust runs an agent's body once per instance (``concurrency=N``: N); the code before
    ``async for`` runs exactly that often here too, with or without a split point."""
    app = new_app()
    runs: list[int] = []
    seen: list[tuple[Any, Any]] = []

    @app.agent(app.topic("src", value_type=dict), concurrency=concurrency)
    async def agent(stream: agentstream.Stream) -> None:
        runs.append(1)  # the preamble
        if split == "group_by":
            stream = stream.group_by(lambda v: v["user"], name="by_user")
        elif split == "through":
            stream = stream.through("mid")
        async for key, value in stream.items():
            seen.append((key, value["n"]))

    async with AppHarness(app) as h:
        for n in range(12):
            await h.send("src", {"user": f"u{n % 3}", "n": n}, key=f"k{n}")
        await h.wait_idle()
        assert sorted(n for _, n in seen) == list(range(12))  # every record, once, after the split
        if split == "group_by":
            assert {k for k, _ in seen} == {"u0", "u1", "u2"}  # re-keyed by the group_by
        assert len(runs) == concurrency


async def test_the_preamble_runs_once_per_partition_task_without_concurrency() -> None:
    """Without ``concurrency=`` each partition's task runs its instance (partitions in parallel):
    on one partition that is Faust's one instance, with a group_by too (no run for discovery, none
    for the stage that forwards to the repartition topic)."""
    app = new_app(topic_partitions=1)
    runs: list[int] = []
    seen: list[Any] = []

    @app.agent(app.topic("src", value_type=dict))
    async def agent(stream: agentstream.Stream) -> None:
        runs.append(1)
        async for value in stream.group_by(lambda v: v["user"], name="by_user"):
            seen.append(value["n"])

    async with AppHarness(app) as h:
        for n in range(5):
            await h.send("src", {"user": "u", "n": n})
        await h.wait_idle()
        assert seen == [0, 1, 2, 3, 4]
        assert len(runs) == 1


async def test_operations_before_the_split_run_upstream_with_the_first_instances_closures() -> None:
    """The stage before a group_by runs the operations the agent made before it (a filter over a
    local of the preamble) and forwards; the body after the split sees only what passed."""
    app = new_app(topic_partitions=2)
    seen: list[int] = []

    @app.agent(app.topic("src", value_type=int))
    async def agent(stream: agentstream.Stream) -> None:
        threshold = 10  # a local of the preamble, used upstream
        async for value in stream.filter(lambda v: v >= threshold).group_by(lambda v: v % 2, name="parity"):
            seen.append(value)

    async with AppHarness(app) as h:
        for n in (1, 12, 5, 30, 11):
            await h.send("src", n, key=str(n))
        await h.wait_idle()
        assert sorted(seen) == [11, 12, 30]


async def test_a_preamble_that_raises_does_not_fail_the_start_the_error_policy_handles_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first run's preamble raises (a service not up yet): the worker starts, the error is the
    agent's (logged with its name), the agent is restarted, and then handles the records."""
    app = new_app(topic_partitions=1, agent_restart_backoff=0.01)
    runs: list[int] = []
    seen: list[int] = []

    @app.agent(app.topic("src", value_type=int))
    async def agent(stream: agentstream.Stream) -> None:
        runs.append(1)
        if len(runs) == 1:
            raise ConnectionError("enrichment service not up yet")
        async for value in stream:
            seen.append(value)

    caplog.set_level(logging.WARNING)
    async with AppHarness(app) as h:
        for n in range(3):
            await h.send("src", n)
        await h.wait_idle()
        assert seen == [0, 1, 2]
    assert len(runs) == 2
    assert any("agent" in r.getMessage() and "enrichment service not up yet" in r.getMessage() for r in caplog.records)


async def test_a_transient_preamble_error_does_not_hide_a_group_by_made_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first run raises before its group_by: it is restarted (agent_restart_backoff, logged
    with the agent's name) until a run reaches its ``async for``, so the split point is found."""
    app = new_app(topic_partitions=1, agent_restart_backoff=0.01)
    runs: list[int] = []
    seen: list[tuple[Any, int]] = []

    @app.agent(app.topic("src", value_type=int))
    async def flaky(stream: agentstream.Stream) -> None:
        runs.append(1)
        if len(runs) < 3:
            raise ConnectionError("database not up yet")
        async for key, value in stream.group_by(lambda v: f"p{v % 2}", name="parity").items():
            seen.append((key, value))

    caplog.set_level(logging.WARNING)
    async with AppHarness(app) as h:
        for n in range(4):
            await h.send("src", n)
        await h.wait_idle()
        assert sorted(seen) == [("p0", 0), ("p0", 2), ("p1", 1), ("p1", 3)]
    assert len(runs) == 3  # two failed runs, then the one that handles the records
    assert sum("flaky" in r.getMessage() and "database not up yet" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.parametrize(
    "settings,runs_before_stop,error",
    [
        ({"agent_restart_max": 2}, 3, ConnectionError),  # the first run and 2 restarts, then the error stops it
        ({"on_agent_error": "stop"}, 1, StopProcessing),  # 'stop': the first error stops the worker
    ],
    ids=["restart_max", "stop"],
)
async def test_a_preamble_that_always_raises_is_stopped_by_the_error_policy(
    settings: dict[str, Any], runs_before_stop: int, error: type[BaseException]
) -> None:
    app = new_app(topic_partitions=1, agent_restart_backoff=0.01, **settings)
    runs: list[int] = []

    @app.agent(app.topic("src", value_type=int))
    async def agent(stream: agentstream.Stream) -> None:
        runs.append(1)
        raise ConnectionError("no service")
        async for _ in stream:  # pragma: no cover
            pass

    async with AppHarness(app) as h:
        await h.send("src", 1)
        with pytest.raises(error, match="no service"):
            await h.wait_idle(timeout=10)
    assert len(runs) == runs_before_stop


async def test_a_group_by_made_after_discovery_gave_up_waiting_stops_the_worker_naming_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The first instance takes longer than the discovery bound to reach its group_by: a warning
    names the agent, the worker starts with the split points known, and the group_by made later is
    an error naming the agent and the split, never a record sent nowhere."""
    monkeypatch.setattr(agentstream.topology, "DISCOVERY_TIMEOUT", 0.05, raising=False)
    app = new_app(topic_partitions=1)
    go = asyncio.Event()

    @app.agent(app.topic("src", value_type=int))
    async def slow(stream: agentstream.Stream) -> None:
        await go.wait()  # e.g. a slow connection in the preamble
        async for _ in stream.group_by(lambda v: v, name="late"):
            pass

    caplog.set_level(logging.WARNING)
    async with AppHarness(app) as h:
        assert any("agent" in r.getMessage() and "slow" in r.getMessage() for r in caplog.records)
        go.set()
        await h.send("src", 1)
        with pytest.raises(TopologyError, match=r"slow.*group_by\('late'\)"):
            await h.wait_idle(timeout=10)


async def test_a_group_by_made_inside_the_loop_stops_the_worker_naming_it() -> None:
    """A split point made after the first record is not in the topology: the worker stops with an
    error naming the agent and the split (it used to be an agent error per record, each skipped)."""
    app = new_app(topic_partitions=1)

    @app.agent(app.topic("src", value_type=int))
    async def inside(stream: agentstream.Stream) -> None:
        async for value in stream:
            async for _ in stream.group_by(lambda v: v, name=f"in_loop_{value}"):
                pass

    async with AppHarness(app) as h:
        await h.send("src", 1)
        with pytest.raises(TopologyError, match=r"inside.*group_by\('in_loop_1'\)"):
            await h.wait_idle(timeout=10)


async def test_discovery_alone_runs_the_preamble_once_and_stops_the_instance() -> None:
    """``app.discover()`` outside a worker: the split points, the first instance stopped after."""
    app = new_app()
    runs: list[str] = []

    @app.agent(app.topic("src", value_type=int))
    async def agent(stream: agentstream.Stream) -> None:
        runs.append("preamble")
        try:
            async for _ in stream.group_by(lambda v: v, name="k"):
                pass
        finally:
            runs.append("stopped")

    assert await app.discover() == {}
    assert [p.name for p in agent.splits] == ["k"]
    assert runs == ["preamble", "stopped"]
