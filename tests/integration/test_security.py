"""Kafka TLS + SASL end to end: a wordcount worker over an encrypted, authenticated connection
to the tansu dev broker, and wrong credentials failing at start with one clear line.

tansu 0.6.0 cannot terminate TLS nor keep SASL users (see tests/integration/tls_proxy.py), so
TLS and the broker side of SASL are served by a loopback proxy in front of it; the broker
advertises the proxy's port, so every client connection goes through TLS and a SASL login.
Certificates are made at test time with the openssl CLI.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from agentstream.credentials import build_ssl_context
from agentstream.devbroker import free_port, tansu_binary

from .cluster import ROOT, Worker, sentences, stop_all, true_counts
from .tls_proxy import make_certs

ARTIFACTS = ROOT / "artifacts"
USER, PASSWORD = "wordcounter", "correct horse battery staple"
TOKEN = "test-oauth-token-123"
MECHANISMS = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "OAUTHBEARER"]


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"process exited with {proc.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} did not open")


class SecureBroker:
    """tansu on a private port + the TLS/SASL proxy on the advertised one."""

    def __init__(self, directory: Path, *, client_ca: bool = False) -> None:
        self.certs = make_certs(directory / "certs")
        self.plain_port, self.port = free_port(), free_port()
        self._log = open(directory / "tansu.log", "wb")
        self._proxy_log = open(directory / "proxy.log", "wb")
        url = f"tcp://127.0.0.1:{self.plain_port}"
        self.broker = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                f"tcp://127.0.0.1:{self.port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        cmd = [
            sys.executable,
            "-m",
            "tests.integration.tls_proxy",
            "--listen",
            str(self.port),
            "--upstream",
            str(self.plain_port),
            "--cert",
            str(self.certs["server_cert"]),
            "--key",
            str(self.certs["server_key"]),
            f"--user={USER}:{PASSWORD}",
            f"--token={TOKEN}",
        ]
        cmd += [f"--mechanism={m}" for m in MECHANISMS]
        if client_ca:
            cmd += ["--cafile", str(self.certs["ca"])]
        self.proxy = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._proxy_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_port(self.plain_port, self.broker)
            _wait_port(self.port, self.proxy)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"kafka://127.0.0.1:{self.port}"

    def env(self, mechanism: str = "SCRAM-SHA-512", password: str = PASSWORD) -> dict[str, str]:
        """A worker's AGENTSTREAM_* variables for TLS (our CA) + SASL."""
        return {
            "AGENTSTREAM_BROKER_SSL_CAFILE": str(self.certs["ca"]),
            "AGENTSTREAM_BROKER_SASL_MECHANISM": mechanism,
            "AGENTSTREAM_BROKER_SASL_USERNAME": USER,
            "AGENTSTREAM_BROKER_SASL_PASSWORD": password,
        }

    def client_kwargs(self) -> dict[str, Any]:
        return {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": USER,
            "sasl_plain_password": PASSWORD,
            "ssl_context": build_ssl_context(cafile=str(self.certs["ca"]), certfile=None, keyfile=None),
        }

    def stop(self) -> None:
        for proc in (self.proxy, self.broker):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self._log.close()
        self._proxy_log.close()


@pytest.fixture
def secure_broker(request: pytest.FixtureRequest) -> Iterator[SecureBroker]:
    d = ARTIFACTS / request.node.name
    d.mkdir(parents=True, exist_ok=True)
    b = SecureBroker(d)
    try:
        yield b
    finally:
        b.stop()


async def _feed(b: SecureBroker, texts: list[str]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{b.port}", linger_ms=5, **b.client_kwargs())
    await producer.start()
    try:
        for t in texts:
            await producer.send("sentences", orjson.dumps({"text": t}))
        await producer.flush()
    finally:
        await producer.stop()


async def _counts(b: SecureBroker) -> dict[str, int]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{b.port}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **b.client_kwargs(),
    )
    await consumer.start()
    out: dict[str, int] = {}
    try:
        parts = consumer.partitions_for_topic("word-counts") or set()
        if not parts:
            return out
        from aiokafka import TopicPartition

        tps = [TopicPartition("word-counts", p) for p in parts]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for r in records:
                    out[r.key.decode()] = orjson.loads(r.value)
            done = True
            for tp in tps:
                hw = consumer.highwater(tp)
                done = done and hw is not None and await consumer.position(tp) >= hw
            if done:
                break
    finally:
        await consumer.stop()
    return out


def _wait_counts(b: SecureBroker, expected: dict[str, int], timeout: float = 120.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    got: dict[str, int] = {}
    while time.monotonic() < deadline:
        got = asyncio.run(_counts(b))
        if got == expected:
            return got
        time.sleep(1)
    return got


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_wordcount_over_tls_and_sasl(
    secure_broker: SecureBroker, tmp_path: Path, request: pytest.FixtureRequest, mechanism: str
) -> None:
    texts = sentences(500, seed=11)
    w = Worker(
        "w1", secure_broker.url, tmp_path / "w1", ARTIFACTS / request.node.name, env=secure_broker.env(mechanism)
    )
    try:
        w.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]", timeout=90)
        asyncio.run(_feed(secure_broker, texts))
        expected = true_counts(texts)
        assert _wait_counts(secure_broker, expected) == expected
        assert PASSWORD not in w.log()  # never logged, at info level
        assert w.terminate() == 0
    finally:
        stop_all([w])


def test_wrong_password_fails_at_start_with_one_line(
    secure_broker: SecureBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    w = Worker(
        "bad",
        secure_broker.url,
        tmp_path / "bad",
        ARTIFACTS / request.node.name,
        env=secure_broker.env("SCRAM-SHA-256", password="not-the-password"),
    )
    try:
        rc = w.proc.wait(90)
        log = w.log()
        assert rc == 2, log
        lines = [ln for ln in log.splitlines() if ln.startswith("agentstream: error:")]
        assert len(lines) == 1, log
        assert "broker_sasl_password" in lines[0] and "SCRAM-SHA-256" in lines[0], lines[0]
        assert "Traceback" not in log and "not-the-password" not in log, log
    finally:
        stop_all([w])


def test_untrusted_broker_certificate_fails_at_start(
    secure_broker: SecureBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = secure_broker.env()
    env["AGENTSTREAM_BROKER_SSL_CAFILE"] = str(secure_broker.certs["other_ca"])
    w = Worker("untrusted", secure_broker.url, tmp_path / "u", ARTIFACTS / request.node.name, env=env)
    try:
        rc = w.proc.wait(90)
        log = w.log()
        assert rc == 2, log
        line = [ln for ln in log.splitlines() if ln.startswith("agentstream: error:")]
        assert len(line) == 1 and "broker_ssl_cafile" in line[0] and "certificate" in line[0], log
    finally:
        stop_all([w])


def test_oauthbearer_and_mutual_tls_clients(tmp_path: Path) -> None:
    """OAUTHBEARER (fixed token) over mutual TLS, through agentstream's own transport."""
    from agentstream import App
    from agentstream.transport.base import TopicSpec

    b = SecureBroker(tmp_path, client_ca=True)
    try:
        c = b.certs

        async def run(token: str) -> None:
            app = App(
                "oauth-check",
                broker=b.url,
                store="memory://",
                broker_sasl_mechanism="OAUTHBEARER",
                broker_sasl_oauth_token=token,
                broker_ssl_cafile=str(c["ca"]),
                broker_ssl_certfile=str(c["client_cert"]),
                broker_ssl_keyfile=str(c["client_key"]),
            )
            try:
                await app.transport.ensure_topics([TopicSpec("oauth-topic", 2)])
            finally:
                await app.transport.close()

        asyncio.run(run(TOKEN))
        from agentstream.transport.kafka.security import BrokerAuthError

        with pytest.raises(BrokerAuthError, match="OAUTHBEARER"):
            asyncio.run(run("wrong-token"))
    finally:
        b.stop()
