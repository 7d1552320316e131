"""Issue 45 finding 9: ``/status?history=1`` at 1,000 partitions. The history's columns were built
with a list membership test per series and sample (quadratic in the series: about 1.8 s of loop at
1,000 partitions) and the status page fetched all 300 samples every second. Now the columns are one
linear pass, built once per sample, and the page asks only for the samples after its last one."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from agentstream.testing import AppHarness
from agentstream.web.stats import Stats
from agentstream.web.status_page import render_status_page

from .test_web import get, url

SERIES = 3000  # lag series at 1,000 partitions of three topics


@pytest.fixture
async def wordcount() -> AsyncIterator[AppHarness]:
    from apps.wordcount import app

    async with AppHarness(app) as h:
        sampler = h.web._sampler  # the test takes the samples itself
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        yield h


def _fill(stats: Stats, samples: int, series: int, t0: float = 1_000.0) -> None:
    """What ``samples`` seconds of sampling a worker with ``series`` lag series leave in the history."""
    stats.samples.clear()
    for i in range(samples):
        stats.samples.append(
            {
                "t": t0 + i,
                "rates": {"count_words": float(i)},
                "lag": {f"topic-{j % 3}[{j}]": i + j for j in range(series)},
                "restored_records": i,
                "ready_pct": 100.0,
                "tables": {"word_counts": i},
            }
        )


async def _raw(h: AppHarness, path: str) -> bytes:
    async with aiohttp.ClientSession() as s, s.get(url(h, path)) as r:
        assert r.status == 200, await r.text()
        return await r.read()


async def test_a_poll_after_the_first_gets_only_the_newer_samples(wordcount: AppHarness) -> None:
    for _ in range(3):
        await asyncio.sleep(0.01)  # samples are stamped to the millisecond
        await wordcount.web.stats.sample()
    _, full, _ = await get(url(wordcount, "/status?history=1"))
    t = full["history"]["t"]
    assert len(t) >= 3 and full["history"]["size"] == 300
    _, newer, _ = await get(url(wordcount, f"/status?history=1&since={t[-2]}"))
    h = newer["history"]
    assert h["t"] == t[-1:]
    assert h["lag"] == {name: col[-1:] for name, col in full["history"]["lag"].items()}
    assert h["records_per_s"] == {name: col[-1:] for name, col in full["history"]["records_per_s"].items()}
    _, none, _ = await get(url(wordcount, f"/status?history=1&since={t[-1]}"))
    assert none["history"]["t"] == [] and none["agents"] == newer["agents"]  # the rest of /status as ever
    for bad in ("x", "nan", "inf"):
        status, body, _ = await get(url(wordcount, f"/status?history=1&since={bad}"))
        assert status == 400 and "since" in body["error"], body


async def test_the_status_pages_poll_at_1000_partitions_is_one_sample_not_three_hundred(
    wordcount: AppHarness,
) -> None:
    stats = wordcount.web.stats
    t0 = wordcount.now() - 1_000
    _fill(stats, 300, SERIES, t0)
    full = await _raw(wordcount, "/status?history=1")
    poll = await _raw(wordcount, f"/status?history=1&since={t0 + 298}")
    assert json.loads(poll)["history"]["t"] == [t0 + 299]
    assert len(poll) * 50 < len(full), (len(poll), len(full))


async def test_building_the_columns_is_linear_in_the_series(wordcount: AppHarness) -> None:
    """Relative CPU time of one thread (not the wall clock): 10x the series costs about 10x, not 100x."""

    def cost(series: int) -> float:
        stats = Stats(wordcount.app, wordcount.worker, address=lambda: "x", history=50)
        _fill(stats, 50, series)
        began = time.thread_time()
        stats.history()
        return time.thread_time() - began

    cost(100)  # warm-up
    small = min(cost(300) for _ in range(3))
    large = min(cost(3000) for _ in range(3))
    assert large < 35 * small, (small, large)


def test_the_pages_merge_appends_new_samples_skips_known_ones_and_keeps_the_size() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: the page's script is checked with node")
    page = render_status_page("app", "127.0.0.1:1")
    script = page[page.index("// BEGIN mergeHistory") : page.index("// END mergeHistory")]
    first = {
        "t": [1, 2, 3],
        "size": 4,
        "records_per_s": {"a": [1, 1, 1]},
        "lag": {"x[0]": [5, 4, 3]},
        "restore": {"ready_pct": [50, 100, 100]},
        "table_keys": {},
    }
    second = {  # one known sample, two new ones; a new series, and x[0] gone (given away)
        "t": [3, 4, 5],
        "size": 4,
        "records_per_s": {"a": [1, 2, 3]},
        "lag": {"x[1]": [None, 7, 6]},
        "restore": {"ready_pct": [100, 100, 100]},
        "table_keys": {},
    }
    ignored = dict(second)  # a server that ignored since: everything again
    program = (
        script
        + f"let h = mergeHistory(null, {json.dumps(first)});"
        + f"h = mergeHistory(h, {json.dumps(second)});"
        + f"h = mergeHistory(h, {json.dumps(ignored)});"
        + "console.log(JSON.stringify(h));"
    )
    out = subprocess.run([node, "-e", program], capture_output=True, text=True, timeout=60, check=True).stdout
    got: dict[str, Any] = json.loads(out)
    assert got["t"] == [2, 3, 4, 5]
    assert got["records_per_s"] == {"a": [1, 1, 2, 3]}
    assert got["lag"] == {"x[0]": [4, 3, None, None], "x[1]": [None, None, 7, 6]}
    assert got["restore"] == {"ready_pct": [100, 100, 100, 100]}
