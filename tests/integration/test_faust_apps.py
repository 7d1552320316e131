"""The Faust-style apps of tests/faust_apps on the real broker: each runs unchanged as
``python -m agentstream -A tests.faust_apps.X worker`` (all workers start together, against one
session broker) and gives the results Faust's documentation describes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from agentstream.devbroker import DevBroker

from .cluster import ROOT, Worker, read_topic, worker_env

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "faust_apps"


def _env(broker: DevBroker) -> dict[str, str]:
    return worker_env(broker.url)


class AppWorker(Worker):
    """``python -m agentstream -A tests.faust_apps.<module> worker`` with its log in artifacts/."""

    def __init__(
        self, module: str, broker: DevBroker, data_dir: Path, *, name: str | None = None, web: bool = False
    ) -> None:
        super().__init__(
            name or module,
            broker.url,
            data_dir,
            ARTIFACTS,
            app=f"tests.faust_apps.{module}",
            web_port=0 if web else None,
        )

    @property
    def web_url(self) -> str:
        m = self.wait_log(r"listening on (http://[0-9.]+:\d+)")
        return m.group(1)


def cli(broker: DevBroker, module: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentstream", "-A", f"tests.faust_apps.{module}", *args],
        cwd=ROOT,
        env=_env(broker),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def _produce(bootstrap: str, topic: str, records: list[tuple[Any, Any, float | None]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for key, value, ts in records:
            kb = None if key is None else str(key).encode()
            vb = value if isinstance(value, bytes) else orjson.dumps(value)
            await producer.send(topic, vb, key=kb, timestamp_ms=None if ts is None else int(ts * 1000))
        await producer.flush()
    finally:
        await producer.stop()


def produce(broker: DevBroker, topic: str, records: list[tuple[Any, Any, float | None]]) -> None:
    asyncio.run(_produce(broker.bootstrap, topic, records))


def wait_topic(broker: DevBroker, topic: str, check: Any, timeout: float = 60.0) -> list[tuple[Any, Any]]:
    """Poll ``topic`` until ``check(records)`` holds; returns the (key, value) pairs decoded."""
    deadline = time.monotonic() + timeout
    got: list[tuple[Any, Any]] = []
    while time.monotonic() < deadline:
        got = [
            (None if k is None else k.decode(), None if v is None else orjson.loads(v))
            for k, v in read_topic(broker.bootstrap, topic)
        ]
        if check(got):
            return got
        time.sleep(0.5)
    raise AssertionError(f"{topic}: condition not met within {timeout}s; got {got}")


def last(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    return {k: v for k, v in pairs}


def http_json(url: str, forwarded: list[str] | None = None) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        if forwarded is not None and resp.headers.get("X-Agentstream-Served-By"):
            forwarded.append(url)
        return orjson.loads(resp.read())


MODULES = ["hello_world", "timer_producer", "rpc", "set_table", "global_table", "windowed"]


@pytest.fixture(scope="module")
def workers(broker: DevBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, AppWorker]]:
    """Every app's worker (two for word_count, with web servers), started together."""
    data = tmp_path_factory.mktemp("faust-apps")
    started = {m: AppWorker(m, broker, data / m) for m in MODULES}
    started["wc1"] = AppWorker("word_count", broker, data / "wc1", name="wc1", web=True)
    started["wc2"] = AppWorker("word_count", broker, data / "wc2", name="wc2", web=True)
    try:
        for w in started.values():
            w.wait_log(r"assigned: \S")
        yield started
    finally:
        for w in started.values():
            w.stop_quietly()


def test_hello_world_cli_send(broker: DevBroker, workers: dict[str, AppWorker]) -> None:
    out = cli(broker, "hello_world", "send", "faust-greetings", "hello", "--repeat", "2")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count('"topic":"faust-greetings"') == 2
    workers["hello_world"].wait_log(r"GREETING: hello[\s\S]*GREETING: hello")


def test_word_count_and_table_route_across_two_workers(broker: DevBroker, workers: dict[str, AppWorker]) -> None:
    w1, w2 = workers["wc1"], workers["wc2"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # both members of the final generation hold partitions
        a1, a2 = w1.last_assignment("faust-sentences"), w2.last_assignment("faust-sentences")
        if a1 and a2 and a1 | a2 == {0, 1, 2, 3}:
            break
        time.sleep(0.2)
    texts = ["the quick brown fox", "jumps over the lazy dog", "the end", "hello world hello"]
    produce(broker, "faust-sentences", [(None, {"text": t}, None) for t in texts])
    expected: dict[str, int] = {}
    for t in texts:
        for w in t.split():
            expected[w] = expected.get(w, 0) + 1
    wait_topic(broker, "faust-word-counts", lambda got: last(got) == expected)
    # @app.table_route: any worker answers for any word (the non-owner forwards to the owner).
    forwarded: list[str] = []
    for url in (w1.web_url, w2.web_url):
        for word, count in expected.items():
            assert http_json(f"{url}/count/{word}/", forwarded) == {word: count}
        assert http_json(f"{url}/hello/") == {"hello": "world", "app": "faust-word-count"}
    assert len(forwarded) == len(expected)  # each word's non-owner forwarded once, its owner answered once


def test_windowed_tumbling_and_hopping(broker: DevBroker, workers: dict[str, AppWorker]) -> None:
    base = (int(time.time()) // 10) * 10 - 600
    produce(broker, "faust-page-views", [("/a", {"page": "/a", "user": "u"}, base + off) for off in (0, 3, 8, 12)])
    got = wait_topic(broker, "faust-window-counts", lambda got: len(got) >= 4)
    assert [v["tumbling"] for _, v in got] == [1, 2, 3, 1]
    assert [v["hopping"] for _, v in got] == [1, 2, 1, 1]


def test_timer_task_and_service(workers: dict[str, AppWorker]) -> None:
    w = workers["timer_producer"]
    w.wait_log(r"TICK 3")
    for line in ("APP TASK RAN", "HEARTBEAT SERVICE STARTING", "HEARTBEAT SERVICE WAKING UP"):
        assert line in w.log()


def test_rpc_ask_from_a_custom_command(broker: DevBroker, workers: dict[str, AppWorker]) -> None:
    out = cli(broker, "rpc", "call-add", "--a", "2", "--b", "40")
    assert out.returncode == 0, out.stderr
    assert "RESULT 42" in out.stdout


def test_set_table(broker: DevBroker, workers: dict[str, AppWorker]) -> None:
    visits = [("ann", "/a"), ("bob", "/b"), ("ann", "/c"), ("ann", "/a")]
    produce(broker, "faust-visits", [(u, {"user": u, "page": p}, None) for u, p in visits])
    got = wait_topic(broker, "faust-user-pages", lambda got: len(got) >= 4)
    assert last(got) == {"ann": ["/a", "/c"], "bob": ["/b"]}


def test_global_table(broker: DevBroker, workers: dict[str, AppWorker]) -> None:
    produce(broker, "faust-prices", [("apple", 0.5, None), ("pear", 0.75, None), ("plum", 2.0, None)])
    wait_topic(broker, "faust-global-table-prices-changelog", lambda got: len(got) >= 3)
    orders = [("o0", "apple", 4), ("o1", "pear", 2), ("o2", "plum", 3)]
    produce(broker, "faust-orders", [(i, {"id": i, "sku": s, "quantity": q}, None) for i, s, q in orders])
    got = wait_topic(broker, "faust-order-totals", lambda got: len(got) >= 3)
    assert last(got) == {"o0": 2.0, "o1": 1.5, "o2": 6.0}


def test_stop_then_reset_offsets(broker: DevBroker, workers: dict[str, AppWorker]) -> None:
    w = workers["timer_producer"]
    assert w.terminate() == 0
    assert "HEARTBEAT SERVICE STOPPING" in w.log()
    out = cli(broker, "timer_producer", "reset", "--offsets", "--yes", "--data-dir", str(w.log_path.parent / "x"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rewound group 'faust-timer'" in out.stdout
