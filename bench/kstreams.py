"""The Kafka Streams side of the word-count and pass-through cases (bench/kstreams/, Java).

The jar is built with Maven from ``bench/kstreams/pom.xml`` once per version of the pom and the Java sources and
cached under ``~/.cache/agentstream/kstreams/`` with its dependency classpath (like tests/kafka_cluster/cluster.py
caches the broker's classpath); later runs start ``java`` at once. The first build resolves Kafka Streams from Maven
Central; later builds of changed sources run Maven offline (``-o``).

The Java side reports on stdout with the same ``BENCH_EVENT``/``BENCH_RESULT`` lines as the Python sides
(:mod:`bench.common`), timed the same way (see ``KStreamsBench.Progress``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent / "kstreams"
POM = HERE / "pom.xml"
CACHE = Path(os.environ.get("AGENTSTREAM_KSTREAMS_CACHE", Path.home() / ".cache" / "agentstream" / "kstreams"))
MAIN = "dev.agentstream.bench.KStreamsBench"
#: JVM options of the measured process: the JVM's defaults (G1, heap up to 1/4 of RAM) but a fixed heap ceiling,
#: so peak RSS says what Kafka Streams needs, not what a large machine lets the heap grow to. BENCH_KSTREAMS_JVM
#: replaces them.
JVM_OPTS = ("-Xmx512m", "-XX:+UseG1GC")


class KStreamsUnavailable(RuntimeError):
    """Java or Maven is missing, or the jar cannot be built: the bench runs without the Kafka Streams side."""


def _digest() -> str:
    h = hashlib.sha256(POM.read_bytes())
    for src in sorted((HERE / "src").rglob("*.java")):
        h.update(str(src.relative_to(HERE)).encode())
        h.update(src.read_bytes())
    return h.hexdigest()[:16]


def classpath() -> str:
    """The bench jar and its dependencies, ``os.pathsep``-joined; built with Maven on the first call per digest."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise KStreamsUnavailable(f"{tool} is not on PATH: the Kafka Streams side needs Java 17+ and Maven")
    build = CACHE / _digest()
    jar, deps = build / "kstreams-bench.jar", build / "classpath.txt"
    if jar.is_file() and deps.is_file():
        text = deps.read_text().strip()
        if all(Path(p).is_file() for p in text.split(os.pathsep) if p):
            return os.pathsep.join([str(jar), text])
    tmp = CACHE / f"build-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    mvn = ["mvn", "-q", "-B", "-f", str(POM), f"-Dbench.build={tmp}", "package", "dependency:build-classpath"]
    mvn.append(f"-Dmdep.outputFile={tmp / 'classpath.txt'}")
    proc = subprocess.run([*mvn[:3], "-o", *mvn[3:]], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:  # the first build: nothing in ~/.m2 yet
        proc = subprocess.run(mvn, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not (tmp / "kstreams-bench.jar").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise KStreamsUnavailable(f"Maven could not build {POM}: {(proc.stdout + proc.stderr)[-2000:]}")
    build.mkdir(parents=True, exist_ok=True)
    (tmp / "kstreams-bench.jar").replace(jar)
    (tmp / "classpath.txt").replace(deps)
    shutil.rmtree(tmp, ignore_errors=True)
    return os.pathsep.join([str(jar), deps.read_text().strip()])


def jvm_options() -> list[str]:
    custom = os.environ.get("BENCH_KSTREAMS_JVM")
    return custom.split() if custom is not None else list(JVM_OPTS)


def command(mode: str, *args: str) -> list[str]:
    """``java ... KStreamsBench MODE ARGS`` (MODE: wordcount or passthrough)."""
    logging = ["-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"]
    return ["java", *jvm_options(), *logging, "-cp", classpath(), MAIN, mode, *args]
