"""`make demo`: the dev broker, two wordcount workers, a feed of sentences, the top words.

Everything it starts it stops again (the broker keeps nothing on disk; worker data lives in a
temporary directory that is removed at the end).
"""

from __future__ import annotations

import collections
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentstream.devbroker import DevBroker  # noqa: E402
from tests.integration.cluster import feed, final_counts  # noqa: E402

LINES = [
    "The quick brown fox jumps over the lazy dog",
    "A stream processor answers from its own state",
    "Tables survive crashes because every change is written to a changelog",
    "Records are handled depth first, one record through the whole sub-topology",
    "The partition group picks the buffered record with the lowest timestamp",
    "Workers share the partitions of the consumer group and rebalance when one leaves",
]


def main() -> int:
    rnd = random.Random(42)
    texts = [f"{rnd.choice(LINES)}; {rnd.choice(LINES).lower()}" for _ in range(5000)]
    expected: collections.Counter[str] = collections.Counter()
    for t in texts:
        expected.update(w for w in re.split(r"\W+", t.lower()) if w)

    with tempfile.TemporaryDirectory(prefix="agentstream-demo-") as tmp, DevBroker(log_path=Path(tmp) / "broker.log") as broker:
        print(f"dev broker on {broker.bootstrap} (memory only: nothing is kept on disk)")
        env = dict(os.environ, AGENTSTREAM_BROKER=broker.url, AGENTSTREAM_SESSION_TIMEOUT="6",
                   AGENTSTREAM_HEARTBEAT_INTERVAL="1", AGENTSTREAM_REBALANCE_TIMEOUT="6",
                   PYTHONPATH=str(ROOT))
        workers = []
        logs = []
        for i in (1, 2):
            log = open(Path(tmp) / f"worker{i}.log", "wb")
            logs.append(log)
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "agentstream", "-A", "apps.wordcount", "worker",
                 "--data-dir", str(Path(tmp) / f"worker{i}"), "--without-web"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        try:
            print("started 2 wordcount workers; waiting for the partition assignment ...")
            _wait(lambda: _split_between(Path(tmp) / "worker1.log", Path(tmp) / "worker2.log"), 60)
            for i in (1, 2):
                print(f"  worker{i} {_assigned(Path(tmp) / f'worker{i}.log')}")
            print(f"feeding {len(texts)} sentences to topic 'sentences' ...")
            feed(broker.bootstrap, texts)
            counts: dict[str, int] = {}

            def done() -> bool:
                nonlocal counts
                counts = final_counts(broker.bootstrap)
                return counts == dict(expected)

            _wait(done, 120)
            print("top words (from topic 'word-counts'; equal to a direct count of the input):")
            for word, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]:
                print(f"  {word:<12} {n}")
        finally:
            for p in workers:
                p.send_signal(signal.SIGTERM)
            for p in workers:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
            for log in logs:
                log.close()
            print("workers stopped; stopping the dev broker")
    return 0


def _assigned(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if "assigned: " in line]
    return lines[-1].split("agentstream.worker: ", 1)[-1] if lines else ""


def _split_between(a: Path, b: Path) -> bool:
    """Both workers hold a share of the partitions (the rebalance after the second join is over)."""
    pa, pb = (re.search(r"sentences\[([0-9, ]*)\]", _assigned(x)) for x in (a, b))
    return bool(pa and pb and pa.group(1) and pb.group(1) and not set(pa.group(1).split(", ")) & set(pb.group(1).split(", ")))


def _wait(predicate, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("demo: timed out; see the worker logs above")
        time.sleep(0.5)


if __name__ == "__main__":
    raise SystemExit(main())
