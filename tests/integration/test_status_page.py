"""The status page's plots in headless Chromium, fed a crafted ``/status`` (no broker needed): y-axis
ticks at round values (1, 2, 5 x 10^n), and a lag legend that follows the assignment."""

from __future__ import annotations

import asyncio
import math
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from agentstream.web.status_page import render_status_page

from .conftest import ARTIFACTS


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _status() -> dict[str, Any]:
    """Ten samples: the worker had partitions 0-3, then gave 0 and 2 away (lag of 2 stuck at 20)."""
    t = [1000.0 + i for i in range(10)]
    lag = {
        f"sentences[{p}]": [120 - 7 * i if p in (1, 3) or i < 5 else (20 if p == 2 else 3) for i in range(10)]
        for p in range(4)
    }
    for p in (0, 2):  # not in the later samples
        lag[f"sentences[{p}]"] = [v if i < 5 else None for i, v in enumerate(lag[f"sentences[{p}]"])]
    return {
        "assignment": {"generation": 3, "active": [1, 3], "standby": []},
        "agents": {"count_words": {"processed": 8288}, "split": {"processed": 900}},
        "lag": {"sentences[1]": {"lag": 57}, "sentences[3]": {"lag": 57}},
        "worker": {"commits": 12},
        "errors": {"decode": 0, "agent": 0},
        "restore": {"restored_records": 10, "restoring": False, "not_ready": []},
        "history": {
            "t": t,
            "records_per_s": {
                "count_words": [8288.2, 438.9, 18.7, 7000, 1234, 0, 5, 90, 300, 8000],
                "split": [1.5] * 10,
            },
            "lag": lag,
            "restore": {"ready_pct": [50, 75, 100, 100, 100, 100, 100, 100, 100, 100]},
            "table_keys": {"word_counts": [0.3, 0.7, 1.1, 1.2, 1.3, 1.3, 1.4, 1.4, 1.45, 1.45]},
        },
    }


def _is_round_step(step: float) -> bool:
    exp = math.floor(math.log10(step))
    mantissa = step / 10**exp
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5, 10))


async def _render(chromium: str, shot: Path) -> str:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=render_status_page("wordcount", "127.0.0.1:1"), content_type="text/html")

    async def status(request: web.Request) -> web.Response:
        return web.json_response(_status())

    app = web.Application()
    app.router.add_get("/status.html", page)
    app.router.add_get("/status", status)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        with tempfile.TemporaryDirectory() as profile:
            common = [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                f"--user-data-dir={profile}",
                "--window-size=1200,900",
                "--virtual-time-budget=3000",
            ]
            url = f"http://127.0.0.1:{port}/status.html"
            shooter = await asyncio.create_subprocess_exec(
                *common,
                f"--screenshot={shot}",
                url,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            await asyncio.wait_for(shooter.wait(), 120)
            dumper = await asyncio.create_subprocess_exec(
                *common, "--dump-dom", url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
            )
            out, _ = await asyncio.wait_for(dumper.communicate(), 120)
            return out.decode()
    finally:
        await runner.cleanup()


def test_round_ticks_and_a_lag_legend_that_follows_the_assignment() -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium not found: `make test` installs it (apt-get install chromium)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "status-crafted.png"
    shot.unlink(missing_ok=True)
    dom = asyncio.run(_render(chromium, shot))
    (ARTIFACTS / "status-crafted.dom.html").write_text(dom)
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ticks = dict(re.findall(r'<span class="ticks" id="ticks-(\w+)">([^<]*)</span>', dom))
    assert set(ticks) == {"records", "lag", "restore", "tables"}, dom[:3000]
    for name, text in ticks.items():
        values = [float(v) for v in text.split(",")]
        assert values[0] == 0 and len(values) >= 3, (name, values)
        step = values[1] - values[0]
        assert _is_round_step(step), (name, values)
        assert all(abs(b - a - step) < 1e-9 * max(1.0, step) for a, b in zip(values, values[1:])), (name, values)
    records = [float(v) for v in ticks["records"].split(",")]
    assert records[-1] >= 8288.2 and records[-1] == 10000, records  # not 8288.2 * 1.1
    legend = re.search(r'<div class="legend" id="l-lag">(.*?)</div>', dom, re.S)
    assert legend is not None
    names = re.findall(r"sentences\[(\d+)\]", legend.group(1))
    assert names == ["1", "3"], legend.group(1)  # partitions 0 and 2 were given away
