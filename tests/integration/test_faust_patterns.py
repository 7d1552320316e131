"""Issue 44: four patterns from real Faust apps (tests/faust_patterns/app.py), each in a real worker
process on the dev broker, run under agentstream and, side by side, under faust-streaming (the
test-only virtualenv of tests/faust_takeover/faust_env.py), whose output is the reference.

Per framework, two workers start together: ``app`` (patterns 1-3, and the asking side of 4) and
``rpc_app`` (the agents ``app`` asks through its client-mode second App). Faust's side is skipped,
saying why, only when faust-streaming cannot be installed; agentstream's always runs.
``PATTERN_PARTS=3 pytest tests/integration/test_faust_patterns.py -k without_topic`` declares only
pattern 3 (and the rpc pair): one pattern's failure, on a build without its fix, is then seen
without another pattern stopping the worker at start first."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from agentstream.devbroker import DevBroker, free_port

from ..faust_takeover.faust_env import ensure_faust_venv
from .cluster import ROOT, worker_env

ARTIFACTS = ROOT / "artifacts" / "faust_patterns"
MODULE = "tests.faust_patterns.app"
WAIT = 60.0
RIDES = [("v1", 10.0), ("v2", 1.5), ("v1", 2.5), ("v3", 7.0), ("v2", 0.5), ("v1", 1.0)]


class PatternWorker:
    """One worker of ``MODULE`` (``app`` or ``rpc_app``) under one framework."""

    def __init__(self, framework: str, python: Path, broker: DevBroker, data: Path, prefix: str, attr: str) -> None:
        self.framework = framework
        self.port = free_port()
        xdist = os.environ.get("PYTEST_XDIST_WORKER", "")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.log_path = ARTIFACTS / f"{framework}-{attr}{'-' + xdist if xdist else ''}.log"
        data.mkdir(parents=True, exist_ok=True)  # Faust's data dir must exist
        env = worker_env(broker.url)
        env.pop("AGENTSTREAM_FAUST_VENV", None)  # the test's, not a worker setting (the worker would warn)
        env.update(PATTERN_PREFIX=prefix, PATTERN_BROKER=broker.url)
        spec = f"{MODULE}:{attr}"
        web = ["--web-port", str(self.port), "--web-host", "127.0.0.1"]
        if framework == "faust":
            env.update(  # tansu's short group timeouts, as tests/integration/test_faust_compat.py
                APP_DATADIR=str(data),
                BROKER_SESSION_TIMEOUT="6",
                BROKER_HEARTBEAT_INTERVAL="1",
                BROKER_REBALANCE_TIMEOUT="6",
                BROKER_COMMIT_INTERVAL="0.5",
                PRODUCER_ACKS="1",
            )
            argv = [str(python), "-m", "faust", "-A", spec, "worker", "-l", "info", *web]
        else:
            argv = [str(python), "-m", "tests.faust_compat.agentstream_cli", "-A", spec, "worker", "-l", "info"]
            argv += ["--data-dir", str(data), *web]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def outputs(self, name: str) -> list[Any]:
        return [json.loads(m.group(1)) for m in re.finditer(rf"PATTERN-OUT {name} (.*)", self.log())]

    def wait_outputs(self, name: str, count: int, timeout: float = WAIT) -> list[Any]:
        deadline = time.monotonic() + timeout
        while len(self.outputs(name)) < count and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            time.sleep(0.25)
        return self.outputs(name)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, deadline: float | None = None) -> None:
        """SIGTERM, then SIGKILL at ``deadline`` (monotonic; default: 10 s from now)."""
        self.terminate()
        if self.proc.poll() is None:
            left = 10.0 if deadline is None else max(0.1, deadline - time.monotonic())
            try:
                self.proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def http(worker: PatternWorker, path: str, timeout: float = WAIT) -> list[Any]:
    """``[status, content type, body]`` of a GET, retried while the worker's server is not up yet."""
    url = worker.url + path
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return [resp.status, resp.headers.get_content_type(), resp.read().decode()]
        except urllib.error.HTTPError as exc:
            return [exc.code, exc.headers.get_content_type(), exc.read().decode()[:300]]
        except OSError:
            if time.monotonic() > deadline or worker.proc.poll() is not None:
                return ["unreachable", None, None]
            time.sleep(0.25)


def produce(bootstrap: str, topic: str, records: list[tuple[str | None, Any]]) -> None:
    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1)
        await producer.start()
        try:
            for key, value in records:
                await producer.send(topic, json.dumps(value).encode(), key=None if key is None else key.encode())
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(send())


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    async def create() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(n, p, 1) for n, p in topics.items()])
        finally:
            await admin.close()

    asyncio.run(create())


def faust_topic_of_agent(prefix: str, agent: str) -> str:
    """Faust's implicit topic of an agent declared without one: ``<app id>-<module>.<name>``."""
    return f"pattern-{prefix}-{MODULE}.{agent}"


class Side:
    """One framework's two workers and what the test observed of them."""

    def __init__(self, framework: str, python: Path, broker: DevBroker, data: Path) -> None:
        self.framework = framework
        self.prefix = f"{framework[0]}{uuid.uuid4().hex[:6]}"
        # as the app's topics would be made (rides: 2 partitions, fewer than the tables' 8); made first,
        # so that what the test sends before the workers are up is not sent to an auto-created topic
        create_topics(
            broker.bootstrap,
            {
                f"pattern-{self.prefix}-rides": 2,
                f"pattern-{self.prefix}-questions": 8,
                faust_topic_of_agent(self.prefix, "order"): 8,
            },
        )
        self.app = PatternWorker(framework, python, broker, data / "app", self.prefix, "app")
        self.rpc = PatternWorker(framework, python, broker, data / "rpc", self.prefix, "rpc_app")
        self.broker = broker

    def workers(self) -> list[PatternWorker]:
        return [self.app, self.rpc]


@pytest.fixture(scope="module")
def sides(broker: DevBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    """agentstream's workers, and Faust's when faust-streaming can be installed, all started together;
    each side's input is sent at once (the groups read from the earliest offset)."""
    data = tmp_path_factory.mktemp("faust-patterns")
    pythons = {"agentstream": Path(sys.executable)}
    faust_py, why = ensure_faust_venv()
    if faust_py is not None:
        pythons["faust"] = faust_py
    else:
        print(f"faust-streaming cannot be installed in a test virtualenv ({why}): agentstream's side only")
    started: dict[str, Side] = {}
    try:
        for fw, py in pythons.items():
            started[fw] = Side(fw, py, broker, data / fw)
        for side in started.values():
            produce(broker.bootstrap, f"pattern-{side.prefix}-rides", [(v, {"vendor": v, "fare": f}) for v, f in RIDES])
            produce(broker.bootstrap, f"pattern-{side.prefix}-questions", [(None, 5)])
        yield started
    finally:  # every worker stops at once (Faust's stop takes seconds)
        workers = [w for side in started.values() for w in side.workers()]
        for w in workers:
            w.terminate()
        deadline = time.monotonic() + 8.0  # what the test reads is read: no need to wait for a slow stop
        for w in workers:
            w.stop(deadline)


def _faust(sides: dict[str, Side]) -> Side | None:
    return sides.get("faust")


# -- 1. the app's own pages at / and /status ---------------------------------------------------------
def test_app_pages_win_over_built_in_paths(sides: dict[str, Side]) -> None:
    side = sides["agentstream"]
    got = {p: http(side.app, p) for p in ("/", "/status")}
    assert got == {
        "/": [200, "text/html", "<h1>pattern index</h1>"],
        "/status": [200, "text/html", "<p>pattern status: ok</p>"],
    }, side.app.log()[-3000:]
    # the shadowed built-ins stay reachable under /agentstream/, and the worker says so once each
    status, ctype, body = http(side.app, "/agentstream/status")
    assert (status, ctype) == (200, "application/json") and json.loads(body)["app"] == f"pattern-{side.prefix}"
    index = json.loads(http(side.app, "/agentstream/")[2])
    assert "/agentstream/status" in index["endpoints"]
    log = side.app.log()
    for path in ("/", "/status"):
        shadowed = re.findall(rf"app page '{re.escape(path)}' takes the path of the built-in .*", log)
        assert len(shadowed) == 1, shadowed
    faust = _faust(sides)
    if faust is not None:
        assert got == {p: http(faust.app, p) for p in ("/", "/status")}


# -- 2. group_by from a 2-partition topic into an 8-partition tumbling table -----------------------------
def _fares(side: Side) -> dict[str, list[float]]:
    got = side.app.wait_outputs("fares", len(RIDES))
    per_vendor: dict[str, list[float]] = {}
    for vendor, total in got:
        per_vendor.setdefault(vendor, []).append(total)
    return per_vendor


def test_group_by_from_fewer_partitions_into_a_table(sides: dict[str, Side]) -> None:
    side = sides["agentstream"]
    got = _fares(side)
    assert got == {"v1": [10.0, 12.5, 13.5], "v2": [1.5, 2.0], "v3": [7.0]}, side.app.log()[-3000:]
    faust = _faust(sides)
    if faust is not None:
        assert got == _fares(faust)


# -- 3. an agent declared without a topic reads Faust's implicit topic --------------------------------------
def test_agent_without_topic_reads_fausts_topic_name(sides: dict[str, Side]) -> None:
    for side in sides.values():
        produce(side.broker.bootstrap, faust_topic_of_agent(side.prefix, "order"), [("o1", {"id": "o1", "amount": 3})])
    side = sides["agentstream"]
    got = side.app.wait_outputs("order", 1)
    assert got == [["o1", 3]], side.app.log()[-3000:]
    faust = _faust(sides)
    if faust is not None:
        assert got == faust.app.wait_outputs("order", 1)


# -- 4. ask through a second App started as a client ----------------------------------------------------------
def test_ask_through_a_second_app_started_as_a_client(sides: dict[str, Side]) -> None:
    side = sides["agentstream"]
    got = side.app.wait_outputs("rpc", 1)
    assert got == [[5, 1000]], side.app.log()[-3000:] + "\n--- rpc_app:\n" + side.rpc.log()[-3000:]
    faust = _faust(sides)
    if faust is not None:
        assert got == faust.app.wait_outputs("rpc", 1)
