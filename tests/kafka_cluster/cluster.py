"""A real Apache Kafka cluster on loopback: three KRaft nodes from Maven Central's jars.

The broker is a test and benchmark dependency only (nothing from Maven goes into the package). The jars are
resolved once with Maven from ``pom.xml`` beside this file (the classpath is cached under
``~/.cache/agentstream/kafka/``); each node is one JVM running ``kafka.Kafka`` in combined mode (broker and
controller), with its own log dir and ports, storage formatted by ``kafka.tools.StorageTool``. The broker defaults
are production-like: replication factor 3, ``min.insync.replicas=2``, unclean leader election off.

Every node listens four ways on loopback, so one cluster serves every test: PLAINTEXT (the default bootstrap),
SSL (a test CA made at start with the openssl CLI), SASL_PLAINTEXT and SASL_SSL (PLAIN users in the broker's JAAS
config; SCRAM users are created through the admin API by the tests that need them).

Only the test-speed settings differ from a production broker, each said where it is set (the group coordinator's
initial rebalance delay, and fewer partitions for the internal topics so a fresh cluster is ready sooner).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from agentstream.devbroker import _stop_with_parent_prefix

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
CACHE = Path(os.environ.get("AGENTSTREAM_KAFKA_CACHE", Path.home() / ".cache" / "agentstream" / "kafka"))

#: PLAIN users of the SASL listeners (user -> password); the broker's own inter-broker traffic is PLAINTEXT.
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or Maven cannot resolve the broker: the tests that need Kafka skip with this."""


class KafkaClusterError(RuntimeError):
    """The cluster did not come up (the message ends with the tail of the failing node's log)."""


def missing_tools() -> str | None:
    """Why a cluster cannot be started here (None when Java 17+ and Maven are on PATH)."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH: the Kafka cluster tests need Java 17+ and Maven (apt-get install openjdk-17-jdk-headless maven)"
    return None


def classpath() -> str:
    """The broker's classpath, resolved with Maven once per pom (cached; later calls read the cache)."""
    reason = missing_tools()
    if reason:
        raise KafkaUnavailable(reason)
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    cached = CACHE / f"classpath-{digest}.txt"
    if cached.is_file():
        text = cached.read_text().strip()
        if text and all(Path(jar).is_file() for jar in text.split(os.pathsep)):
            return text
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"classpath-{digest}.{os.getpid()}.tmp"
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(POM), "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0 or not out.is_file():
        raise KafkaUnavailable(
            f"Maven could not resolve the Kafka broker from {POM}: {(proc.stdout + proc.stderr)[-2000:]}"
        )
    out.replace(cached)
    return cached.read_text().strip()


def _distinct_free_ports(n: int) -> list[int]:
    """``n`` different free ports on 127.0.0.1: each socket stays bound until all are taken, so the OS
    cannot hand out one port twice (one at a time it can, and Kafka refuses two listeners on one
    port: the whole run's cluster failed to start)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


@dataclass
class Node:
    """One KRaft node (broker and controller in one JVM)."""

    node_id: int
    directory: Path
    plaintext: int
    ssl: int
    sasl_plaintext: int
    sasl_ssl: int
    controller: int
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def config(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class KafkaCluster:
    """Three (or ``size``) KRaft nodes on loopback; ``start()`` returns once every broker serves metadata."""

    def __init__(
        self,
        size: int = 3,
        work_dir: Path | None = None,
        *,
        heap_mb: int = 512,
        host: str = "127.0.0.1",
        for_tests: bool = True,
    ) -> None:
        self.size = size
        # every listener's address (a bridge's for tests whose clients live in network namespaces, netns.py);
        # the test certificates name 127.0.0.1 and localhost only, so SSL clients need the default
        self.host = host
        self.heap_mb = heap_mb
        # tests: a JVM and thread pools sized for start-up and a light load on two shared cores (C1 only, serial
        # GC, two I/O and network threads); for_tests=False keeps Kafka's own (benchmarks measure those)
        self.for_tests = for_tests
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="agentstream-kafka-"))
        self.cluster_id = _kraft_cluster_id()
        ports = _distinct_free_ports(5 * size)
        self.nodes = [Node(i, self.work_dir / f"node{i}", *ports[5 * (i - 1) : 5 * i]) for i in range(1, size + 1)]
        self.certs: dict[str, Path] = {}

    # -- addresses --------------------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """Every node's PLAINTEXT address, comma-separated (what ``bootstrap_servers`` takes)."""
        return ",".join(f"{self.host}:{n.plaintext}" for n in self.nodes)

    def listener(self, kind: str) -> str:
        """Every node's address for one listener kind: plaintext, ssl, sasl_plaintext or sasl_ssl."""
        return ",".join(f"{self.host}:{getattr(n, kind)}" for n in self.nodes)

    # -- lifecycle --------------------------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> KafkaCluster:
        cp = classpath()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._make_certs()
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            node.config.write_text(self._properties(node))
        self._format(cp, self.nodes)
        for node in self.nodes:
            self._spawn(cp, node)
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, *, remove: bool = True) -> None:
        for node in self.nodes:
            if node.running:
                assert node.process is not None
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait(10)
            if node.log is not None:
                node.log.close()
                node.log = None
        if remove and self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def kill(self, node_id: int) -> None:
        """``kill -9`` one node (its log dir stays, so ``restart`` brings the same broker back)."""
        node = self.nodes[node_id - 1]
        if node.process is not None and node.running:
            node.process.kill()
            node.process.wait(10)

    def restart(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a killed or stopped node again on its ports and log dir; returns once it serves metadata."""
        node = self.nodes[node_id - 1]
        if node.running:
            return
        self._spawn(classpath(), node)
        self.wait_ready(timeout, nodes=[node])

    def wait_ready(self, timeout: float, nodes: list[Node] | None = None) -> None:
        """Until each node answers metadata listing every live broker (a JVM accepting is not enough)."""
        deadline = time.monotonic() + timeout
        waiting = list(nodes or self.nodes)
        expected = sum(1 for n in self.nodes if n.running)
        while waiting:
            for node in list(waiting):
                if not node.running:
                    raise KafkaClusterError(f"Kafka node {node.node_id} exited at start:\n{self.log_tail(node)}")
                if _run(_brokers_seen(f"{self.host}:{node.plaintext}")) >= expected:
                    waiting.remove(node)
            if waiting and time.monotonic() > deadline:
                tails = "\n".join(self.log_tail(n) for n in waiting)
                raise KafkaClusterError(
                    f"Kafka nodes {[n.node_id for n in waiting]} not ready in {timeout:.0f} s:\n{tails}"
                )
            if waiting:
                time.sleep(0.3)

    def log_tail(self, node: Node, lines: int = 25) -> str:
        try:
            text = node.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {node.log_path})"
        return f"-- {node.log_path} --\n" + "\n".join(text[-lines:])

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals --------------------------------------------------------------------------------------------
    def _make_certs(self) -> None:
        from tests.integration.tls_proxy import make_certs

        certs = make_certs(self.work_dir / "certs")
        # Kafka's PEM key store: the private key (PKCS#8) followed by the certificate chain, in one file
        keystore = self.work_dir / "certs" / "broker-keystore.pem"
        keystore.write_text(certs["server_key"].read_text() + certs["server_cert"].read_text())
        self.certs = {**certs, "broker_keystore": keystore}

    def _properties(self, node: Node) -> str:
        voters = ",".join(f"{n.node_id}@{self.host}:{n.controller}" for n in self.nodes)
        h = self.host
        jaas_users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
        plain_jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="{PLAIN_USERS["admin"]}" {jaas_users};'
        )
        scram_jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        lines = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": (
                f"PLAINTEXT://{h}:{node.plaintext},SSL://{h}:{node.ssl},"
                f"SASL_PLAINTEXT://{h}:{node.sasl_plaintext},SASL_SSL://{h}:{node.sasl_ssl},"
                f"CONTROLLER://{h}:{node.controller}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://{h}:{node.plaintext},SSL://{h}:{node.ssl},"
                f"SASL_PLAINTEXT://{h}:{node.sasl_plaintext},SASL_SSL://{h}:{node.sasl_ssl}"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
            ),
            "log.dirs": str(node.directory / "data"),
            # production-like replication: what the issue asks the cluster to enforce
            "default.replication.factor": str(min(3, self.size)),
            "min.insync.replicas": str(min(2, self.size)),
            "offsets.topic.replication.factor": str(min(3, self.size)),
            "transaction.state.log.replication.factor": str(min(3, self.size)),
            "transaction.state.log.min.isr": str(min(2, self.size)),
            "unclean.leader.election.enable": "false",
            "num.partitions": "1",
            # test speed only: fewer partitions for the internal topics (created at the first group/transaction),
            # and no 3 s hold of a new group's first rebalance
            "offsets.topic.num.partitions": "6",
            "transaction.state.log.num.partitions": "6",
            "group.initial.rebalance.delay.ms": "0",
            **(
                {
                    "num.io.threads": "2",
                    "num.network.threads": "2",
                    "background.threads": "2",
                    "log.cleaner.threads": "1",
                }
                if self.for_tests
                else {}
            ),
            # SSL: the test CA; clients are not asked for certificates unless a test's listener says so
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.certs["broker_keystore"]),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.certs["ca"]),
            "ssl.endpoint.identification.algorithm": "https",
            # SASL: PLAIN users from the JAAS line; SCRAM users through the admin API (AlterUserScramCredentials)
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram_jaas,
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram_jaas,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram_jaas,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas,
        }
        return "".join(f"{k}={v}\n" for k, v in lines.items())

    def _java(self, cp: str, main: str, *args: str, heap_mb: int = 256) -> list[str]:
        vm = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"] if self.for_tests else ["-XX:+UseG1GC"]
        return [
            "java",
            f"-Xmx{heap_mb}m",
            f"-Xms{min(heap_mb, 128)}m",
            *vm,
            "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            cp,
            main,
            *args,
        ]

    def _format(self, cp: str, nodes: list[Node]) -> None:
        """``StorageTool format`` of every node's log dir, side by side (a JVM start each)."""
        procs = {
            node.node_id: subprocess.Popen(
                self._java(
                    cp, "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(node.config), heap_mb=128
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for node in nodes
        }
        for node_id, proc in procs.items():
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise KafkaClusterError(f"formatting node {node_id} failed: {out[-2000:]}")

    def _spawn(self, cp: str, node: Node) -> None:
        node.log = open(node.log_path, "ab")  # closed in stop()
        node.process = subprocess.Popen(
            [*_stop_with_parent_prefix(), *self._java(cp, "kafka.Kafka", str(node.config), heap_mb=self.heap_mb)],
            stdin=subprocess.DEVNULL,
            stdout=node.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _kraft_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (what ``random-uuid`` prints)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


async def _brokers_seen(bootstrap: str) -> int:
    """How many brokers one node's metadata lists (0 while it cannot answer)."""
    from aiokafka import AIOKafkaClient

    host, _, port = bootstrap.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            pass
    except OSError:
        return 0  # not listening yet: no client (and no aiokafka connection error line) for that
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await asyncio.wait_for(client.bootstrap(), 5)
        return len(client.cluster.brokers())
    except Exception:
        return 0
    finally:
        try:
            await client.close()
        except Exception:
            pass


def _run(coro: object) -> int:
    return asyncio.run(coro)  # type: ignore[arg-type]
