"""`make demo` (scripts/demo.py): status URLs and key lookups answered by either worker, a clean stop
on Ctrl-C, and a worker that exits at once (a bad setting) shown with its own error."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

from .cluster import ROOT

DEMO = [sys.executable, str(ROOT / "scripts" / "demo.py")]


def test_demo_shows_status_pages_and_queries_and_stops_cleanly_on_ctrl_c() -> None:
    proc = subprocess.Popen(DEMO, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "press Ctrl-C" in line:
                ready.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        assert ready.wait(240), "".join(lines)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(90) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    t.join(10)
    out = "".join(lines)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert len(re.findall(r"http://127\.0\.0\.1:\d+/status\.html", out)) == 2, out
    answers = re.findall(r"value=(\d+) served_by=(\S+)\s+\(direct count of the input: (\d+)\)", out)
    assert len(answers) == 6 and all(v == e for v, _, e in answers), out
    assert len({s for _, s, _ in answers}) == 2, f"both workers should answer some keys: {out}"
    assert "workers stopped (exit codes [0, 0])" in out, out


def test_demo_shows_the_error_of_a_worker_that_exits_at_once() -> None:
    env = dict(os.environ, AGENTSTREAM_COMMIT_INTERVAL="0")
    started = time.monotonic()
    r = subprocess.run(DEMO + ["--once"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r
    assert "exited with code 2" in r.stderr, r.stderr
    assert "setting 'commit_interval'" in r.stderr and "AGENTSTREAM_COMMIT_INTERVAL" in r.stderr, r.stderr
    assert "timed out" not in r.stderr + r.stdout
    print(f"demo reported the failed worker after {time.monotonic() - started:.1f}s")


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def _gone(pid: int) -> bool:
    try:
        return "zombie" in open(f"/proc/{pid}/status").read()
    except OSError:
        return True


def test_killing_the_demo_leaves_no_worker_or_broker_behind() -> None:
    if not os.path.exists("/proc/self/task"):
        import pytest

        pytest.skip("needs Linux /proc")
    proc = subprocess.Popen(DEMO, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "press Ctrl-C" in line:
                break
        kids = _children(proc.pid)
        assert len(kids) >= 3, kids  # the broker and two workers
    finally:
        proc.kill()  # no clean-up code runs
        proc.wait(10)
    deadline = time.monotonic() + 60
    while not all(_gone(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = [k for k in kids if not _gone(k)]
    for k in alive:
        os.kill(k, signal.SIGKILL)
    assert not alive, f"left running after the demo was killed: {alive}"
