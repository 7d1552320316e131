"""Faults on the real broker: kill -9 under load, broker connection loss, damaged local state,
an unwritable data dir, and exactly_once refused by a broker without transactions.

Every test prints what it measured (duplicates under at_least_once); docs/guarantees.md records
the figures.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentstream.devbroker import DevBroker, free_port, tansu_binary
from tests.support.fault_proxy import FaultProxy as TcpProxy

from .cluster import (
    Feeder,
    Worker,
    changelog_state,
    feed,
    read_topic,
    sentences,
    stop_all,
    true_counts,
    wait_counts,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
KILL_SENTENCES = int(os.environ.get("AGENTSTREAM_FAULT_SENTENCES", "30000"))


def report(name: str, expected: dict[str, int], got: dict[str, int]) -> int:
    """Print and return the duplicated effects (sum of count - truth); asserts nothing was lost."""
    low = {w: (got.get(w), c) for w, c in expected.items() if got.get(w, 0) < c}
    assert not low, f"{name}: {len(low)} words below the truth (lost updates), e.g. {list(low.items())[:5]}"
    assert set(got) == set(expected), f"{name}: unexpected words {set(got) - set(expected)}"
    duplicates = sum(got[w] - c for w, c in expected.items())
    print(
        f"\n{name}: {sum(expected.values())} word records, {duplicates} duplicated effects "
        f"({100.0 * duplicates / max(1, sum(expected.values())):.2f}%)"
    )
    return duplicates


def test_exactly_once_is_refused_by_a_broker_without_transactions(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    w = Worker(
        "eos",
        fresh_broker.url,
        tmp_path / "w",
        ARTIFACTS / request.node.name,
        env={"AGENTSTREAM_PROCESSING_GUARANTEE": "exactly_once"},
    )
    try:
        code = w.proc.wait(120)
        log = w.log()
        assert code != 0, log
        assert "processing_guarantee" in log and "at_least_once" in log and "InitProducerId" in log, log[-2000:]
        assert "assigned:" not in log, "the worker joined the group before refusing"
    finally:
        w.stop_quietly()


def test_kill9_one_of_three_workers_every_few_seconds(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    texts = sentences(KILL_SENTENCES, seed=21)
    logs = ARTIFACTS / request.node.name
    workers = {n: Worker(n, fresh_broker.url, tmp_path / n, logs) for n in ("w1", "w2", "w3")}
    everyone = list(workers.values())
    rnd = random.Random(21)
    kills = 0
    try:
        for w in everyone:
            w.wait_log(r"assigned: .*sentences\[")
        began = time.monotonic()
        feeder = Feeder(fresh_broker.bootstrap, texts, chunk=1000, pause=0.05)
        feeder.start()
        while feeder.is_alive() or kills < 3:
            time.sleep(rnd.uniform(3.0, 5.0))
            name = rnd.choice(sorted(workers))
            workers[name].kill()
            kills += 1
            workers[name] = Worker(f"{name}-{kills}", fresh_broker.url, tmp_path / name, logs)
            everyone.append(workers[name])
        feeder.finish()
        expected = true_counts(texts)
        got = wait_counts(fresh_broker.bootstrap, expected, at_least=True, timeout=180)
        elapsed = time.monotonic() - began
        duplicates = report(f"kill -9 x{kills}, 3 workers, {len(texts)} sentences in {elapsed:.0f}s", expected, got)
        assert kills >= 3
        for w in workers.values():
            assert w.terminate() == 0
        assert duplicates >= 0
    finally:
        stop_all(everyone)


class ProxyThread:
    """A :class:`TcpProxy` on its own event loop in a thread, driven from a synchronous test."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        self.proxy = TcpProxy(listen_port, target_port)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def _call(self, coro: asyncio.Future[None] | Any) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def start(self) -> None:
        self._call(self.proxy.start())

    def stop(self) -> None:
        self._call(self.proxy.stop())

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def proxied_broker(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[DevBroker, ProxyThread]]:
    """tansu on one port, advertising a proxy port in front of it: every client goes through the proxy."""
    from agentstream import devbroker

    log_dir = ARTIFACTS / request.node.name
    log_dir.mkdir(parents=True, exist_ok=True)
    broker_port, proxy_port = free_port(), free_port()
    proxy = ProxyThread(proxy_port, broker_port)
    proxy.start()
    monkeypatch.setattr(
        devbroker,
        "_broker_command",
        lambda port, silent=False: [
            tansu_binary(),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{proxy_port}",
        ],
    )
    broker = DevBroker(broker_port, log_path=log_dir / "broker.log")
    broker.start()
    try:
        yield broker, proxy
    finally:
        proxy.close()
        broker.stop()


class RetryingFeeder(Feeder):
    """Feeds through the outage: a chunk that fails is sent again (so it may land twice; the
    test takes the truth from what the input topic really holds)."""

    def run(self) -> None:
        try:
            for i in range(0, len(self.texts), self.chunk):
                while True:
                    try:
                        feed(self.bootstrap, self.texts[i : i + self.chunk])
                        break
                    except Exception:
                        time.sleep(0.5)
                self.sent = min(len(self.texts), i + self.chunk)
                time.sleep(self.pause)
        except BaseException as exc:
            self.error = exc


def test_broker_connection_lost_for_10s_mid_stream(
    proxied_broker: tuple[DevBroker, ProxyThread], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    broker, proxy = proxied_broker
    url = f"kafka://127.0.0.1:{proxy.proxy.listen_port}"
    bootstrap = f"127.0.0.1:{proxy.proxy.listen_port}"
    texts = sentences(24000, seed=31)
    logs = ARTIFACTS / request.node.name
    workers = [Worker(n, url, tmp_path / n, logs) for n in ("w1", "w2")]
    try:
        for w in workers:
            w.wait_log(r"assigned: .*sentences\[")
        feeder = RetryingFeeder(bootstrap, texts, chunk=500, pause=0.2)
        feeder.start()
        while feeder.sent < 6000:
            time.sleep(0.05)
        proxy.stop()
        cut = time.monotonic()
        at_cut = feeder.sent
        time.sleep(10.0)
        assert all(w.proc.poll() is None for w in workers), "a worker exited during the outage"
        proxy.start()
        print(f"\nbroker unreachable for {time.monotonic() - cut:.1f}s, cut after {at_cut} of {len(texts)} sentences")
        assert feeder.is_alive(), "the feed ended before the outage ended: not mid-stream"
        feeder.finish(timeout=180)
        fed = [orjson.loads(v)["text"] for _, v in read_topic(bootstrap, "sentences") if v is not None]
        assert len(fed) >= len(texts)
        expected = true_counts(fed)
        got = wait_counts(bootstrap, expected, at_least=True, timeout=120)
        report(
            f"broker connection lost for 10s ({len(fed) - len(texts)} sentences fed twice by the retrying feeder)",
            expected,
            got,
        )
        for w in workers:
            assert w.proc.poll() is None, f"{w.name} exited: it must recover without a restart"
            assert w.terminate() == 0
    finally:
        stop_all(workers)


CORRUPT = re.compile(r"store is corrupt|beyond the changelog's end")


def table_dir(data: Path, partition: int) -> Path:
    return data / "wordcount" / "tables" / "word_counts" / str(partition)


@pytest.mark.parametrize("damage", ["corrupt-rocksdb", "checkpoint-ahead", "missing-manifest"])
def test_damaged_store_is_wiped_and_restored_once(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest, damage: str
) -> None:
    from .test_recovery import store_state

    texts = sentences(6000, seed=41)
    logs = ARTIFACTS / request.node.name
    data = tmp_path / "w"
    w1 = Worker("first", fresh_broker.url, data, logs)
    workers = [w1]
    try:
        w1.wait_log(r"assigned: .*sentences\[")
        feed(fresh_broker.bootstrap, texts[:4000])
        assert wait_counts(fresh_broker.bootstrap, true_counts(texts[:4000])) == true_counts(texts[:4000])
        assert w1.terminate() == 0
        part = table_dir(data, 1)
        if damage == "corrupt-rocksdb":
            manifests = list(part.glob("MANIFEST-*"))
            assert manifests, sorted(p.name for p in part.iterdir())
            for f in manifests:
                f.write_bytes(os.urandom(f.stat().st_size or 64))
        elif damage == "missing-manifest":  # issue 15 item 7: corruption, not an unwritable data dir
            for f in part.glob("MANIFEST-*"):
                f.unlink()
        else:
            (part / "agentstream.checkpoint").write_text("1000000000\n")
        w2 = Worker("second", fresh_broker.url, data, logs)
        workers.append(w2)
        w2.wait_log(r"assigned: .*sentences\[")
        feed(fresh_broker.bootstrap, texts[4000:])
        expected = true_counts(texts)
        got = wait_counts(fresh_broker.bootstrap, expected)
        assert got == expected, "a clean stop and a damaged store must still give exact counts"
        assert w2.terminate() == 0
        found = CORRUPT.findall(w2.log())
        assert len(found) == 1, f"expected the damage to be logged once, got {found}"
        assert store_state(data) == changelog_state(fresh_broker.bootstrap)
    finally:
        stop_all(workers)


def test_unwritable_data_dir_stops_the_worker_with_a_clear_error_and_loses_nothing(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    texts = sentences(8000, seed=51)
    logs = ARTIFACTS / request.node.name
    data = tmp_path / "w"
    prefix: list[str] = []
    if os.geteuid() == 0:
        # Root ignores file modes through CAP_DAC_OVERRIDE: run the worker as root without it (and
        # without CAP_DAC_READ_SEARCH), so the modes below bind it while it still reads the checkout
        # it owns, wherever that lives (a 0700 home or mktemp directory included).
        if shutil.which("setpriv") is None:
            pytest.skip("running as root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        caps = "-dac_override,-dac_read_search"
        prefix = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]
    data.mkdir()
    w1 = Worker("w", fresh_broker.url, data, logs, prefix=prefix)
    workers = [w1]
    try:
        w1.wait_log(r"assigned: .*sentences\[")
        feed(fresh_broker.bootstrap, texts[:4000])
        w1.wait_log(r"restored")
        time.sleep(1.0)
        for path in [data, *data.rglob("*")]:
            if path.is_dir():
                path.chmod(0o555)
        feed(fresh_broker.bootstrap, texts[4000:6000])
        # RocksDB keeps writing its open log file, and checkpoints are written every
        # CHECKPOINT_DELTA records and 30 s: the failure surfaces at the next checkpoint or store flush,
        # at the latest when the worker stops (a forced checkpoint). Ask it to stop.
        try:
            code = w1.proc.wait(10)
        except subprocess.TimeoutExpired:
            w1.proc.terminate()
            code = w1.proc.wait(60)
        log = w1.log()
        assert code != 0, "the worker must exit non-zero when it cannot write its data dir"
        assert "--data-dir" in log and "writable" in log, log[-3000:]
        for path in [data, *data.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        w2 = Worker("w-restarted", fresh_broker.url, data, logs, prefix=prefix)
        workers.append(w2)
        feed(fresh_broker.bootstrap, texts[6000:])
        expected = true_counts(texts)
        got = wait_counts(fresh_broker.bootstrap, expected, at_least=True)
        report("unwritable data dir, then restart", expected, got)
        assert w2.terminate() == 0
    finally:
        for path in [data, *data.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        stop_all(workers)
