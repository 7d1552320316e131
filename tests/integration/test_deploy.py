"""Deployment as docs/deployment.md describes it, on the real broker: workers on different hosts
(loopback addresses 127.0.0.2 and 127.0.0.3, each with ``--web-host``) answer key lookups for
each other; ``reset`` refuses while a worker of the app is alive."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from agentstream.devbroker import DevBroker, free_port

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
