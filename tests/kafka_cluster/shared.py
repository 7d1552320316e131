"""One Kafka cluster per test run, shared by its pytest-xdist processes.

Starting three JVMs costs ~20 s of two cores, so a run starts one cluster, not one per process: the first
process that asks starts a *keeper* (``python -m tests.kafka_cluster keep``) in its own session, under a file
lock; the others find its state file and connect. The keeper watches the pytest process that started the run
(the xdist controller, or pytest itself without xdist) and stops the cluster and removes its files once that
process is gone, however the run ended, kill -9 included.

``AGENTSTREAM_TEST_KAFKA=h1:p1,h2:p2`` points the tests at a cluster of the user's instead: nothing is started,
and the tests that must kill or restart a broker, or need the SSL/SASL listeners, skip saying why.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cluster import KafkaCluster, KafkaClusterError, KafkaUnavailable, classpath, missing_tools

ENV = "AGENTSTREAM_TEST_KAFKA"
#: the state file a cluster started by hand wrote (``python -m tests.kafka_cluster --state FILE``): the tests use
#: that cluster, listeners included, instead of starting one (handy while iterating on one test)
STATE_ENV = "AGENTSTREAM_TEST_KAFKA_STATE"
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ClusterInfo:
    """What a test needs to reach a cluster (the keeper's state file, or the user's list)."""

    bootstrap: str
    external: bool = False
    listeners: dict[str, str] = field(default_factory=dict)  # ssl / sasl_plaintext / sasl_ssl -> host:port,...
    certs: dict[str, str] = field(default_factory=dict)
    nodes: list[dict[str, object]] = field(default_factory=list)  # node_id, pid, plaintext port, log path
    plain_users: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return "kafka://" + ";".join(self.bootstrap.split(","))

    def state(self) -> dict[str, object]:
        return {
            "bootstrap": self.bootstrap,
            "listeners": self.listeners,
            "certs": self.certs,
            "nodes": self.nodes,
            "plain_users": self.plain_users,
        }


def info_of(cluster: KafkaCluster) -> ClusterInfo:
    from .cluster import PLAIN_USERS

    return ClusterInfo(
        bootstrap=cluster.bootstrap,
        listeners={k: cluster.listener(k) for k in ("ssl", "sasl_plaintext", "sasl_ssl")},
        certs={k: str(v) for k, v in cluster.certs.items()},
        nodes=[
            {
                "node_id": n.node_id,
                "pid": n.process.pid if n.process else None,
                "plaintext": n.plaintext,
                "log": str(n.log_path),
            }
            for n in cluster.nodes
        ],
        plain_users=dict(PLAIN_USERS),
    )


def unavailable_reason() -> str | None:
    """Why no cluster can be had here (None when one can): the skip message of every Kafka test."""
    if os.environ.get(ENV) or os.environ.get(STATE_ENV):
        return None
    reason = missing_tools()
    if reason:
        return reason
    try:
        classpath()
    except KafkaUnavailable as exc:
        return str(exc)
    return None


def _run_owner_pid() -> int:
    """The pytest process that owns this run: the xdist controller for a worker, else this process."""
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


def shared_cluster(timeout: float = 180.0) -> ClusterInfo:
    """The run's cluster: the user's (``AGENTSTREAM_TEST_KAFKA``), or the one the run's keeper serves."""
    external = os.environ.get(ENV)
    state_file = os.environ.get(STATE_ENV)
    if state_file and not external:
        return ClusterInfo(**json.loads(Path(state_file).read_text()))
    if external:
        return ClusterInfo(bootstrap=",".join(p.strip() for p in external.split(",") if p.strip()), external=True)
    owner = _run_owner_pid()
    directory = Path(tempfile.gettempdir()) / f"agentstream-kafka-run-{owner}"
    directory.mkdir(parents=True, exist_ok=True)
    state = directory / "state.json"
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process starts the keeper; the others wait here for its state
        if not state.exists():
            log = open(directory / "keeper.log", "ab")  # the keeper owns it
            subprocess.Popen(
                [sys.executable, "-m", "tests.kafka_cluster", "keep", str(directory), str(owner)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the process that asked; stops with the run's owner
            )
            deadline = time.monotonic() + timeout
            while not state.exists():
                failed = directory / "failed.txt"
                if failed.exists():
                    raise KafkaClusterError(failed.read_text())
                if time.monotonic() > deadline:
                    raise KafkaClusterError(
                        f"the Kafka cluster keeper did not report in {timeout:.0f} s; see {directory}/keeper.log"
                    )
                time.sleep(0.2)
    data = json.loads(state.read_text())
    return ClusterInfo(**data)


def keep(directory: Path, owner: int) -> int:
    """The keeper: start a cluster, publish its state, stop it once ``owner`` is gone (or on SIGTERM)."""
    import signal

    stopping = False

    def on_term(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    cluster = KafkaCluster(work_dir=directory / "cluster")
    try:
        cluster.start()
    except Exception as exc:  # the waiting test processes read this and fail with it
        (directory / "failed.txt").write_text(f"the Kafka cluster did not start: {exc}")
        return 1
    tmp = directory / "state.json.tmp"
    tmp.write_text(json.dumps(info_of(cluster).state()))
    tmp.replace(directory / "state.json")
    print(f"Kafka cluster ready: {cluster.bootstrap} (stops when pid {owner} exits)", flush=True)
    try:
        while not stopping and _alive(owner):
            time.sleep(1.0)
    finally:
        cluster.stop(remove=False)
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
