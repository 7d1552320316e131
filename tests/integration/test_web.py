"""Interactive queries on the real broker: two wordcount worker processes with web servers; every
word is readable from either worker (forwarded to, or redirected to, the owner), and the live
status page renders with data in headless Chromium."""

from __future__ import annotations

import asyncio
import math
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
import pytest

from agentstream.devbroker import DevBroker, free_port

from .cluster import Worker, feed, sentences, stop_all, true_counts, wait_counts

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


class WebWorker(Worker):
    """A wordcount worker process like :class:`cluster.Worker`, but serving its web server."""

    def __init__(self, name: str, broker_url: str, data_dir: Path, log_dir: Path, web_port: int) -> None:
        self.web_port = web_port
        super().__init__(name, broker_url, data_dir, log_dir, web_port=web_port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.web_port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


class Cluster:
    def __init__(self, broker: DevBroker, workers: list[WebWorker], expected: dict[str, int]) -> None:
        self.broker, self.workers, self.expected = broker, workers, expected


async def _metadata(url: str) -> Any:
    async with aiohttp.ClientSession() as s:
        async with s.get(url + "/metadata") as r:
            return await r.json()


def wait_stable_metadata(workers: list[WebWorker], timeout: float = 60.0) -> dict[str, Any]:
    """Until both workers report the same owners, covering all four partitions and both workers."""
    deadline = time.monotonic() + timeout
    last: list[Any] = []
    while time.monotonic() < deadline:
        try:
            last = [asyncio.run(_metadata(w.url)) for w in workers]
        except (aiohttp.ClientError, OSError):
            time.sleep(0.3)
            continue
        owners = [m["partitions"] for m in last]
        if (
            all(o == owners[0] for o in owners)
            and len(owners[0]) == 4
            and set(owners[0].values()) == {w.address for w in workers}
            and all(m["active"] for m in last)
        ):
            return owners[0]  # type: ignore[no-any-return]
        time.sleep(0.3)
    raise AssertionError(f"the workers did not agree on partition owners: {last}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A broker of its own, two wordcount workers with web ports, 2000 sentences counted."""
    log_dir = ARTIFACTS / "test_web"
    log_dir.mkdir(parents=True, exist_ok=True)
    with DevBroker(log_path=log_dir / "broker.log") as broker, tempfile.TemporaryDirectory() as tmp:
        workers = [WebWorker(f"w{i}", broker.url, Path(tmp) / f"w{i}", log_dir, free_port()) for i in (1, 2)]
        try:
            for w in workers:
                w.wait_log(r"assigned: .*sentences\[")
                w.wait_log(r"web server for wordcount listening on http://127\.0\.0\.1:" + str(w.web_port))
            wait_stable_metadata(workers)
            texts = sentences(2000, seed=11)
            feed(broker.bootstrap, texts)
            expected = true_counts(texts)
            assert wait_counts(broker.bootstrap, expected) == expected
            yield Cluster(broker, workers, expected)
            for w in workers:
                assert w.terminate() == 0
        finally:
            stop_all(iter(workers))


async def _read_all(base: str, words: list[str], *, redirect: bool) -> dict[str, tuple[int, Any, str, bool]]:
    """word -> (status, value, served by, was redirected) for every word, asked at ``base``."""
    out: dict[str, tuple[int, Any, str, bool]] = {}
    async with aiohttp.ClientSession() as s:
        for i, word in enumerate(words):
            key = quote(orjson.dumps(word).decode() if i % 2 else word, safe="")  # both key spellings
            async with s.get(f"{base}/tables/word_counts/{key}" + ("?redirect=1" if redirect else "")) as r:
                body = await r.json()
                out[word] = (r.status, body.get("value"), body.get("served_by", ""), bool(r.history))
    return out


@pytest.mark.parametrize("redirect", [False, True], ids=["forward", "redirect-307"])
def test_every_word_readable_from_either_worker(cluster: Cluster, redirect: bool) -> None:
    words = sorted(cluster.expected)
    owners = wait_stable_metadata(cluster.workers)
    for w in cluster.workers:
        got = asyncio.run(_read_all(w.url, words, redirect=redirect))
        wrong = {word: got[word] for word in words if got[word][:2] != (200, cluster.expected[word])}
        assert not wrong, f"{len(wrong)} words wrong at {w.name}, e.g. {list(wrong.items())[:5]}"
        served = {got[word][2] for word in words}
        assert served == set(owners.values()), served  # both workers answered: routing went both ways
        remote = [word for word in words if got[word][2] != w.address]
        assert remote, f"no word of {w.name} was owned by the other worker"
        # a redirect is visible to the client; forwarding is not
        assert all(got[word][3] == redirect for word in remote)
        assert not any(got[word][3] for word in words if got[word][2] == w.address)


def test_metadata_and_metrics_agree_across_workers(cluster: Cluster) -> None:
    async def fetch(url: str) -> str:
        async with aiohttp.ClientSession() as s:
            async with s.get(url) as r:
                assert r.status == 200
                return await r.text()

    def table_keys() -> tuple[float, list[str]]:
        total, actives = 0.0, []
        for w in cluster.workers:
            text = asyncio.run(fetch(w.url + "/metrics"))
            for line in text.splitlines():
                m = re.match(
                    r'agentstream_table_keys\{table="word_counts",partition="(\d+)",role="active"\} (\S+)', line
                )
                if m:
                    actives.append(m.group(1))
                    total += float(m.group(2))
        return total, actives

    # The two workers together hold every partition of the table exactly once, active, and every word:
    # RocksDB's key counts are estimates (they count an overwrite again until a compaction), so at
    # least the number of words, never fewer. Polled: the first samples may precede the last commit.
    deadline = time.monotonic() + 60
    while True:
        total, actives = table_keys()
        ok = sorted(actives) == sorted(set(actives)) and len(actives) == 4
        if (ok and total >= len(cluster.expected)) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(actives) == sorted(set(actives)), f"a partition active on both workers: {sorted(actives)}"
    assert len(actives) == 4, actives  # the four partitions (wait_until_settled)
    assert total >= len(cluster.expected)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_status_page_renders_live_plots_in_headless_chromium(cluster: Cluster) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip(
            "chromium not found: `make test` installs it (apt-get install chromium); "
            "no headless browser to render the status page with"
        )
    w = cluster.workers[0]
    shot = ARTIFACTS / "status.png"
    shot.unlink(missing_ok=True)
    time.sleep(3)  # a few one-second samples of history beyond the feed
    with tempfile.TemporaryDirectory() as profile:
        common = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--window-size=1200,900",
            "--virtual-time-budget=5000",
        ]
        page = f"{w.url}/status.html"
        subprocess.run(
            common + [f"--screenshot={shot}", page],
            check=True,
            timeout=120,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        dom = subprocess.run(
            common + ["--dump-dom", page], check=True, timeout=120, capture_output=True, text=True
        ).stdout
    assert shot.exists() and shot.stat().st_size > 10_000, "no screenshot"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ARTIFACTS / "status.dom.html").write_text(dom)
    points = dict(re.findall(r'<span id="points-(\w+)">(\d+)</span>', dom))
    assert set(points) == {"records", "lag", "restore", "tables"}, dom[:2000]
    assert all(int(n) > 0 for n in points.values()), points
    assert 'id="conn" class="">live' in dom, "the page did not get /status data"
    # y-axis ticks at round values (1, 2, 5 x 10^n apart), not at fractions of the maximum
    for name, text in re.findall(r'<span class="ticks" id="ticks-(\w+)">([^<]*)</span>', dom):
        values = [float(v) for v in text.split(",")]
        step = values[1] - values[0]
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5, 10)), (name, values)
    # the lag legend names only partitions the worker has now
    legend = re.search(r'<div class="legend" id="l-lag">(.*?)</div>', dom, re.S)
    assert legend is not None
    active = set(re.findall(r'id="f-active">([^<]*)<', dom)[0].replace(" ", "").split(","))
    assert {p for _, p in re.findall(r"([\w-]+)\[(\d+)\]", legend.group(1))} <= active, (legend.group(1), active)
