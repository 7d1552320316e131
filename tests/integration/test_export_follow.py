"""``agentstream -A apps.pageviews export page_views --out DIR --follow`` against a real worker: a windowed
table of a ``topic_naming='faust'`` app (Faust's JSON window keys). After new input DIR equals the live
table (the worker's web view) within 30 s; killed with SIGKILL (the whole process group: driver, JVM,
Python workers) and restarted, it neither loses nor duplicates a key's latest value; stopped with
SIGTERM it exits 0 and a restart reads only what the changelog got since. It runs once: on the Kafka cluster
(the same app under names of its own), on the dev broker only where no cluster can be had."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentstream.devbroker import free_port

from .cluster import ROOT, Worker, _produce, stop_all
from .targets import Target

pytest.importorskip("pyspark", reason="needs the spark extra: pip install 'agentstream[spark]'")
pa_parquet = pytest.importorskip("pyarrow.parquet")

from agentstream.exporter import JavaNotFound, check_java  # noqa: E402
from agentstream.exporter.offsets import snapshot_ranges  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
BASE = 60 * 28_333_334  # a window boundary
PAGES = [f"/page/{i}" for i in range(15)]
FAUST = {"AGENTSTREAM_TOPIC_NAMING": "faust"}

try:
    check_java()
except JavaNotFound as exc:  # pragma: no cover - the Makefile installs Java
    pytest.skip(str(exc), allow_module_level=True)


def _views(n: int, seed: int, offset: float) -> list[bytes]:
    """Views within [BASE + offset, BASE + offset + 20): never late (grace 30 s) in any order."""
    rnd = random.Random(seed)
    views = [
        {"page": rnd.choice(PAGES), "user": f"u{rnd.randint(0, 9)}", "ts": BASE + offset + rnd.uniform(0, 20)}
        for _ in range(n)
    ]
    return [orjson.dumps(v) for v in sorted(views, key=lambda v: v["ts"])]


def _live_table(web_port: int) -> dict[tuple[str, float], int] | None:
    """The table as the worker's web view lists it: (page, window start) -> count; None while it restores."""
    out: dict[tuple[str, float], int] = {}
    offset: int | None = 0
    while offset is not None:
        url = f"http://127.0.0.1:{web_port}/tables/page_views?limit=1000&offset={offset}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            page = json.load(resp)
        if page["restoring"]:
            return None
        for item in page["items"]:
            out[(item["key"], float(item["window"][0]))] = int(item["value"])
        offset = page["next_offset"]
    return out


def _exported(directory: Path) -> list[dict[str, Any]]:
    if not any(directory.glob("part-*.parquet")):
        return []
    rows: list[dict[str, Any]] = pa_parquet.read_table(str(directory)).to_pylist()
    return rows


def _as_table(rows: list[dict[str, Any]]) -> dict[tuple[str, float], int]:
    return {(r["key"], r["window_start"].timestamp()): int(r["value"]) for r in rows}


class Follow:
    """The ``export --follow`` command, in a session of its own (so SIGKILL can take its JVM too)."""

    def __init__(self, t: Target, out: Path, log: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", **FAUST, **t.env)
        cmd = [sys.executable, "-m", "agentstream", "-A", t.pageviews, "export", "page_views"]
        cmd += ["--out", str(out), "--follow", "--master", "local[2]", "--broker", t.url, "--interval", "0.5"]
        self.log_path = log
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def batches(self) -> list[tuple[int, int]]:
        """(batch id, records) of every progress line so far."""
        return [(int(m[1]), int(m[2])) for m in re.finditer(r"^batch (\d+): (\d+) records", self.text(), re.M)]

    def wait_batch(self, timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.batches():
            assert self.proc.poll() is None, self.text()[-4000:]
            assert time.monotonic() < deadline, f"no micro-batch within {timeout}s:\n{self.text()[-4000:]}"
            time.sleep(0.5)

    def kill_all(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)  # driver, JVM and Python workers: a crash
        self.proc.wait(30)
        self._log.close()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)  # the command only, as a service manager would
        code = self.proc.wait(120)
        self._log.close()
        return code

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        if not self._log.closed:
            self._log.close()


def _wait_equal(out: Path, web_port: int, follow: Follow, timeout: float = 90.0) -> dict[tuple[str, float], int]:
    """Poll until DIR holds the live table (one row per key and window); returns it. The bound is generous:
    with the integration tests on two workers, a micro-batch can wait a while for a core."""
    deadline = time.monotonic() + timeout
    live: dict[tuple[str, float], int] = {}
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        live = _live_table(web_port) or {}
        rows = _exported(out)
        if live and _as_table(rows) == live and len(rows) == len(live):
            return live
        assert follow.proc.poll() is None, follow.text()[-4000:]
        time.sleep(0.5)
    raise AssertionError(
        f"DIR never equalled the live table within {timeout}s: {len(rows)} rows, {len(live)} live entries, "
        f"differing: {sorted(set(_as_table(rows).items()) ^ set(live.items()))[:10]}\n{follow.text()[-3000:]}"
    )


def _changelog_end(t: Target) -> int:
    return sum(r.end for r in snapshot_ranges(t.bootstrap, t.page_views_changelog))


def _wait_caught_up(t: Target, follow: Follow, timeout: float = 90.0) -> None:
    """Until ``follow`` has read the whole changelog: its last micro-batch ended with no lag and the
    changelog has not grown since (Spark plans a batch every 0.5 s when there is more to read)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        end, seen = _changelog_end(t), len(follow.batches())
        lags = re.findall(r"^batch \d+: .*; lag ((?:p\d+=\d+ ?)+);", follow.text(), re.M)
        time.sleep(2.0)  # four trigger intervals: a batch for any record written meanwhile
        if lags and set(re.findall(r"=(\d+)", lags[-1])) == {"0"}:
            if _changelog_end(t) == end and len(follow.batches()) == seen:
                return
    raise AssertionError(
        f"the follower did not read to the changelog's end within {timeout}s:\n{follow.text()[-3000:]}"
    )


def _wait_worker_idle(web_port: int, total_views: int, timeout: float = 60.0) -> None:
    """Until the worker counted every view sent so far (the web view's counts add up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum((_live_table(web_port) or {}).values()) == total_views:
            return
        time.sleep(0.3)
    raise AssertionError(f"the worker did not count {total_views} views within {timeout}s")


@pytest.mark.parametrize("target", ["kafka-else-dev"], indirect=True)
def test_follow_keeps_dir_equal_to_the_live_table_across_kill_and_restart(
    target: Target, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    t = target
    logs = ARTIFACTS / request.node.name
    logs.mkdir(parents=True, exist_ok=True)
    web_port = free_port()
    out = tmp_path / "page_views"
    w = Worker("w1", t.url, tmp_path / "w1", logs, app=t.pageviews, env={**FAUST, **t.env}, web_port=web_port)
    follows: list[Follow] = []
    try:
        w.wait_log(r"assigned: .*page-views\[0, 1, 2, 3\]")
        sent = 0

        def send(n: int, seed: int, offset: float) -> None:
            nonlocal sent
            asyncio.run(_produce(t.bootstrap, t.page_views, _views(n, seed, offset)))
            sent += n
            _wait_worker_idle(web_port, sent)

        send(400, seed=1, offset=0)
        # Faust's layout: JSON [key, [start, end]] keys in the changelog
        follows.append(Follow(t, out, logs / "follow-1.log"))
        follows[0].wait_batch()
        _wait_equal(out, web_port, follows[0])

        send(300, seed=2, offset=50)  # new input: some windows change, new ones appear
        live = _wait_equal(out, web_port, follows[0])
        assert {start for _, start in live} == {float(BASE), float(BASE + 60)}

        follows[0].kill_all()
        send(300, seed=3, offset=55)  # written while nothing follows
        follows.append(Follow(t, out, logs / "follow-2.log"))
        follows[1].wait_batch()
        assert "resuming from its checkpoint" in follows[1].text()
        _wait_equal(out, web_port, follows[1])  # nothing lost, and one row per key and window
        # DIR can equal the live table while changelog records are left to read: an at_least_once
        # commit retried writes the same values again (seen: 30 records written twice on the Kafka
        # cluster). The count below is of the records written after this follower stopped, so it
        # must have read to the changelog's end first.
        _wait_caught_up(t, follows[1])

        assert follows[1].stop() == 0
        assert re.search(r"^stopped after .* holds \d+ rows", follows[1].text(), re.M), follows[1].text()[-3000:]
        before = _changelog_end(t)
        follows.append(Follow(t, out, logs / "follow-3.log"))
        send(200, seed=4, offset=58)
        # the bound includes this follower's Spark start (as wait_batch's does): on a loaded machine
        # starting the JVM alone can take a minute and more
        _wait_equal(out, web_port, follows[2], timeout=240.0)
        added = _changelog_end(t) - before
        assert added > 0
        deadline = time.monotonic() + 30
        while sum(n for _, n in follows[2].batches()) < added and time.monotonic() < deadline:
            time.sleep(0.3)  # the progress line comes from Spark's listener, after the batch
        # resumed from the checkpoint: exactly the records written since the clean stop were read
        assert sum(n for _, n in follows[2].batches()) == added, follows[2].text()[-3000:]
        line = next(line for line in follows[2].text().splitlines() if line.startswith("batch "))
        assert re.match(r"batch \d+: \d+ records .* in \d+\.\d\ds; lag p0=\d+ p1=\d+ p2=\d+ p3=\d+; \d+ rows in ", line)
        assert follows[2].stop() == 0
    finally:
        for f in set(follows):
            f.cleanup()
        stop_all([w])
