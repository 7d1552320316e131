"""Faust's examples/ scenarios (tests/faust_examples, issue 16) on the real broker: each app runs as
``python -m agentstream -A tests.faust_examples.X worker`` (all started together against the session
broker) and its output is checked against what the same scenario prints under faust-streaming."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstream.devbroker import DevBroker

from .cluster import ROOT, Worker, worker_env
from .test_faust_apps import http_json

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "faust_examples"
MODULES = ["bound_agent", "rpc", "service", "leader", "task_queue", "tableofset", "isolated_partitions", "concurrency"]


class ExampleWorker(Worker):
    def __init__(self, module: str, broker: DevBroker, data_dir: Path, *, web: bool = False) -> None:
        super().__init__(
            module, broker.url, data_dir, ARTIFACTS, app=f"tests.faust_examples.{module}", web_port=0 if web else None
        )

    @property
    def web_url(self) -> str:
        return self.wait_log(r"listening on (http://[0-9.]+:\d+)").group(1)


def cli(broker: DevBroker, module: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentstream", "-A", f"tests.faust_examples.{module}", *args],
        cwd=ROOT,
        env=worker_env(broker.url),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


@pytest.fixture(scope="module")
def workers(broker: DevBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ExampleWorker]]:
    data = tmp_path_factory.mktemp("faust-examples")
    # The concurrency example declares 2 partitions; its topic already exists with 3 (Faust reads all 3).
    asyncio.run(_create_topic(broker.bootstrap, "fx-concurrency", 3))
    started = {m: ExampleWorker(m, broker, data / m) for m in MODULES}
    started["tabletest"] = ExampleWorker("tabletest", broker, data / "tabletest", web=True)
    try:
        for _name, w in started.items():
            w.wait_log(r"worker for \S+ started")
        yield started
    finally:
        for w in started.values():
            w.stop_quietly()


def test_bound_agent_channels_only(workers: dict[str, ExampleWorker]) -> None:
    w = workers["bound_agent"]
    for i in range(9):
        if i % 3 == 2:
            w.wait_log(rf"STAGE2 {i}\b")
        else:
            w.wait_log(rf"DEAD stage{1 if i % 3 == 0 else 2} {i}\b")
    assert "joins no consumer group" in w.log()
    assert w.terminate() == 0
    log = w.log()
    assert "Unclosed" not in log and "Traceback" not in log
    assert sorted(int(x) for x in re.findall(r"STAGE2 (\d+)", log)) == [2, 5, 8]


def test_rpc_join_map_and_ask(broker: DevBroker, workers: dict[str, ExampleWorker]) -> None:
    from tests.faust_examples.rpc import VALUES

    w = workers["rpc"]
    expected = [(v**2) * 100.0 for v in VALUES]
    m = w.wait_log(r"JOINED: (\[.*\])")
    assert m.group(1) == repr(expected)  # join: in the values' order
    w.wait_log(r"RECEIVED REPLY", count=len(VALUES))
    got = sorted(float(x) for x in re.findall(r"RECEIVED REPLY: ([0-9.e+]+)", w.log()))
    assert got == sorted(expected)
    out = cli(broker, "rpc", "x100", "7")
    assert out.returncode == 0, out.stderr
    assert "7 * 100 = 700.0" in out.stdout


def test_service_agent_timer(workers: dict[str, ExampleWorker]) -> None:
    w = workers["service"]
    w.wait_log(r"Received: 'hello'", count=2)
    assert "[MyService] STARTED" in w.log()
    assert w.terminate() == 0
    assert "[MyService] STOPPED" in w.log()


def test_leader_timer_raw_values(workers: dict[str, ExampleWorker]) -> None:
    w = workers["leader"]
    w.wait_log(r"PUBLISHING ON LEADER!")
    w.wait_log(r"(?m)^b'0\.\d+'$")  # value_serializer='raw': the agent gets bytes, printed as Faust prints them


def test_task_queue(workers: dict[str, ExampleWorker]) -> None:
    w = workers["task_queue"]
    for i in range(5):
        w.wait_log(re.escape(f"Result of add({i}, {2 * i}) is: {3 * i}"))


def test_table_of_sets_with_commands(broker: DevBroker, workers: dict[str, ExampleWorker]) -> None:
    w = workers["tableofset"]
    for command, who in (("joining", "ann"), ("joining", "bob"), ("leaving", "ann")):
        out = cli(broker, "tableofset", command, "paris", who)
        assert out.returncode == 0, out.stderr
        w.wait_log(rf"- {who.capitalize()} {'joined' if command == 'joining' else 'left'} paris")
    w.wait_log(r"TABLE CUR paris: \['ann', 'bob'\]")
    w.wait_log(r"TABLE CUR paris: \['bob'\]")
    w.wait_log(r"TABLE NOW:\n\S*\n\+-+\+-+\+\n\| k +\| v +\|[\s\S]*\| paris \|")


def test_tabletest_counts_route_and_rebalance_signal(broker: DevBroker, workers: dict[str, ExampleWorker]) -> None:
    from tests.faust_examples.tabletest import EXPECTED_SUM

    w = workers["tabletest"]
    w.wait_log(r"\$\$ TALLY - after rebalance \$\$")  # on_rebalance_complete fired
    out = cli(broker, "tabletest", "produce")
    assert out.returncode == 0, out.stderr
    url = w.web_url
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = {p: http_json(f"{url}/count/{p}/")[str(p)] for p in range(4)}
        if got == {p: EXPECTED_SUM for p in range(4)}:
            break
        time.sleep(0.5)
    assert got == {p: EXPECTED_SUM for p in range(4)}
    assert "!!! PREV" not in w.log()
    w.wait_log(r"\| 3 +\| " + str(EXPECTED_SUM))  # the timer's table, printed when not rebalancing


def test_isolated_partitions_progress(broker: DevBroker, workers: dict[str, ExampleWorker]) -> None:
    w = workers["isolated_partitions"]
    out = cli(broker, "isolated_partitions", "produce", "--max-messages", "12")
    assert out.returncode == 0, out.stderr
    w.wait_log(r"Progressing: was \d+ now 12")
    for user in ("user_0", "user_1", "user_2"):
        w.wait_log(rf"COUNT {user} 4\b")
    assert "AssertionError" not in w.log()


def test_concurrency_on_an_existing_topic_with_another_partition_count(
    broker: DevBroker, workers: dict[str, ExampleWorker]
) -> None:
    w = workers["concurrency"]
    # "started" is logged before the group join ends: wait for the assignment, not on the tests before
    w.wait_log(r"assigned: .*fx-concurrency\[")
    assert w.last_assignment("fx-concurrency") == {0, 1, 2}  # the existing count, not the declared 2
    out = cli(broker, "concurrency", "producer")
    assert out.returncode == 0, out.stderr
    w.wait_log(r"HANDLED \d+", count=20)
    assert sorted(int(x) for x in re.findall(r"HANDLED (\d+)", w.log())) == list(range(20))
