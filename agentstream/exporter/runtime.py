"""What PySpark needs before a session can start: Java 17+, the ``spark`` extra, and Python
workers that run *this* interpreter (so they can import aiokafka and agentstream).

Checked up front because PySpark's own failure for a missing JVM is an opaque
``JAVA_GATEWAY_EXITED`` after seconds of waiting.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import AgentStreamError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "JavaNotFound",
    "SparkNotInstalled",
    "check_java",
    "check_pyspark",
    "spark_session",
    "MIN_JAVA",
    "prepare_session",
    "CLUSTER_HINT",
]

log = logging.getLogger("agentstream.exporter")

CLUSTER_HINT = (
    "the executors must import agentstream and aiokafka: install the agentstream wheel on every "
    "executor (or ship it with --py-files / spark.submit.pyFiles) and point spark.pyspark.python "
    "(or PYSPARK_PYTHON) at that Python"
)

MIN_JAVA = 17
JAVA_FIX = "install it with `apt-get install -y openjdk-17-jre-headless` (or set JAVA_HOME to a Java 17+ install)"
SPARK_FIX = "install the extra with `pip install 'agentstream[spark]'` (pyspark, pandas<3, pyarrow)"

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",  # exported timestamps render the same on every machine
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",  # not legacy INT96: pyarrow reads it as-is
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",  # progress bars would garble the export's own lines
}


class JavaNotFound(AgentStreamError):
    """No usable Java for PySpark (missing, or older than 17)."""


class SparkNotInstalled(AgentStreamError):
    """The ``spark`` extra (pyspark, pandas, pyarrow) is not installed."""


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("java")


def java_major(version_output: str) -> int | None:
    """The major version from ``java -version`` output (``1.8.0_x`` -> 8, ``17.0.15`` -> 17)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """The ``java`` PySpark will run; raises :class:`JavaNotFound` naming the fix."""
    java = _java_binary()
    if java is None:
        raise JavaNotFound(f"PySpark needs Java {MIN_JAVA}+ and no `java` was found; {JAVA_FIX}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFound(f"`{java} -version` failed ({exc!r}); {JAVA_FIX}") from exc
    major = java_major(out.stderr + out.stdout)
    if major is None or major < MIN_JAVA:
        found = (out.stderr or out.stdout).strip().splitlines()[:1]
        raise JavaNotFound(f"PySpark needs Java {MIN_JAVA}+, {java} is {found[0] if found else 'unknown'}; {JAVA_FIX}")
    return java


def check_pyspark() -> None:
    """Raise :class:`SparkNotInstalled` unless pyspark, pyarrow and pandas import."""
    missing = []
    for module in ("pyspark", "pyarrow", "pandas"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise SparkNotInstalled(f"exporting tables needs {', '.join(missing)}; {SPARK_FIX}")


def _is_local(master: str) -> bool:
    return master.startswith("local")


def prepare_environment(master: str) -> None:
    """Make Spark's Python workers this interpreter, able to import agentstream.

    Locally that is forced (a worker on another Python lacks aiokafka); on a cluster the
    executors' Python is the cluster's business, so existing settings are kept.
    """
    if _is_local(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup, nothing exposed
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # A source checkout (not pip-installed) is importable here only through sys.path: hand its
    # root to the workers too. Harmless when agentstream is installed.
    root = _source_root()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


def _source_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def prepare_session(spark: SparkSession) -> str:
    """Make ``spark``'s Python workers able to run the changelog source; returns their Python.

    Works for any session, including one the user built with ``SparkSession.builder...getOrCreate()``
    without our :func:`spark_session`: PySpark takes the workers' Python from ``PYSPARK_PYTHON``
    when the context starts (default ``python3``, which usually lacks aiokafka). The interpreter is
    captured per registered function, so setting it on the context before the source is registered
    is enough. ``spark.pyspark.python`` wins when set; in local mode the workers otherwise run this
    interpreter; on a cluster the executors' Python is the cluster's business (a hint is logged).
    """
    sc = spark.sparkContext
    conf = sc.getConf()
    configured = conf.get("spark.pyspark.python") or conf.get("spark.pyspark.driver.python")
    master = sc.master or ""
    if configured:
        sc.pythonExec = configured
    elif _is_local(master):
        if sc.pythonExec != sys.executable:
            log.info(
                "Spark's Python workers would run %r; using this interpreter (%s) so they can import "
                "agentstream and aiokafka",
                sc.pythonExec,
                sys.executable,
            )
        sc.pythonExec = sys.executable
        sc.pythonVer = "{}.{}".format(*sys.version_info[:2])
        # A source checkout is importable here only through sys.path: hand its root to the workers.
        paths = [p for p in sc.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
        if _source_root() not in paths:
            sc.environment["PYTHONPATH"] = os.pathsep.join([_source_root(), *paths])
    elif sc.pythonExec in ("python3", "python"):
        log.warning("Spark master %s: executors run %r; %s", master, sc.pythonExec, CLUSTER_HINT)
    return str(sc.pythonExec)


def spark_session(
    master: str = "local[*]", *, app_name: str = "agentstream-export", conf: Mapping[str, Any] | None = None
) -> SparkSession:
    """A SparkSession for exports: Java and the extra checked, UI off, UTC, nothing downloaded.

    ``getOrCreate`` semantics: an already running session is returned (with ``conf`` applied
    where Spark allows it at run time).
    """
    check_pyspark()
    check_java()
    prepare_environment(master)
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines are connection chatter
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    settings = dict(DEFAULT_CONF)
    if _is_local(master):
        settings.setdefault("spark.driver.host", "127.0.0.1")
        settings.setdefault("spark.driver.bindAddress", "127.0.0.1")
    if _is_local(master):
        # the executors are this machine's: the source checkout is importable there as it is here.
        # On a cluster the code is shipped instead (.deploy), never a driver path the workers lack.
        settings["spark.executorEnv.PYTHONPATH"] = os.environ["PYTHONPATH"]
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session: SparkSession = builder.getOrCreate()
    return session
