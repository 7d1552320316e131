"""Soak: 3 wordcount workers on the real broker under kill -9, SIGTERM and broker-traffic faults.

``make soak`` (or ``python -m tests.soak.soak``). Every worker and the feeder reach the tansu dev
broker through the fault proxy (tests/support/fault_proxy.py). For ``SOAK_SECONDS`` (600) a
seeded chaos loop picks, every 4-12 s, one of: kill -9 a worker (restarted at once on the same
data dir), SIGTERM a worker (restarted once it exited; a worker that does not exit within 60 s
is a finding and is killed), hold all broker traffic for 2-10 s, hold it and cut every
connection, or (less often) freeze it for 42-50 s, longer than the producer's request timeout,
so deliveries fail. A worker that exits on its own is a finding and is restarted. Meanwhile
``SOAK_SENTENCES`` (200,000) sentences are fed through the proxy.

Then the chaos stops, the workers drain (group lag 0 on both input topics), and the output is
checked against the truth taken from what the ``sentences`` topic really holds (a feeder chunk
retried after a fault may land twice): every word's final count >= its true count (0 words
lost), and the duplicate share is reported. Figures go to stdout and to
``artifacts/soak/<run>/report.json``; worker logs to the same directory. Exit code 0 only when
nothing was lost.

Environment: SOAK_SECONDS, SOAK_SENTENCES, SOAK_SEED, SOAK_DRAIN_TIMEOUT (900 s), SOAK_FREEZE_WEIGHT (1).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped,unused-ignore]

from agentstream.transport.base import TP
from agentstream.transport.kafka import KafkaTransport
from tests.integration.cluster import ROOT, Worker, sentences, true_counts
from tests.support.fault_proxy import ThreadedFaultProxy, proxied_dev_broker

SECONDS = float(os.environ.get("SOAK_SECONDS", "600"))
SENTENCES = int(os.environ.get("SOAK_SENTENCES", "200000"))
SEED = int(os.environ.get("SOAK_SEED", "2026"))
DRAIN_TIMEOUT = float(os.environ.get("SOAK_DRAIN_TIMEOUT", "900"))
FREEZE = float(os.environ.get("SOAK_FREEZE_WEIGHT", "1"))  # 0: no 42-50 s broker freezes
INPUTS = ("sentences", "wordcount-words")
PARTITIONS = 4  # apps/wordcount.py: topic_partitions=4
FINDING = re.compile(r"ERROR|CRITICAL|Traceback")


def say(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- feeding ------------------------------------------------------------------------------------


class Feeder(threading.Thread):
    """Feeds the sentences in chunks spread over ``seconds``; a chunk that fails is sent again."""

    def __init__(self, bootstrap: str, texts: list[str], seconds: float, chunk: int = 2000) -> None:
        super().__init__(name="soak-feeder", daemon=True)
        self.bootstrap, self.texts, self.seconds, self.chunk = bootstrap, texts, seconds, chunk
        self.sent = 0
        self.retries = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._feed())
        except BaseException as exc:
            self.error = exc

    async def _feed(self) -> None:
        began = time.monotonic()
        chunks = range(0, len(self.texts), self.chunk)
        for n, i in enumerate(chunks):
            values = [orjson.dumps({"text": t}) for t in self.texts[i : i + self.chunk]]
            while True:
                producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=20, request_timeout_ms=15000)
                try:
                    await producer.start()
                    for v in values:
                        await producer.send("sentences", v)
                    await producer.flush()
                    break
                except Exception as exc:
                    self.retries += 1
                    say(f"feeder: chunk {n} failed ({type(exc).__name__}: {exc}); sending it again")
                    await asyncio.sleep(1.0)
                finally:
                    try:
                        await asyncio.wait_for(producer.stop(), 20)
                    except Exception:
                        pass
            self.sent = i + len(values)
            due = began + self.seconds * (n + 1) / len(chunks)
            await asyncio.sleep(max(0.0, due - time.monotonic()))


# -- reading ------------------------------------------------------------------------------------


async def _ends(transport: KafkaTransport, topics: tuple[str, ...]) -> dict[TP, int]:
    """Fetch high watermark of every partition (ListOffsets is wrong on tansu: read a fetch's)."""
    consumer = transport.consumer(group_id=None, auto_offset_reset="latest")
    await consumer.start()
    try:
        tps = [TP(t, p) for t in topics for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends: dict[TP, int] = {}
        deadline = time.monotonic() + 60
        while len(ends) < len(tps) and time.monotonic() < deadline:
            await consumer.getmany(timeout_ms=500, max_records=1)
            for tp in tps:
                hw = consumer.highwater(tp)
                if hw is not None:
                    ends[tp] = hw
        return ends
    finally:
        await consumer.stop()


async def _lag(transport: KafkaTransport) -> int:
    ends = await _ends(transport, INPUTS)
    consumer = transport.consumer(group_id="wordcount")
    await consumer.start()
    try:
        lag = 0
        for tp, end in ends.items():
            committed = await consumer.committed(tp)
            if committed is None and end > 0:
                return -1  # not known (the group is rebalancing): not drained
            lag += max(0, end - (committed or 0))
        return lag if len(ends) == PARTITIONS * len(INPUTS) else -1  # an unknown end: not drained
    finally:
        await consumer.stop()


async def _read(transport: KafkaTransport, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic``, read until each partition's position reaches its fetch high watermark."""
    consumer = transport.consumer(group_id=None, auto_offset_reset="earliest", max_poll_records=10000)
    await consumer.start()
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        tps = [TP(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        remaining = set(tps)
        while remaining:
            batches = await consumer.getmany(*remaining, timeout_ms=1000, max_records=10000)
            for records in batches.values():
                out.extend((m.key, m.value) for m in records)
            for tp in list(remaining):
                hw = consumer.highwater(tp)
                if hw is not None and await consumer.position(tp) >= hw:
                    remaining.discard(tp)
        return out
    finally:
        await consumer.stop()


# -- chaos --------------------------------------------------------------------------------------


class Chaos:
    def __init__(self, url: str, proxy: ThreadedFaultProxy, run_dir: Path, rnd: random.Random) -> None:
        self.url, self.proxy, self.run_dir, self.rnd = url, proxy, run_dir, rnd
        self.workers: dict[str, Worker] = {}
        self.everyone: list[Worker] = []
        self.actions: collections.Counter[str] = collections.Counter()
        self.incarnation = collections.Counter[str]()
        self.findings: list[str] = []
        self.sigterm_seconds: list[float] = []

    def spawn(self, name: str) -> None:
        self.incarnation[name] += 1
        w = Worker(f"{name}-{self.incarnation[name]}", self.url, self.run_dir / "data" / name, self.run_dir / "logs")
        self.workers[name] = w
        self.everyone.append(w)

    def step(self) -> None:
        action = self.rnd.choices(["kill9", "sigterm", "pause", "pause+cut", "freeze"], weights=[3, 3, 2, 1, FREEZE])[0]
        name = self.rnd.choice(sorted(self.workers))
        w = self.workers[name]
        self.actions[action] += 1
        if action == "kill9":
            say(f"kill -9 {w.name}")
            w.kill()
            self.spawn(name)
        elif action == "sigterm":
            say(f"SIGTERM {w.name}")
            began = time.monotonic()
            try:
                code = w.terminate(timeout=60)
            except Exception:  # subprocess.TimeoutExpired
                self.findings.append(f"{w.name} did not exit within 60 s of SIGTERM (killed)")
                say(self.findings[-1])
                w.stop_quietly()
                code = None
            took = time.monotonic() - began
            self.sigterm_seconds.append(took)
            if code not in (0, None):
                self.findings.append(f"{w.name} exited with {code} after SIGTERM")
                say(self.findings[-1])
            self.spawn(name)
        else:
            # A freeze outlasts the producer's request timeout (aiokafka's 40 s): batches fail, and
            # a worker must stop without committing past them (issue 13 defect 1).
            hold = self.rnd.uniform(42.0, 50.0) if action == "freeze" else self.rnd.uniform(2.0, 10.0)
            say(f"{action} broker traffic for {hold:.1f}s")
            self.proxy.pause()
            try:
                time.sleep(hold)
                if action == "pause+cut":
                    self.proxy.cut()
            finally:
                self.proxy.resume()
        self.revive()

    def revive(self) -> None:
        """A worker that died on its own is a finding: restart it (on the same data dir)."""
        for n, other in list(self.workers.items()):
            if other.proc.poll() is not None:
                self.findings.append(f"{other.name} exited on its own with {other.proc.returncode}")
                say(self.findings[-1] + "; restarting it")
                other.stop_quietly()
                self.spawn(n)


def log_findings(run_dir: Path) -> dict[str, int]:
    """Counts of ERROR/CRITICAL/Traceback lines in the worker logs, by message shape."""
    shapes: collections.Counter[str] = collections.Counter()
    for path in sorted((run_dir / "logs").glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if FINDING.search(line):
                shape = re.sub(r"\d+", "N", line.split(" - ", 1)[-1])[:160]
                shapes[shape] += 1
    return dict(shapes.most_common(15))


def main() -> int:
    run_dir = ROOT / "artifacts" / "soak" / time.strftime("%Y%m%d-%H%M%S")
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    rnd = random.Random(SEED)
    texts = sentences(SENTENCES, seed=SEED)
    say(f"run {run_dir}: {SENTENCES} sentences, {SECONDS:.0f}s of chaos, seed {SEED}")
    with proxied_dev_broker(run_dir / "logs" / "broker.log", seed=SEED) as (broker, proxy):
        chaos = Chaos(broker.url, proxy, run_dir, rnd)
        try:
            for name in ("w1", "w2", "w3"):
                chaos.spawn(name)
            for w in chaos.workers.values():
                w.wait_log(r"assigned: .*sentences\[", timeout=120)
            feeder = Feeder(broker.bootstrap, texts, seconds=SECONDS * 0.8)
            feeder.start()
            began = time.monotonic()
            while time.monotonic() - began < SECONDS:
                time.sleep(rnd.uniform(4.0, 12.0))
                chaos.step()
            say(f"chaos over: {dict(chaos.actions)}; waiting for the feeder ({feeder.sent}/{len(texts)} sent)")
            proxy.resume()
            feeder.join(DRAIN_TIMEOUT)
            if feeder.is_alive() or feeder.error is not None:
                raise SystemExit(f"feeder did not finish: {feeder.error!r}")
            transport = KafkaTransport(broker.url)
            drained_at = time.monotonic()
            lag = -1
            while time.monotonic() - drained_at < DRAIN_TIMEOUT:
                chaos.revive()
                lag = asyncio.run(_lag(transport))
                say(f"draining: lag {lag if lag >= 0 else 'unknown'} records")
                if lag == 0:
                    time.sleep(3)
                    chaos.revive()
                    if asyncio.run(_lag(transport)) == 0 and all(w.proc.poll() is None for w in chaos.workers.values()):
                        break
                time.sleep(5)
            drain_seconds = time.monotonic() - drained_at
            fed = [orjson.loads(v)["text"] for _, v in asyncio.run(_read(transport, "sentences")) if v]
            truth = true_counts(fed)
            got: dict[str, int] = {}
            for k, v in asyncio.run(_read(transport, "word-counts")):
                if k is not None and v is not None:
                    got[k.decode()] = int(v)
            lost = {w: (got.get(w, 0), n) for w, n in truth.items() if got.get(w, 0) < n}
            extra = sorted(set(got) - set(truth))
            total = sum(truth.values())
            duplicates = sum(max(0, got.get(w, 0) - n) for w, n in truth.items())
            exits = {}
            for w in chaos.workers.values():
                exits[w.name] = w.terminate(timeout=60)
            report: dict[str, Any] = {
                "seconds": SECONDS,
                "seed": SEED,
                "sentences_planned": len(texts),
                "sentences_in_topic": len(fed),
                "feeder_retries": feeder.retries,
                "word_records": total,
                "words": len(truth),
                "words_lost": len(lost),
                "lost_examples": dict(list(lost.items())[:10]),
                "unexpected_words": extra[:10],
                "duplicated_effects": duplicates,
                "duplicate_share": duplicates / max(1, total),
                "actions": dict(chaos.actions),
                "worker_incarnations": sum(chaos.incarnation.values()),
                "sigterm_exit_seconds_max": max(chaos.sigterm_seconds, default=0.0),
                "lag_at_end": lag,
                "drain_seconds": round(drain_seconds, 1),
                "final_exit_codes": exits,
                "findings": chaos.findings,
                "log_findings": log_findings(run_dir),
            }
            (run_dir / "report.json").write_text(json.dumps(report, indent=2))
            say("report:\n" + json.dumps(report, indent=2))
            ok = not lost and not extra and lag == 0
            say(
                f"{'PASS' if ok else 'FAIL'}: {len(lost)} of {len(truth)} words lost, "
                f"{100.0 * duplicates / max(1, total):.2f}% duplicated effects ({duplicates} of {total} word records)"
            )
            return 0 if ok else 1
        finally:
            proxy.resume()
            for w in chaos.everyone:
                w.stop_quietly()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleanup of workers and broker on SIGTERM
    sys.exit(main())
