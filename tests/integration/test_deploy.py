"""Deployment as docs/deployment.md describes it, on the real broker: workers on different hosts
(loopback addresses 127.0.0.2 and 127.0.0.3, each with ``--web-host``) answer key lookups for
each other; ``reset`` refuses while a worker of the app is alive.

The deployment kit (deploy/): its manifests and kustomizations parse and hang together, its Dockerfile
builds the compiled hot path and runs the StatefulSet's command unprivileged, and worker processes run
with exactly the StatefulSet's command, arguments and environment (only the broker, the data dir and
the pod's address substituted): not ready while restoring, stopped within the grace period, and static
members that rejoin after a restart without moving a partition."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.partitioner import murmur2

from agentstream import settings
from agentstream.devbroker import DevBroker, free_port
from agentstream.worker.worker import STEP_MIN
from tests.kafka_cluster.shared import ClusterInfo

from . import manifests
from .cluster import ROOT, Worker, feed, sentences, stop_all, true_counts, wait_counts, worker_env
from .conftest import ARTIFACTS


class HostWorker(Worker):
    """A wordcount worker whose web server binds (and advertises) ``host``."""

    def __init__(self, name: str, broker_url: str, data_dir: Path, log_dir: Path, host: str, port: int) -> None:
        # Not Worker.__init__: that one binds the web server to 127.0.0.1 or turns it off.
        self.name, self.data_dir, self.host, self.port = name, data_dir, host, port
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentstream",
                "-A",
                "apps.wordcount",
                "worker",
                "--data-dir",
                str(data_dir),
                "--web-host",
                host,
                "--web-port",
                str(port),
                "-l",
                "info",
            ],
            cwd=ROOT,
            env=worker_env(broker_url),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _loopback_alias_usable(host: str) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind((host, 0))
        except OSError:
            return False
    return True


async def _lookup(base: str, words: list[str]) -> dict[str, tuple[int, Any, str]]:
    out: dict[str, tuple[int, Any, str]] = {}
    async with aiohttp.ClientSession() as s:
        for word in words:
            async with s.get(f"{base}/tables/word_counts/{quote(word, safe='')}") as r:
                body = await r.json()
                out[word] = (r.status, body.get("value"), body.get("served_by", ""))
    return out


async def _owners(base: str) -> Any:
    async with aiohttp.ClientSession() as s:
        async with s.get(base + "/metadata") as r:
            return await r.json()


def test_workers_on_two_hosts_answer_key_lookups_for_each_other(request: pytest.FixtureRequest) -> None:
    hosts = ["127.0.0.2", "127.0.0.3"]
    if not all(_loopback_alias_usable(h) for h in hosts):
        pytest.skip("this kernel does not route 127.0.0.0/8 to loopback")
    log_dir = ARTIFACTS / request.node.name
    log_dir.mkdir(parents=True, exist_ok=True)
    with DevBroker(log_path=log_dir / "broker.log") as broker, tempfile.TemporaryDirectory() as tmp:
        port = free_port()  # the same port on both hosts: they are different addresses
        workers = [
            HostWorker(f"host{i}", broker.url, Path(tmp) / f"h{i}", log_dir, h, port) for i, h in enumerate(hosts, 2)
        ]
        try:
            for w in workers:
                w.wait_log(r"assigned: .*sentences\[")
                w.wait_log(rf"listening on http://{w.host}:{port}")
            texts = sentences(1500, seed=23)
            feed(broker.bootstrap, texts)
            expected = true_counts(texts)
            assert wait_counts(broker.bootstrap, expected) == expected
            addresses = {f"{h}:{port}" for h in hosts}
            deadline = time.monotonic() + 60
            while True:
                metas = [asyncio.run(_owners(w.url)) for w in workers]
                if all(
                    set(m["partitions"].values()) == addresses and m["partitions"] == metas[0]["partitions"]
                    for m in metas
                ):
                    break
                assert time.monotonic() < deadline, f"owners never settled: {metas}"
                time.sleep(0.3)
            words = sorted(expected)
            for w in workers:
                got = asyncio.run(_lookup(w.url, words))
                wrong = {k: v for k, v in got.items() if v[:2] != (200, expected[k])}
                assert not wrong, f"{len(wrong)} wrong at {w.host}: {list(wrong.items())[:5]}"
                assert {v[2] for v in got.values()} == addresses, "lookups were not answered by both hosts"
            for w in workers:
                assert w.terminate() == 0
        finally:
            stop_all(workers)


def test_reset_refuses_while_a_worker_of_the_app_runs(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    log_dir = ARTIFACTS / request.node.name
    data = tmp_path / "data"
    w = Worker("w", fresh_broker.url, data, log_dir)
    try:
        w.wait_log(r"assigned: .*sentences\[")
        feed(fresh_broker.bootstrap, sentences(200, seed=3))
        w.wait_log(r"restored", timeout=60)
        stores = data / "wordcount" / "tables"
        assert stores.exists()

        def reset(data_dir: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "agentstream",
                    "-A",
                    "apps.wordcount",
                    "reset",
                    "--yes",
                    "--data-dir",
                    str(data_dir),
                ],
                cwd=ROOT,
                env=worker_env(fresh_broker.url),
                capture_output=True,
                text=True,
                timeout=120,
            )

        # The same data dir: the store lock says a worker is running.
        r = reset(data)
        assert r.returncode == 2, r
        assert "reset refused" in r.stderr and "store lock held" in r.stderr, r.stderr
        assert stores.exists()
        # Another host's data dir (no lock here): the group has a live member.
        other = tmp_path / "other"
        (other / "wordcount" / "tables" / "word_counts").mkdir(parents=True)
        r = reset(other)
        assert r.returncode == 2, r
        assert "reset refused" in r.stderr and "live member" in r.stderr, r.stderr
        assert (other / "wordcount" / "tables").exists()
        assert w.terminate() == 0
        # Stopped (it left the group): reset goes ahead.
        r = reset(data)
        assert r.returncode == 0, r
        assert not stores.exists()
    finally:
        w.stop_quietly()


# -- the deployment kit: deploy/Dockerfile and deploy/k8s ---------------------------------------------------------
APP_LABEL = "app.kubernetes.io/name"


def _base() -> tuple[list[manifests.Obj], manifests.Obj, manifests.Obj]:
    objects = manifests.Kustomization.read(manifests.BASE).resources()
    sts = manifests.statefulset(objects)
    return objects, sts, manifests.container(sts)


def _app_of(c: manifests.Obj) -> Any:
    """The app the container runs (its ``-A`` argument), imported as the worker imports it."""
    args = c["args"]
    spec = args[args.index("-A") + 1]
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr or "app")


def _env_names(c: manifests.Obj) -> set[str]:
    return {v["name"] for v in c.get("env", [])}


def test_kit_manifests_parse_and_every_kustomization_resolves() -> None:
    files = sorted(manifests.K8S.rglob("*.yaml"))
    assert files, "no manifests under deploy/k8s"
    for path in files:  # every document of every file parses, and names what it is
        for doc in manifests.load(path):
            assert doc.get("apiVersion") and doc.get("kind"), f"{path}: a document without apiVersion/kind"
            if doc["kind"] != "Kustomization":
                assert doc.get("metadata", {}).get("name"), f"{path}: a {doc['kind']} without a name"
    base_objects, base_sts, base_c = _base()
    assert len({manifests.key(o) for o in base_objects}) == len(base_objects), "an object is listed twice"
    images = {i["name"] for i in manifests.Kustomization.read(manifests.BASE).spec.get("images", [])}
    assert base_c["image"] in images, "the kustomization's images do not name the worker's image"
    assert {p.name for p in manifests.OVERLAYS} >= {"dev", "production"}
    for overlay in manifests.OVERLAYS:
        k = manifests.Kustomization.read(overlay)
        objects = k.resources()  # every listed resource exists (asserted while reading)
        by_key = {manifests.key(o): o for o in objects}
        for name, patch in k.patches():
            target = by_key.get(manifests.key(patch))
            assert target is not None, (
                f"{overlay.name}/{name} patches {manifests.key(patch)}, which no resource defines"
            )
            assert patch["apiVersion"] == target["apiVersion"], f"{overlay.name}/{name}: apiVersion differs"
            if patch["kind"] != "StatefulSet":
                continue
            # strategic merge: containers and claims merge by name, env by name. A name the base
            # lacks would add a second container, claim or a variable nobody checked.
            base_containers = {c["name"]: c for c in target["spec"]["template"]["spec"]["containers"]}
            for pc in patch["spec"].get("template", {}).get("spec", {}).get("containers", []):
                assert pc["name"] in base_containers, f"{overlay.name}/{name}: no container {pc['name']!r}"
                new = _env_names(pc) - _env_names(base_containers[pc["name"]])
                assert not new, f"{overlay.name}/{name} adds variables the base does not set: {new}"
                assert not settings.unknown_variables({n: "" for n in _env_names(pc)})
            claims = {t["metadata"]["name"] for t in target["spec"].get("volumeClaimTemplates", [])}
            for t in patch["spec"].get("volumeClaimTemplates", []):
                assert t["metadata"]["name"] in claims, f"{overlay.name}/{name}: no claim {t['metadata']['name']!r}"
    # the production overlay's autoscaler: the app's consumer group (its id), on a topic its agents read,
    # scaling the StatefulSet up to one worker per partition
    app = _app_of(base_c)
    (scaled,) = [
        o
        for o in manifests.Kustomization.read(manifests.K8S / "overlays/production").resources()
        if o["kind"] == "ScaledObject"
    ]
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": base_sts["metadata"]["name"],
    }
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    env = manifests.pod_environment(base_c, {"metadata.name": "wordcount-0", "spec.nodeName": "n"})
    assert trigger["metadata"]["consumerGroup"] == settings.Settings.build(app.id, {}, env).id
    topic = trigger["metadata"]["topic"]
    assert topic in {t.name for agent in app.agents.values() for t in agent.topics}, f"no agent reads {topic}"
    assert scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"] <= app.topics[topic].partitions


def test_kit_statefulset_wires_the_worker_as_its_settings_read_it() -> None:
    objects, sts, c = _base()
    spec, pod = sts["spec"], sts["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    # the headless Service the pods' DNS names hang off, selecting these pods
    (svc,) = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == spec["serviceName"]]
    assert svc["spec"]["clusterIP"] == "None", "the Service must be headless: one DNS name per pod"
    assert svc["spec"]["selector"].items() <= labels.items()
    (pdb,) = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"].get("maxUnavailable") == 1
    # every variable is a setting the worker reads (a typo would be warned about and ignored)
    env = manifests.pod_environment(c, {"metadata.name": "wordcount-1", "spec.nodeName": "node-a"})
    assert not settings.unknown_variables(env), settings.unknown_variables(env)
    # static membership and the advertised address come from the pod's name
    assert env["AGENTSTREAM_CONSUMER_GROUP_INSTANCE_ID"] == "wordcount-1"
    assert env["AGENTSTREAM_WEB_HOST"] == f"wordcount-1.{spec['serviceName']}"
    assert env["AGENTSTREAM_WEB_BIND"] == "0.0.0.0"  # probes and peers connect to the pod's address
    s = settings.Settings.build(_app_of(c).id, {}, env)
    assert s.consumer_group_instance_id == "wordcount-1" and s.web_host == "wordcount-1.wordcount-workers"
    assert s.rack_id == "node-a"
    # the probes hit the worker's web port, on the endpoints the worker serves
    web_port = int(env["AGENTSTREAM_WEB_PORT"])
    assert s.web_port == web_port
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path and manifests.port(c, get["port"]) == web_port
    (svc_port,) = svc["spec"]["ports"]
    assert manifests.port(c, svc_port["targetPort"]) == web_port
    # the data dir is the claim's mount: one volume per pod
    (claim,) = spec["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == env["AGENTSTREAM_DATA_DIR"] == str(s.data_dir)
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    # the grace period outlasts the worker's bounded stop: shutdown_timeout, then closing its clients
    assert pod["spec"]["terminationGracePeriodSeconds"] > s.shutdown_timeout + 2 * STEP_MIN
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_kit_dockerfile_builds_the_compiled_hot_path_and_runs_the_statefulsets_command_unprivileged() -> None:
    _, sts, c = _base()
    stages = manifests.dockerfile_stages()
    assert len(stages) >= 2, "a multi-stage build: the compiler stays in the builder"
    builder, runtime = stages[0], stages[-1]
    assert any("AGENTSTREAM_COMPILE=require" in r for r in builder.all("RUN")), "the builder must require the compile"
    assert any(f"--from={builder.name}" in r for r in runtime.all("COPY")), "the runtime takes the builder's build"
    assert not any("build-essential" in r or "gcc" in r for r in runtime.all("RUN")), "no compiler at runtime"
    # not root: a numeric uid (runAsNonRoot can check it), the one the pod runs as
    (user,) = runtime.all("USER")
    uid = int(user.split(":")[0])
    assert uid != 0 and uid == sts["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    # the data dir: a volume, the directory the worker uses, the StatefulSet's mount
    env: dict[str, str] = {}
    for rest in runtime.all("ENV"):
        env.update(manifests.env_instruction(rest))
    (volume,) = [v for rest in runtime.all("VOLUME") for v in manifests.exec_form(rest)]
    pod_env = manifests.pod_environment(c, {"metadata.name": "wordcount-0", "spec.nodeName": "n"})
    assert volume == env["AGENTSTREAM_DATA_DIR"] == pod_env["AGENTSTREAM_DATA_DIR"]
    # the image's command is the StatefulSet's (no ENTRYPOINT: `command` + `args` replace CMD whole)
    assert not runtime.all("ENTRYPOINT")
    (cmd,) = runtime.all("CMD")
    assert manifests.exec_form(cmd) == c["command"] + c["args"]
    assert [int(p) for rest in runtime.all("EXPOSE") for p in rest.split()] == [manifests.port(c, "web")]
    # what the command imports is in the image
    module = c["args"][c["args"].index("-A") + 1].split(":")[0]
    copied = [r.split()[0] for r in runtime.all("COPY") if not r.startswith("--")]
    assert module.split(".")[0] in copied, f"the image does not COPY the app's package ({module})"
    ignore = (manifests.DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert {"!agentstream", "!apps", "!setup.py"} <= set(ignore)


class Pod(Worker):
    """A worker process run as the StatefulSet's pod ``name`` would run it: the container's command,
    arguments and environment, with only what differs on one test machine substituted (the broker, the
    pod's volume, its address: pods share this host's loopback and ports). ``harness`` adds variables
    the manifest does not set (short group timeouts for the dev broker); ``restart``: the pod's log goes on."""

    def __init__(
        self,
        name: str,
        broker_url: str,
        volume: Path,
        log_dir: Path,
        *,
        web_port: int,
        harness: dict[str, str] | None = None,
        restart: bool = False,
    ) -> None:
        _, sts, c = _base()
        self.sts, self.container = sts, c
        self.name, self.data_dir, self.port = name, volume, web_port
        env = manifests.pod_environment(c, {"metadata.name": name, "spec.nodeName": "node-" + name})
        substituted = {
            "AGENTSTREAM_BROKER": broker_url,
            "AGENTSTREAM_DATA_DIR": str(volume),
            "AGENTSTREAM_WEB_BIND": "127.0.0.1",
            "AGENTSTREAM_WEB_HOST": "127.0.0.1",  # what the pod's DNS name resolves to here
            "AGENTSTREAM_WEB_PORT": str(web_port),
        }
        assert substituted.keys() <= env.keys(), "a substitution for a variable the manifest does not set"
        assert not (harness or {}).keys() & env.keys(), "the harness must not override the manifest"
        self.manifest_env = dict(env)
        env.update(substituted)
        # nothing of this shell's settings leaks in (AGENTSTREAM_PURE and the like, not settings, do)
        full = {k: v for k, v in os.environ.items() if k not in settings.setting_variables()}
        full.update({"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **(harness or {}), **env})
        command = c["command"]
        assert command[0] == "agentstream"  # the console script: this interpreter's module
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab" if restart else "wb")  # a restarted pod's log goes on
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentstream", *command[1:], *c["args"]],
            cwd=ROOT,  # the image's WORKDIR holds apps/
            env=full,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def grace(self) -> float:
        return float(self.sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])

    def probe_url(self, probe: str) -> str:
        get = self.container[probe]["httpGet"]
        assert manifests.port(self.container, get["port"]) == int(self.manifest_env["AGENTSTREAM_WEB_PORT"])
        return f"http://127.0.0.1:{self.port}{get['path']}"  # the substituted port

    def probe(self, probe: str) -> tuple[int, Any]:
        """(status, JSON body) of the probe as the kubelet sends it; (0, None) while nothing listens."""
        try:
            with urllib.request.urlopen(self.probe_url(probe), timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, None

    def wait_ready(self, timeout: float = 120.0) -> list[tuple[int, Any]]:
        """Poll the readiness probe until it passes; every answer before that, in order."""
        seen: list[tuple[int, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.probe("readinessProbe")
            if status == 200:
                return seen
            seen.append((status, body))
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            assert time.monotonic() < deadline, f"{self.name} never ready: {seen[-3:]}\n{self.log()[-3000:]}"
            time.sleep(0.02)

    def sigterm_as_kubelet(self) -> int:
        """SIGTERM, then SIGKILL once the grace period is over, as the kubelet stops a pod: the exit code,
        or an AssertionError when the grace period ran out."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(self.grace)
        except subprocess.TimeoutExpired:
            self.stop_quietly()
            raise AssertionError(
                f"{self.name} still running {self.grace}s after SIGTERM:\n{self.log()[-3000:]}"
            ) from None
        self._log.close()
        return code


# the dev broker's short group timeouts (worker_env's): only for variables the manifest leaves unset
DEV_BROKER_TIMING = {
    k: v for k, v in worker_env("").items() if k in settings.setting_variables() and k != "AGENTSTREAM_BROKER"
}
CHANGELOG = "wordcount-word_counts-changelog"


async def _fill_changelog(bootstrap: str, records: int, partitions: int) -> None:
    """``records`` keys ``k<i>`` (raw, as the table encodes untyped keys) with value i, each in its key's
    partition (Kafka's murmur2, as the worker's lookups compute it)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(CHANGELOG, partitions, 1, topic_configs={"cleanup.policy": "compact"})])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=1 << 20)
    await producer.start()
    try:
        batches: dict[int, Any] = {}
        pending = []
        for i in range(records):
            k = f"k{i}".encode()
            p = (murmur2(k) & 0x7FFFFFFF) % partitions
            batch = batches.get(p)
            if batch is None:
                batch = batches[p] = producer.create_batch()
            if batch.append(key=k, value=str(i).encode(), timestamp=None) is None:
                pending.append(await producer.send_batch(batch, CHANGELOG, partition=p))
                batch = batches[p] = producer.create_batch()
                batch.append(key=k, value=str(i).encode(), timestamp=None)
        for p, batch in batches.items():
            pending.append(await producer.send_batch(batch, CHANGELOG, partition=p))
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


def _lookup_one(port: int, key: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/tables/word_counts/{quote(key)}", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


RESTORE_RECORDS = 100_000  # about a second of restore on a loaded machine: many readiness probes


def test_kit_pod_is_ready_only_once_restored_and_stops_within_its_grace_period(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    log_dir = ARTIFACTS / request.node.name
    app = _app_of(_base()[2])
    asyncio.run(_fill_changelog(fresh_broker.bootstrap, RESTORE_RECORDS, app.tables["word_counts"].partitions))
    pod = Pod(
        "wordcount-0",
        fresh_broker.url,
        tmp_path / "wordcount-0",
        log_dir,
        web_port=free_port(),
        harness=DEV_BROKER_TIMING,
    )
    try:
        before = pod.wait_ready()
        restoring = [body for status, body in before if status == 503 and body["restoring"]]
        assert restoring, f"readiness never failed while the tables restored: {before[-5:]}"
        assert all(status in (0, 503) for status, _ in before), before  # nothing but 503 (or not listening yet)
        m = pod.wait_log(r"restored (\d+) records", timeout=5)
        assert int(m.group(1)) == RESTORE_RECORDS
        assert pod.probe("livenessProbe")[0] == 200
        for i in (0, 1, RESTORE_RECORDS - 1):  # ready: the whole table answers
            status, body = _lookup_one(pod.port, f"k{i}")
            assert (status, body.get("value")) == (200, i), body
        # SIGTERM with records in flight: the worker commits and exits 0 before the kubelet's SIGKILL
        feed(fresh_broker.bootstrap, sentences(2000, seed=5))
        pod.wait_log(r"wordcount-words\[")  # handling records
        assert pod.sigterm_as_kubelet() == 0
        log = pod.log()
        assert "worker for wordcount stopped" in log, log[-2000:]
    finally:
        pod.stop_quietly()


def _metadata(pod: Pod) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{pod.port}/metadata", timeout=10) as r:
        return json.loads(r.read())


def _moves(pod: Pod) -> tuple[int, int]:
    """How many assignments and revocations the pod's worker logged."""
    log = pod.log()
    return log.count("assigned: "), log.count("revoked: ")


def test_kit_pods_rejoin_after_a_restart_without_moving_partitions(
    kafka: ClusterInfo, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two pods named as the StatefulSet names them, on Kafka (the dev broker holds a static member's
    joins for seconds and rebalances: docs/deployment.md "Static membership"), with the manifest's own
    group timeouts. wordcount-0 restarts on its volume: it gets its partitions back, and wordcount-1 goes
    through no rebalance (aiokafka revokes and assigns at every one it takes part in: its log would say)."""
    log_dir = ARTIFACTS / request.node.name
    names = ["wordcount-0", "wordcount-1"]
    ports = {n: free_port() for n in names}
    pods = {n: Pod(n, kafka.url, tmp_path / n, log_dir, web_port=ports[n]) for n in names}  # started together
    try:
        # settled: both ready, each owning a share, both seeing the same generation and owners
        deadline = time.monotonic() + 90
        while True:
            for p in pods.values():
                p.wait_ready()
            metas = {n: _metadata(p) for n, p in pods.items()}
            shares = {n: set(m["active"]) for n, m in metas.items()}
            if all(shares.values()) and len({str(m["partitions"]) for m in metas.values()}) == 1:
                break
            assert time.monotonic() < deadline, f"the group never settled: {metas}"
            time.sleep(0.5)
        moves_1 = _moves(pods["wordcount-1"])
        feed(kafka.bootstrap, sentences(300, seed=11))  # records in flight across the restart

        assert pods["wordcount-0"].sigterm_as_kubelet() == 0
        assert "staying in the group as static member 'wordcount-0'" in pods["wordcount-0"].log()
        pods["wordcount-0"] = Pod(
            "wordcount-0", kafka.url, tmp_path / "wordcount-0", log_dir, web_port=ports["wordcount-0"], restart=True
        )
        pods["wordcount-0"].wait_ready()
        after = {n: _metadata(p) for n, p in pods.items()}
        assert set(after["wordcount-0"]["active"]) == shares["wordcount-0"], "the restarted pod's partitions moved"
        assert set(after["wordcount-1"]["active"]) == shares["wordcount-1"]
        assert after["wordcount-0"]["partitions"] == metas["wordcount-1"]["partitions"], after
        assert _moves(pods["wordcount-1"]) == moves_1, (
            "wordcount-1 went through a rebalance while wordcount-0 restarted"
        )
        for p in pods.values():
            assert p.sigterm_as_kubelet() == 0
    finally:
        stop_all(list(pods.values()))
