"""`make demo`: the dev broker, two wordcount workers with their web servers, a feed of sentences,
the status page and interactive queries (key lookups answered by either worker).

Everything it starts it stops again on exit or Ctrl-C (the broker keeps nothing on disk; worker
data lives in a temporary directory). A worker that exits on its own is noticed within a second
and its last log lines are shown before anything is removed.

    python scripts/demo.py            # runs until Ctrl-C, feeding a few sentences a second
    python scripts/demo.py --once     # stops after the queries (used by tests)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentstream.devbroker import DevBroker, DevBrokerError, free_port  # noqa: E402

LINES = [
    "The quick brown fox jumps over the lazy dog",
    "A stream processor answers from its own state",
    "Tables survive crashes because every change is written to a changelog",
    "Records are handled depth first, one record through the whole sub-topology",
    "The partition group picks the buffered record with the lowest timestamp",
    "Workers share the partitions of the consumer group and rebalance when one leaves",
]
WORD = re.compile(r"\W+")
TAIL = 25


class WorkerExited(Exception):
    """A demo worker stopped on its own (a bad setting, a crash)."""


def _stop_with_parent() -> None:
    """Linux: SIGTERM the worker when the demo process dies, even by SIGKILL (no orphans)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class DemoWorker:
    def __init__(self, name: str, tmp: Path, env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        self.log_path = tmp / f"{name}.log"
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
                str(tmp / name),
                "--web-host",
                "127.0.0.1",
                "--web-port",
                str(self.port),
                "-l",
                "info",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the demo only; it stops the workers in order
            preexec_fn=_stop_with_parent,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise WorkerExited(f"{self.name} exited with code {code}")

    def tail(self) -> str:
        lines = self.log().splitlines()[-TAIL:]
        return "\n".join(f"  | {line}" for line in lines) or "  | (empty log)"

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self._log.close()
        return code


def wait_for(what: str, predicate: Callable[[], bool], workers: list[DemoWorker], timeout: float) -> None:
    """Poll ``predicate``, checking every 0.3 s that the workers are still alive."""
    deadline = time.monotonic() + timeout
    while not predicate():
        for w in workers:
            w.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.3)


def assigned(w: DemoWorker) -> set[str]:
    lines = [line for line in w.log().splitlines() if "assigned: " in line]
    m = re.search(r"sentences\[([0-9, ]*)\]", lines[-1]) if lines else None
    return {p.strip() for p in m.group(1).split(",") if p.strip()} if m else set()


def lookup(base: str, word: str) -> dict[str, object]:
    try:
        with urllib.request.urlopen(f"{base}/tables/word_counts/{urllib.parse.quote(word, safe='')}", timeout=5) as r:
            return dict(json.loads(r.read()))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return {"error": str(exc)}


class CtrlC:
    """SIGINT as KeyboardInterrupt, except while an event loop runs a send: there it is held until
    the loop has closed (an interrupt inside ``asyncio.run`` leaves half-built loops and tracebacks)."""

    def __init__(self) -> None:
        self.held = 0
        self.pending = False
        signal.signal(signal.SIGINT, self._handler)

    def _handler(self, signum: int, frame: object) -> None:
        if self.held:
            self.pending = True
            return
        raise KeyboardInterrupt

    def run(self, coro: asyncio.Future[None] | object) -> None:
        self.held += 1
        try:
            asyncio.run(coro)  # type: ignore[arg-type]
        finally:
            self.held -= 1
        if self.pending and not self.held:
            self.pending = False
            raise KeyboardInterrupt


CTRL_C: CtrlC | None = None


def send(bootstrap: str, texts: list[str]) -> None:
    assert CTRL_C is not None
    CTRL_C.run(produce(bootstrap, texts))


async def produce(bootstrap: str, texts: list[str]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for t in texts:
            await producer.send("sentences", json.dumps({"text": t}).encode())
        await producer.flush()
    finally:
        await producer.stop()


def run(once: bool) -> int:
    rnd = random.Random(42)
    texts = [f"{rnd.choice(LINES)}; {rnd.choice(LINES).lower()}" for _ in range(3000)]
    expected: collections.Counter[str] = collections.Counter()
    for t in texts:
        expected.update(w for w in WORD.split(t.lower()) if w)

    with tempfile.TemporaryDirectory(prefix="agentstream-demo-") as tmp_name:
        tmp = Path(tmp_name)
        with DevBroker(log_path=tmp / "broker.log") as broker:
            print(f"dev broker on {broker.bootstrap} (memory only: nothing is kept on disk)", flush=True)
            env = dict(os.environ)
            env.setdefault("AGENTSTREAM_SESSION_TIMEOUT", "6")
            env.setdefault("AGENTSTREAM_HEARTBEAT_INTERVAL", "1")
            env.setdefault("AGENTSTREAM_REBALANCE_TIMEOUT", "6")
            env.update(AGENTSTREAM_BROKER=broker.url, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
            workers = [DemoWorker(f"worker{i}", tmp, env) for i in (1, 2)]
            try:
                return _session(broker, workers, texts, expected, once)
            except WorkerExited as exc:
                print(f"\ndemo: {exc}", file=sys.stderr)
                time.sleep(0.5)  # a second worker failing the same way shows the same lines: say so once
                shown: set[str] = set()
                for w in workers:
                    if w.proc.poll() is not None:
                        tail = w.tail()
                        if tail in shown:
                            print(
                                f"{w.name} exited with code {w.proc.returncode} too, with the same last lines",
                                file=sys.stderr,
                            )
                            continue
                        shown.add(tail)
                        print(f"{w.name} (exit code {w.proc.returncode}), last log lines:\n{tail}", file=sys.stderr)
                return 1
            except TimeoutError as exc:
                print(f"\ndemo: {exc}; the workers' last log lines:", file=sys.stderr)
                for w in workers:
                    print(f"{w.name}:\n{w.tail()}", file=sys.stderr)
                return 1
            except KeyboardInterrupt:
                print("\nCtrl-C: stopping the workers ...", flush=True)
                return 0
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
                codes = [w.stop() for w in workers]
                print(f"workers stopped (exit codes {codes}); stopping the dev broker", flush=True)


def _session(
    broker: DevBroker, workers: list[DemoWorker], texts: list[str], expected: collections.Counter[str], once: bool
) -> int:
    print("started 2 wordcount workers; waiting for them to join and share the partitions ...", flush=True)
    wait_for("the web servers", lambda: all("listening on http" in w.log() for w in workers), workers, 90)
    wait_for(
        "the partition assignment",
        lambda: all(assigned(w) for w in workers) and not assigned(workers[0]) & assigned(workers[1]),
        workers,
        90,
    )
    for w in workers:
        print(f"  {w.name}: partitions {sorted(assigned(w))} of 'sentences', web server {w.url}", flush=True)
    print(f"feeding {len(texts)} sentences to topic 'sentences' ...", flush=True)
    send(broker.bootstrap, texts)
    top = [w for w, _ in sorted(expected.items(), key=lambda kv: (-kv[1], kv[0]))[:8]]
    wait_for(
        "the counts", lambda: all(lookup(workers[0].url, w).get("value") == expected[w] for w in top), workers, 120
    )
    print("\nstatus pages (live plots of throughput, lag, restore and table sizes):")
    for w in workers:
        print(f"  {w.url}/status.html")
    print("\ninteractive queries: the same key asked at either worker; the owner answers")
    for i, word in enumerate(top[:6]):
        w = workers[i % 2]
        answer = lookup(w.url, word)
        print(
            f"  curl {w.url}/tables/word_counts/{word}\n      -> value={answer.get('value')} "
            f"served_by={answer.get('served_by')}  (direct count of the input: {expected[word]})"
        )
    print(f"\nmore: {workers[0].url}/metadata (who owns which partition), {workers[0].url}/metrics (Prometheus)")
    if once:
        return 0
    print("\nthe workers keep running and a few sentences a second keep coming; press Ctrl-C to stop", flush=True)
    rnd = random.Random(7)
    while True:
        send(broker.bootstrap, [f"{rnd.choice(LINES)}" for _ in range(5)])
        for _ in range(10):
            for w in workers:
                w.check()
            time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--once", action="store_true", help="stop after the queries instead of waiting for Ctrl-C")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]  # in order with stderr
    global CTRL_C
    CTRL_C = CtrlC()
    try:
        return run(args.once)
    except DevBrokerError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C before the workers started, or during the clean-up
        print("\nstopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
