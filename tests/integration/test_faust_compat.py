"""The side-by-side Faust compatibility suite (issue 28): the same small Faust apps (tests/faust_compat,
written with ``import faust``) run under faust-streaming and under agentstream (``import faust``
answered by ``agentstream.faust``), and what they print, return, send and serve is compared. Faust's
output is the reference; both run every time.

Cost: one process per framework runs every in-process scenario (milliseconds each); one worker per
framework, started together on the session broker, serves the scenarios that need a running
worker. Alone: ``pytest -q -p no:cacheprovider tests/integration/test_faust_compat.py -s`` (``-s``
shows the count and time line)."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentstream.devbroker import DevBroker, free_port

from ..faust_compat.drive import Driver, create_topics
from ..faust_takeover.faust_env import ensure_faust_venv
from .cluster import ROOT, worker_env

ARTIFACTS = ROOT / "artifacts" / "faust_compat"
SCENARIO_DIR = ROOT / "tests" / "faust_compat" / "scenarios"
WORKER_APP = "tests.faust_compat.worker_app"
# worker_app's (it imports faust)
SOURCE_TOPICS = ("concurrency", "words", "clicks", "set-ops", "set-manager", "echo", "points", "preamble")
FRAMEWORKS = ("faust", "agentstream")


def _in_process_names() -> list[str]:
    """The scenario functions (``@scenario(...)``-decorated), read from source: collecting this
    file must not import either framework's ``faust``."""
    names = []
    for path in sorted(SCENARIO_DIR.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.AsyncFunctionDef) and any(
                isinstance(d, ast.Call) and getattr(d.func, "id", "") == "scenario" for d in node.decorator_list
            ):
                names.append(node.name)
    return names


IN_PROCESS = _in_process_names()
IN_WORKER = list(Driver.SCENARIOS)


@dataclass
class Side:
    """One framework's run: its in-process rows and its worker's observations."""

    framework: str
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    worker: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    runner_stderr: str = ""
    ready_seconds: float = 0.0
    worker_seconds: float = 0.0


class CompatWorker:
    """``worker_app`` under one framework, with its own topic prefix and web port."""

    def __init__(self, framework: str, python: Path, broker: DevBroker, data_dir: Path, prefix: str) -> None:
        self.framework = framework
        self.prefix = prefix
        self.port = free_port()
        xdist = os.environ.get("PYTEST_XDIST_WORKER", "")  # the module fixture may run in each xdist process
        self.log_path = ARTIFACTS / f"{framework}-worker{'-' + xdist if xdist else ''}.log"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        env = worker_env(broker.url)
        env.update({"COMPAT_PREFIX": prefix, "COMPAT_BROKER": broker.url})
        web = ["--web-port", str(self.port), "--web-host", "127.0.0.1"]
        if framework == "faust":
            # Faust's own environment settings: tansu's short group timeouts, no idempotent producer
            env.update(
                APP_DATADIR=str(data_dir),
                BROKER_SESSION_TIMEOUT="6",
                BROKER_HEARTBEAT_INTERVAL="1",
                BROKER_REBALANCE_TIMEOUT="6",
                BROKER_COMMIT_INTERVAL="0.5",
                PRODUCER_ACKS="1",
            )
            self.cli = [str(python), "-m", "faust", "-A", WORKER_APP]
            argv = [*self.cli, "worker", "-l", "info", *web]
        else:
            self.cli = [str(python), "-m", "tests.faust_compat.agentstream_cli", "-A", WORKER_APP]
            argv = [*self.cli, "worker", "-l", "info", "--data-dir", str(data_dir), *web]
        self.env = env
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def driver(self, broker: DevBroker) -> Driver:
        return Driver(broker.bootstrap, self.prefix, f"http://127.0.0.1:{self.port}", self.log, self.cli, self.env)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        self.terminate()
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _run_worker_scenarios(worker: CompatWorker, broker: DevBroker, side: Side) -> None:
    driver = worker.driver(broker)
    try:
        if worker.proc.poll() is not None:
            raise RuntimeError(f"exited with {worker.proc.returncode}")
        t0 = time.perf_counter()
        driver.wait_ready()
        side.ready_seconds = time.perf_counter() - t0
    except Exception as exc:  # every worker scenario then reports it
        side.worker = {name: f"worker not ready: {exc}; log: {worker.log_path}" for name in IN_WORKER}
        return
    t0 = time.perf_counter()
    side.worker = driver.run_all()
    side.worker_seconds = time.perf_counter() - t0
    print(f"{worker.framework} worker scenarios (s): {driver.seconds}")


@pytest.fixture(scope="module")
def sides(broker: DevBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    faust_py, why = ensure_faust_venv()
    if faust_py is None:
        pytest.skip(f"faust-streaming cannot be installed in a test virtualenv: {why}")
    pythons = {"faust": faust_py, "agentstream": Path(sys.executable)}
    run = uuid.uuid4().hex[:6]
    prefixes = {fw: f"{fw[0]}{run}" for fw in FRAMEWORKS}
    create_topics(broker.bootstrap, [f"compat-{p}-{t}" for p in prefixes.values() for t in SOURCE_TOPICS])
    data = tmp_path_factory.mktemp("faust-compat")
    started = time.perf_counter()
    phases: dict[str, float] = {}
    workers = {fw: CompatWorker(fw, pythons[fw], broker, data / fw, prefixes[fw]) for fw in FRAMEWORKS}
    result = {fw: Side(fw) for fw in FRAMEWORKS}
    try:
        # Both runners at once, while the workers start.
        runners = {}
        for fw in FRAMEWORKS:
            env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTREAM_BROKER")}
            env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
            runners[fw] = (
                time.perf_counter(),
                subprocess.Popen(
                    [str(pythons[fw]), "-m", "tests.faust_compat.runner", fw, "--broker", broker.url],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        for fw, (t0, proc) in runners.items():
            out, err = proc.communicate(timeout=240)
            side = result[fw]
            side.seconds = time.perf_counter() - t0
            side.runner_stderr = err[-3000:]
            for line in out.splitlines():
                if line.startswith("COMPAT "):
                    row = json.loads(line[len("COMPAT ") :])
                    side.rows[row["name"]] = row
        phases["in-process"] = time.perf_counter() - started
        threads = [
            threading.Thread(target=_run_worker_scenarios, args=(workers[fw], broker, result[fw])) for fw in FRAMEWORKS
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        phases["worker scenarios"] = time.perf_counter() - started
    finally:
        for w in workers.values():
            w.terminate()
        for w in workers.values():
            w.stop()
    elapsed = time.perf_counter() - started
    yield result
    passed = sum(_same(result, n)[0] for n in IN_PROCESS) + sum(_same_worker(result, n)[0] for n in IN_WORKER)
    total = len(IN_PROCESS) + len(IN_WORKER)
    print(
        f"\nfaust-compat: {total} scenarios ({len(IN_PROCESS)} in-process, {len(IN_WORKER)} in a worker), "
        f"{passed} as Faust, {total - passed} different; in-process runners faust "
        f"{result['faust'].seconds:.1f}s, agentstream {result['agentstream'].seconds:.1f}s; {elapsed:.1f}s in all (workers ready after faust {result['faust'].ready_seconds:.1f}s, agentstream "
        f"{result['agentstream'].ready_seconds:.1f}s; their scenarios took faust {result['faust'].worker_seconds:.1f}s, "
        f"agentstream {result['agentstream'].worker_seconds:.1f}s; "
        + ", ".join(f"{k} done at {v:.1f}s" for k, v in phases.items())
        + ")"
    )


def _observed(row: dict[str, Any]) -> Any:
    return {"printed": row.get("out"), "returned": row.get("result"), "raised": row.get("error")}


def _same(sides: dict[str, Side], name: str) -> tuple[bool, str]:
    ref = sides["faust"].rows.get(name)
    got = sides["agentstream"].rows.get(name)
    if ref is None or "error" in ref:
        detail = ref.get("traceback") if ref else sides["faust"].runner_stderr
        return False, f"the Faust run of {name!r} did not complete (a broken scenario, not a difference):\n{detail}"
    if got is None:
        return False, f"agentstream's runner reported nothing for {name!r}:\n{sides['agentstream'].runner_stderr}"
    if _observed(ref) == _observed(got):
        return True, ""
    return False, (
        f"{ref['item']}\nFaust:       {json.dumps(_observed(ref))}\nagentstream: {json.dumps(_observed(got))}"
        + (f"\n{got['traceback']}" if "traceback" in got else "")
    )


def _same_worker(sides: dict[str, Side], name: str) -> tuple[bool, str]:
    ref, got = sides["faust"].worker.get(name), sides["agentstream"].worker.get(name)
    if ref is None or (isinstance(ref, str) and ref.startswith(("error", "worker not ready"))):
        return False, f"the Faust worker did not complete {name!r}: {ref}"
    if ref == got:
        return True, ""
    return False, f"{name}\nFaust:       {json.dumps(ref)}\nagentstream: {json.dumps(got)}"


@pytest.mark.parametrize("name", IN_PROCESS)
def test_in_process_scenario_as_faust(sides: dict[str, Side], name: str) -> None:
    same, why = _same(sides, name)
    assert same, why


@pytest.mark.parametrize("name", IN_WORKER)
def test_worker_scenario_as_faust(sides: dict[str, Side], name: str) -> None:
    same, why = _same_worker(sides, name)
    assert same, why


def test_every_scenario_ran_under_faust(sides: dict[str, Side]) -> None:
    """The oracle itself: Faust completed every scenario (a scenario Faust cannot run tests nothing)."""
    assert sorted(sides["faust"].rows) == sorted(IN_PROCESS), sides["faust"].runner_stderr
    broken = {n: r["error"] for n, r in sides["faust"].rows.items() if "error" in r}
    assert not broken, broken
