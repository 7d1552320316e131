"""``agentstream export --master spark://...`` on a real Spark standalone cluster (master + worker from the
pip package's scripts, on loopback): the worker's executors read the changelog partitions, agentstream
and the app reach them as a shipped zip (their Python has the dependencies but not agentstream), and
the rows equal the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentstream.devbroker import DevBroker

from .cluster import ROOT, Worker, changelog_state, feed, sentences, stop_all, true_counts, wait_counts

pytest.importorskip("pyspark", reason="needs the spark extra: pip install 'agentstream[spark]'")
pa_parquet = pytest.importorskip("pyarrow.parquet")

from agentstream.exporter import JavaNotFound, check_java  # noqa: E402

from .spark_cluster import SparkCluster, executor_python  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

try:
    check_java()
except JavaNotFound as exc:  # pragma: no cover - the Makefile installs Java
    pytest.skip(str(exc), allow_module_level=True)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), cores=2, memory="1g")
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop()


def _task_ends(event_dir: Path) -> list[dict[str, Any]]:
    """The TaskEnd events of the (uncompressed) event log of the one application in ``event_dir``."""
    files = sorted(event_dir.rglob("events_*")) or sorted(p for p in event_dir.iterdir() if p.is_file())
    assert files, f"no event log in {event_dir}"
    events = [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]
    return [e for e in events if e["Event"] == "SparkListenerTaskEnd"]


def test_export_on_a_standalone_cluster(
    spark_cluster: SparkCluster, fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    texts = sentences(600, seed=31)
    expected = true_counts(texts)
    w = Worker("w1", fresh_broker.url, tmp_path / "w1", ARTIFACTS / request.node.name)
    try:
        w.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]")
        feed(fresh_broker.bootstrap, texts)
        assert wait_counts(fresh_broker.bootstrap, expected) == expected
        assert w.terminate() == 0
    finally:
        stop_all([w])
    assert {k.decode(): int(v) for k, v in changelog_state(fresh_broker.bootstrap).items()} == expected

    # The executors' Python: the dependencies installed, agentstream not (it must come with the job).
    python = executor_python(tmp_path / "executor-env", sysconfig.get_paths()["purelib"])
    probe = subprocess.run(
        [str(python), "-c", "import aiokafka, orjson, pyarrow; import agentstream"],
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 and "No module named 'agentstream'" in probe.stderr, probe.stderr

    events = tmp_path / "events"
    events.mkdir()
    out = tmp_path / "word_counts.parquet"
    conf = {
        "spark.pyspark.python": str(python),
        "spark.driver.host": "127.0.0.1",
        "spark.executor.memory": "512m",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",
    }
    cmd = [sys.executable, "-m", "agentstream", "-A", "apps.wordcount", "export", "word_counts", "--out", str(out)]
    cmd += ["--master", spark_cluster.url, "--broker", fresh_broker.url]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    started = next(line for line in lines if line.startswith("Spark started in"))
    app_id = started.rsplit("application ", 1)[1].rstrip(")")

    # rows equal the table
    rows = pa_parquet.read_table(str(out)).to_pylist()
    assert len(rows) == len(expected)
    assert {r["key"]: r["value"] for r in rows} == expected
    for p in range(4):
        n = sum(1 for r in rows if r["partition"] == p)
        assert f"partition {p}: {n} rows written" in proc.stdout

    # The master's status: the application ran and finished, with an executor on the worker.
    master = spark_cluster.master_status()
    app = next((a for a in master["completedapps"] if a["id"] == app_id), None)
    assert app is not None and app["state"] == "FINISHED", master["completedapps"]
    worker = spark_cluster.worker_status()
    executors = [e for e in worker["finishedexecutors"] if e["appid"] == app_id]
    assert executors, worker["finishedexecutors"]
    executor_ids = {str(e["id"]) for e in executors}
    # ... which received the code the job shipped (the zip of agentstream and apps/)
    shipped = list((spark_cluster.work_dir / app_id).rglob("agentstream-code-*.zip"))
    assert shipped, list((spark_cluster.work_dir / app_id).rglob("*"))

    # The application's tasks, from its event log: every one ran on the worker's executors (none on
    # the driver), and the changelog was read there: one task per Kafka partition.
    tasks = _task_ends(events)
    assert tasks
    assert {t["Task Info"]["Executor ID"] for t in tasks} <= executor_ids
    assert {t["Task Info"]["Host"] for t in tasks} == {"127.0.0.1"}
    assert all(t["Task End Reason"]["Reason"] == "Success" for t in tasks)
    first_stage = min(t["Stage ID"] for t in tasks)
    assert len([t for t in tasks if t["Stage ID"] == first_stage]) == 4  # the scan: a task per partition
