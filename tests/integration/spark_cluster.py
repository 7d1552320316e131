"""A Spark standalone cluster on loopback, started from the scripts inside the pip ``pyspark`` package.

One master and one worker (small cores and memory), each a ``spark-class`` process of our own,
stopped by their process ids. Nothing is downloaded: the package carries the jars.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from agentstream.devbroker import free_port

__all__ = ["SparkCluster", "executor_python"]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


class SparkCluster:
    """``spark://127.0.0.1:<port>``: a master, and a worker whose executors run under ``work_dir``."""

    def __init__(self, base: Path, *, cores: int = 2, memory: str = "1g") -> None:
        self.base = base
        self.work_dir = base / "work"
        self.port, self.ui_port, self.worker_ui_port = free_port(), free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master_ui = f"http://127.0.0.1:{self.ui_port}"
        self.worker_ui = f"http://127.0.0.1:{self.worker_ui_port}"
        home = _spark_home()
        # The daemons' environment: loopback only, and no PYTHONPATH (the executors must get the
        # code the way a user ships it, not through this checkout's path).
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
        env.update({"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"})
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs = {name: open(base / f"{name}.log", "wb") for name in ("master", "worker")}
        spark_class = str(home / "bin" / "spark-class")
        self._start(
            "master",
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port)]
            + ["--webui-port", str(self.ui_port)],
            env,
        )
        self._start(
            "worker",
            [spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1"]
            + ["--cores", str(cores), "--memory", memory, "--webui-port", str(self.worker_ui_port)]
            + ["--work-dir", str(self.work_dir)],
            env,
        )

    def _start(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        # spark-class execs the JVM: the process id is the daemon's.
        self.procs.append(
            subprocess.Popen(cmd, cwd=self.base, env=env, stdout=self.logs[name], stderr=subprocess.STDOUT)
        )

    def log(self, name: str) -> str:
        return (self.base / f"{name}.log").read_text(errors="replace")

    def wait_ready(self, timeout: float = 120.0) -> dict[str, Any]:
        """Until the master's status lists the worker ALIVE; returns that worker's entry."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise AssertionError(
                        f"a Spark daemon exited:\n{self.log('master')[-2000:]}\n{self.log('worker')[-2000:]}"
                    )
            try:
                status = self.master_status()
            except (OSError, ValueError):
                # not up yet; ValueError: the master's Jetty serves its HTML pages for a moment
                # before the /json/ handler is attached (a JSONDecodeError, seen on a fresh clone)
                status = {}
            alive = [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]
            if alive:
                return dict(alive[0])
            time.sleep(0.5)
        raise AssertionError(f"no worker registered within {timeout}s:\n{self.log('worker')[-3000:]}")

    def master_status(self) -> dict[str, Any]:
        status: dict[str, Any] = _get_json(f"{self.master_ui}/json/")
        return status

    def worker_status(self) -> dict[str, Any]:
        status: dict[str, Any] = _get_json(f"{self.worker_ui}/json/")
        return status

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the worker first: it would try to reconnect to the master
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for fh in self.logs.values():
            fh.close()


def executor_python(directory: Path, site_packages: str) -> Path:
    """A venv whose Python has agentstream's dependencies (``site_packages`` on its path, as a cluster
    image would have them installed) but not agentstream itself (the editable install's finder in
    that directory is not run: only a site directory's own ``.pth`` files are)."""
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True, timeout=60)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (directory / "lib" / version / "site-packages" / "dependencies.pth").write_text(site_packages + "\n")
    return directory / "bin" / "python"
