"""TLS and SASL on Apache Kafka itself (issue 39 item 6), not through a proxy: a word-count worker runs its job
over the cluster's SSL listener (the test CA), over SASL_SSL with a PLAIN user, and over SASL_SSL with a
SCRAM-SHA-512 user this test creates through the admin API (AlterUserScramCredentials); a wrong password and a
CA that did not sign the brokers' certificates stop the worker at start with one line naming the setting and
the cause, and no secret in its log.

The feed and the check read through the PLAINTEXT listener of the same cluster; every connection of the worker
(group, fetch, produce, admin, changelog) goes through the secured listener it was given: the brokers advertise
the addresses of the listener a client came in through.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.kafka_cluster.scram import create_scram_user
from tests.kafka_cluster.shared import ClusterInfo

from .cluster import ROOT, Worker, feed, sentences, stop_all, true_counts, wait_counts
from .targets import Target, on_kafka

ARTIFACTS = ROOT / "artifacts"


def _secured(kafka: ClusterInfo) -> None:
    if not kafka.listeners or not kafka.certs:
        pytest.skip("the cluster named by AGENTSTREAM_TEST_KAFKA has no SSL/SASL listeners known to the tests")


def _scram_user(kafka: ClusterInfo, password: str) -> str:
    user = f"scram-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_scram_user(kafka.bootstrap, user, password, "SCRAM-SHA-512"))
    return user


def _security(kafka: ClusterInfo, how: str) -> tuple[str, dict[str, str], str]:
    """(listener addresses, the worker's AGENTSTREAM_* variables, the password that must never be logged)."""
    ca = {"AGENTSTREAM_BROKER_SSL_CAFILE": kafka.certs["ca"]}
    if how == "ssl":
        return kafka.listeners["ssl"], ca, ""
    if how == "sasl_ssl-plain":
        user, password = "alice", kafka.plain_users["alice"]
        mechanism = "PLAIN"
    else:
        user, password = "", f"pw-{uuid.uuid4().hex}"
        user = _scram_user(kafka, password)
        mechanism = "SCRAM-SHA-512"
    env = {
        **ca,
        "AGENTSTREAM_BROKER_SASL_MECHANISM": mechanism,
        "AGENTSTREAM_BROKER_SASL_USERNAME": user,
        "AGENTSTREAM_BROKER_SASL_PASSWORD": password,
    }
    return kafka.listeners["sasl_ssl"], env, password


def _worker(t: Target, name: str, listener: str, env: dict[str, str], tmp_path: Path, logs: Path) -> Worker:
    url = "kafka://" + ";".join(listener.split(","))
    return Worker(name, url, tmp_path / name, logs, app=t.wordcount, env={**t.env, **env})


@pytest.mark.parametrize("how", ["ssl", "sasl_ssl-plain", "sasl_ssl-scram-sha-512"])
def test_word_count_over_a_secured_kafka_listener(
    kafka: ClusterInfo, tmp_path: Path, request: pytest.FixtureRequest, how: str
) -> None:
    _secured(kafka)
    t = on_kafka(kafka.url, kafka.bootstrap)
    listener, env, password = _security(kafka, how)
    texts = sentences(400, seed=39)
    w = _worker(t, "w1", listener, env, tmp_path, ARTIFACTS / request.node.name)
    try:
        w.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]", timeout=90)
        feed(t.bootstrap, texts, topic=t.sentences)
        expected = true_counts(texts)
        assert wait_counts(t.bootstrap, expected, topic=t.word_counts) == expected
        log = w.log()
        assert not password or password not in log
        assert w.terminate() == 0, log[-3000:]
    finally:
        stop_all([w])


def _fails_at_start(w: Worker) -> str:
    """The worker's one error line; it exited 2 before joining the group, without a traceback."""
    try:
        rc = w.proc.wait(90)
    finally:
        w.stop_quietly()
    log = w.log()
    assert rc == 2, log[-3000:]
    lines = [ln for ln in log.splitlines() if ln.startswith("agentstream: error:")]
    assert len(lines) == 1, log[-3000:]
    assert "Traceback" not in log and "assigned:" not in log, log[-3000:]
    return lines[0]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_at_start_naming_it(
    kafka: ClusterInfo, tmp_path: Path, request: pytest.FixtureRequest, mechanism: str
) -> None:
    _secured(kafka)
    t = on_kafka(kafka.url, kafka.bootstrap)
    user = "alice" if mechanism == "PLAIN" else _scram_user(kafka, f"pw-{uuid.uuid4().hex}")
    wrong = f"not-the-password-{uuid.uuid4().hex[:6]}"
    env = {
        "AGENTSTREAM_BROKER_SSL_CAFILE": kafka.certs["ca"],
        "AGENTSTREAM_BROKER_SASL_MECHANISM": mechanism,
        "AGENTSTREAM_BROKER_SASL_USERNAME": user,
        "AGENTSTREAM_BROKER_SASL_PASSWORD": wrong,
    }
    w = _worker(t, "bad", kafka.listeners["sasl_ssl"], env, tmp_path, ARTIFACTS / request.node.name)
    line = _fails_at_start(w)
    assert "broker_sasl_password" in line and mechanism in line, line
    assert wrong not in w.log()


def test_an_untrusted_ca_fails_at_start_naming_it(
    kafka: ClusterInfo, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _secured(kafka)
    t = on_kafka(kafka.url, kafka.bootstrap)
    env = {"AGENTSTREAM_BROKER_SSL_CAFILE": kafka.certs["other_ca"]}
    w = _worker(t, "untrusted", kafka.listeners["ssl"], env, tmp_path, ARTIFACTS / request.node.name)
    line = _fails_at_start(w)
    assert "broker_ssl_cafile" in line and "certificate" in line, line
