"""Shared bits of the benchmark: data generation, fast topic load/read, process stats, the
result-line protocol between the orchestrator (:mod:`bench.run`) and the measured subprocesses.

Nothing here is measured: loading input and reading output back happen before/after the timed
interval, in the orchestrator process.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

RESULT_PREFIX = "BENCH_RESULT "
EVENT_PREFIX = "BENCH_EVENT "  # started / assigned / progress lines of a process the orchestrator drives
WORD = re.compile(r"\W+")  # the same split apps/wordcount.py uses
PARTITIONS = 4

# Short group timeouts: a new group's join on the dev broker takes about half the session timeout.
GROUP_ENV = {
    "AGENTSTREAM_SESSION_TIMEOUT": "6",
    "AGENTSTREAM_HEARTBEAT_INTERVAL": "1",
    "AGENTSTREAM_REBALANCE_TIMEOUT": "6",
}
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
REBALANCE_TIMEOUT_MS = 6000
COMMIT_INTERVAL = 1.0  # agentstream's default commit_interval; the raw loops commit on the same cadence
MAX_POLL_RECORDS = 1000  # agentstream's default max_poll_records; the raw loops poll the same


# -- data ------------------------------------------------------------------------------------------


def passthrough_records(n: int, value_size: int = 100, seed: int = 1) -> list[tuple[bytes, bytes]]:
    """``n`` (8-byte key, ``value_size``-byte value) pairs."""
    rnd = random.Random(seed)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
    block = bytes(rnd.choice(alphabet) for _ in range(value_size + 4096))
    out = []
    for i in range(n):
        off = (i * 7919) % 4096
        value = b"%010d" % i + block[off : off + value_size - 10]
        out.append((b"k%07d" % (i % 10_000_000), value))
    return out


def vocabulary(size: int = 1000, seed: int = 3) -> list[str]:
    rnd = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rnd.choice(letters) for _ in range(rnd.randint(3, 9))))
    return sorted(words)


def sentences(n: int, seed: int = 5, words_per_sentence: int = 10) -> list[str]:
    """~10 words each from a ~1000-word vocabulary; mixed case and punctuation like real text."""
    rnd = random.Random(seed)
    vocab = vocabulary()
    weights = [1.0 / (i + 1) ** 0.8 for i in range(len(vocab))]  # mildly Zipfian, like text
    out = []
    for _ in range(n):
        k = rnd.randint(words_per_sentence - 2, words_per_sentence + 2)
        ws = rnd.choices(vocab, weights=weights, k=k)
        if rnd.random() < 0.3:
            ws[0] = ws[0].capitalize()
        out.append(" ".join(ws) + rnd.choice([".", "!", "?", ""]))
    return out


def count_words(texts: Iterable[str]) -> dict[str, int]:
    c: collections.Counter[str] = collections.Counter()
    for t in texts:
        c.update(w for w in WORD.split(t.lower()) if w)
    return dict(c)


def changelog_records(n: int) -> list[tuple[bytes, bytes]]:
    """``n`` distinct 16-byte keys (uniformly spread) with small JSON int values."""
    out = []
    for i in range(n):
        key = hashlib.blake2b(i.to_bytes(8, "little"), digest_size=16).digest()
        out.append((key, b"%d" % (i % 100_000)))
    return out


def checksum(records: Iterable[tuple[bytes | None, bytes | None]]) -> tuple[int, int]:
    """(count, order-independent checksum of key+value)."""
    n = 0
    total = 0
    for k, v in records:
        n += 1
        total += zlib.crc32(v or b"", zlib.crc32(k or b""))
    return n, total & 0xFFFFFFFFFFFF


# -- broker helpers (orchestrator side, not timed) ------------------------------------------------


def replication_factor() -> int:
    """Of the topics the bench creates (BENCH_REPLICATION_FACTOR, set by bench.run from the broker kind:
    1 on the dev broker, 3 on the Kafka cluster)."""
    return int(os.environ.get("BENCH_REPLICATION_FACTOR", "1") or 1)


async def create_topics(
    bootstrap: str, names: Iterable[str], partitions: int = PARTITIONS, compacted: Iterable[str] = ()
) -> None:
    compacted = set(compacted)
    replication = replication_factor()
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    name,
                    partitions,
                    replication,
                    topic_configs={"cleanup.policy": "compact"} if name in compacted else {},
                )
                for name in names
            ]
        )
    finally:
        await admin.close()


async def load_topic(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes]],
    partitioner: Callable[[bytes | None, int], int] | None = None,
    partitions: int = PARTITIONS,
) -> None:
    """Append ``records`` fast: hand-built batches per partition (the default partitioner
    on the key, as a producer.send() would choose, unless ``partitioner`` is given)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=50,
        max_batch_size=512 * 1024,
        max_request_size=4 * 1024 * 1024,
    )
    await producer.start()
    try:
        await producer.partitions_for(topic)
        if partitioner is None:
            parts = list(range(partitions))

            def partitioner(key: bytes | None, n: int) -> int:
                return producer._partitioner(key, parts, parts)

        by_part: dict[int, list[tuple[bytes | None, bytes]]] = collections.defaultdict(list)
        for key, value in records:
            by_part[partitioner(key, partitions)].append((key, value))
        # All batches are built before the first is sent (building is most of the loader's CPU, and
        # the scale cases' workers are already waiting for the input), then sent round-robin over
        # the partitions (not one partition after the other), so consumers that read while the
        # load is still running find every partition filling at the same pace.
        per_part = [(p, list(_batches(producer, recs))) for p, recs in by_part.items()]
        futures = []
        for i in range(max((len(batches) for _, batches in per_part), default=0)):
            for p, batches in per_part:
                if i < len(batches):
                    futures.append(await producer.send_batch(batches[i], topic, partition=p))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def _batches(producer: AIOKafkaProducer, records: list[tuple[bytes | None, bytes]]) -> Iterator[Any]:
    """``records`` packed into the producer's full-size batches, one at a time."""
    batch = producer.create_batch()
    for key, value in records:
        if batch.append(key=key, value=value, timestamp=None) is None:
            yield batch
            batch = producer.create_batch()
            batch.append(key=key, value=value, timestamp=None)
    yield batch


async def load_sentences(bootstrap: str, texts: list[str], partitions: int = PARTITIONS) -> None:
    """Word-count input: JSON ``{"text": ...}`` values without keys, round-robin over the
    partitions (sentence i to partition i % partitions), so every partition gets the same share."""
    counter = iter(range(1 << 62))
    await load_topic(
        bootstrap,
        "sentences",
        [(None, orjson.dumps({"text": t})) for t in texts],
        partitioner=lambda key, parts: next(counter) % parts,
        partitions=partitions,
    )


async def partition_counts(bootstrap: str, topics: Iterable[str]) -> dict[str, int | None]:
    """The partition count of each topic (None: the topic does not exist), from the metadata."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()  # refreshes the metadata of every topic
        out: dict[str, int | None] = {}
        for topic in topics:
            found = consumer.partitions_for_topic(topic)
            out[topic] = len(found) if found else None
        return out
    finally:
        await consumer.stop()


async def read_topic(
    bootstrap: str, topic: str, partitions: int = PARTITIONS, on_batch: Callable[[list[Any]], None] | None = None
) -> int:
    """Read a whole topic (until fetches come back empty: ListOffsets(latest) is wrong on the
    dev broker). Calls ``on_batch(messages)`` per fetched batch; returns the record count."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
        fetch_max_bytes=16 * 1024 * 1024,
    )
    await consumer.start()
    n = 0
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        empty = 0
        while empty < 3:
            batches = await consumer.getmany(timeout_ms=300, max_records=50_000)
            if not batches:
                empty += 1
                continue
            empty = 0
            for messages in batches.values():
                n += len(messages)
                if on_batch is not None:
                    on_batch(messages)
    finally:
        await consumer.stop()
    return n


async def read_checksum(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> tuple[int, int]:
    """(count, order-independent checksum) of a whole topic, to compare with the input's."""
    state = {"n": 0, "sum": 0}

    def on_batch(messages: list[Any]) -> None:
        n, s = checksum((m.key, m.value) for m in messages)
        state["n"] += n
        state["sum"] = (state["sum"] + s) & 0xFFFFFFFFFFFF

    await read_topic(bootstrap, topic, partitions=partitions, on_batch=on_batch)
    return state["n"], state["sum"]


async def final_counts(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[str, int]:
    """The last value per key of a word-count output topic (key: word, value: int)."""
    out: dict[str, int] = {}

    def on_batch(messages: list[Any]) -> None:
        for m in messages:
            out[m.key.decode()] = int(m.value)

    await read_topic(bootstrap, topic, partitions=partitions, on_batch=on_batch)
    return out


# -- process stats (measured subprocess side) ------------------------------------------------------


def peak_rss_mb(pid: int | str = "self") -> float:
    """VmHWM (peak resident set size) of a process, in MB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def rss_mb(pid: int | str = "self", exact: bool = True) -> float | None:
    """Current resident set size of a process in MB; None once it has exited.

    ``exact``: ``Rss`` of /proc/PID/smaps_rollup (a page-table walk, ~1 ms for 100 MB).
    Otherwise ``VmRSS`` of /proc/PID/status, which since Linux 6.2 reads per-CPU counters
    without summing them (off by at most a few hundred KB on 2 cores)."""
    path, field = (f"/proc/{pid}/smaps_rollup", "Rss:") if exact else (f"/proc/{pid}/status", "VmRSS:")
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, total) CPU-seconds of the whole machine since boot, all cores (/proc/stat), so
    the share of the cores other processes (the broker, other people's runs) took is visible."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return (total - idle) / ticks, total / ticks


def machine_sample(broker_pid: int | Sequence[int] | None) -> dict[str, Any]:
    """For a :class:`Sampler`: the broker's CPU-seconds and the whole machine's busy CPU-seconds."""
    return {"broker_cpu_s": proc_cpu_seconds(broker_pid), "machine_busy_s": machine_cpu_seconds()[0]}


def cpu_seconds() -> float:
    """User + system CPU of this process, all threads (RocksDB's background threads too)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def io_counts() -> dict[str, int]:
    """This process's read/write system calls and bytes so far (/proc/self/io; empty elsewhere):
    how many requests a side makes of the broker, beside how much CPU it spends."""
    try:
        with open("/proc/self/io") as f:
            fields = dict(line.split(": ") for line in f.read().splitlines())
    except OSError:
        return {}
    return {name: int(fields[name]) for name in ("syscr", "syscw", "rchar", "wchar") if name in fields}


def proc_cpu_seconds(pid: int | Sequence[int] | None) -> float | None:
    """User + system CPU of another process (the broker), from /proc/<pid>/stat; of several processes
    summed (the Kafka cluster's nodes)."""
    pids = [pid] if isinstance(pid, int) else list(pid or [])
    pids = [p for p in pids if p]
    if not pids:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def broker_pids_from_env() -> list[int]:
    """BENCH_BROKER_PID: the broker's pid, or the cluster nodes' pids comma-separated."""
    return [int(p) for p in os.environ.get("BENCH_BROKER_PID", "").split(",") if p.strip() and int(p) > 0]


STEADY_SPAN = (0.2, 0.8)  # the share of the work between which the steady rate is measured
TIMELINE_EVERY = 0.25  # seconds between two samples of a side's timeline


def steady_rate(timeline: list[tuple[float, float]], total: float) -> float | None:
    """Work/s between the moments 20 % and 80 % of ``total`` was done (linear between the
    timeline's samples of (seconds, work done: records, or records weighted by their cost)): the rate once the start (first fetches, caches
    and the JIT warming) is behind and before the tail (the last partitions draining, the final
    commit), which the whole-run rate includes. None when the timeline does not cover the span."""
    lo, hi = (total * f for f in STEADY_SPAN)

    def crossing(x: float) -> float | None:
        for (t0, n0), (t1, n1) in zip(timeline, timeline[1:], strict=False):
            if n0 < x <= n1:
                return t0 + (x - n0) / (n1 - n0) * (t1 - t0)
        return None

    t_lo, t_hi = crossing(lo), crossing(hi)
    if t_lo is None or t_hi is None or t_hi <= t_lo:
        return None
    return (hi - lo) / (t_hi - t_lo)


class Meter:
    """Times one measured interval: wall time, this process's CPU and the broker's CPU, and a
    timeline of the records handled (:meth:`mark`) for the steady rate."""

    def __init__(self) -> None:
        self.broker_pid = broker_pids_from_env()
        self.t0: float | None = None
        self.cpu0 = 0.0
        self.bcpu0: float | None = None
        self.mono0 = 0.0
        self.timeline: list[tuple[float, float]] = [(0.0, 0)]
        self.next_mark = 0.0
        self.io0: dict[str, int] = {}
        self.sys0 = 0.0

    def mark(self, handled: float) -> None:
        """Samples (seconds since the start, ``handled``) at most every :data:`TIMELINE_EVERY` s."""
        if self.t0 is not None:
            now = time.perf_counter() - self.t0
            if now >= self.next_mark:
                self.timeline.append((round(now, 3), handled))
                self.next_mark = now + TIMELINE_EVERY

    def start(self) -> None:
        if self.t0 is None:
            self.t0 = time.perf_counter()
            self.mono0 = time.monotonic()  # CLOCK_MONOTONIC is system-wide: comparable across processes
            self.cpu0 = cpu_seconds()
            self.bcpu0 = proc_cpu_seconds(self.broker_pid)
            self.io0 = io_counts()
            self.sys0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime

    def stop(self, records: int, **extra: Any) -> dict[str, Any]:
        assert self.t0 is not None
        elapsed = time.perf_counter() - self.t0
        cpu = cpu_seconds() - self.cpu0
        b1 = proc_cpu_seconds(self.broker_pid)
        out: dict[str, Any] = {
            "records": records,
            "seconds": elapsed,
            "records_per_s": records / elapsed if elapsed > 0 else 0.0,
            "cpu_s": cpu,
            "broker_cpu_s": None if b1 is None or self.bcpu0 is None else b1 - self.bcpu0,
            "t0_monotonic": self.mono0,
            "t_end_monotonic": time.monotonic(),
            "timeline": self.timeline,
            "cpu_sys_s": resource.getrusage(resource.RUSAGE_SELF).ru_stime - self.sys0,  # of cpu_s: the kernel's
            "io": {name: n - self.io0[name] for name, n in io_counts().items() if name in self.io0},
        }
        out.update(extra)
        return out


def report(result: dict[str, Any]) -> None:
    """The one line the orchestrator parses (peak RSS read last, at the very end of the work)."""
    result.setdefault("peak_rss_mb", peak_rss_mb())
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


def announce(kind: str, **data: Any) -> None:
    """One event line for an orchestrator that drives this process while it runs (see :class:`Spawned`).
    Carries the pid (under py-spy the orchestrator's child is py-spy, not this process)."""
    event = {"kind": kind, "pid": os.getpid(), "t": time.monotonic(), **data}
    sys.stdout.write(EVENT_PREFIX + json.dumps(event) + "\n")
    sys.stdout.flush()


def parse_result(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            parsed: dict[str, Any] = json.loads(line[len(RESULT_PREFIX) :])
            return parsed
    return None


def consumer_group_kwargs() -> dict[str, Any]:
    return {
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
        "max_poll_interval_ms": 300_000,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }


# -- driving long-running subprocesses (orchestrator side) -----------------------------------------


class Spawned:
    """A measured subprocess the orchestrator keeps running while it does other things (feeds it,
    samples its memory, waits for its group assignment). A thread reads its stdout so the pipe never
    fills, and keeps the latest :func:`announce` events; :meth:`wait` returns its result line."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], logs: Path) -> None:
        self.name = name
        self.popen = popen
        self.logs = logs
        self.pid = popen.pid  # replaced by the pid the process announces
        self.events: list[dict[str, Any]] = []
        self.progress = 0
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self._lines.append(line)
            if not line.startswith(EVENT_PREFIX):
                continue
            event = json.loads(line[len(EVENT_PREFIX) :])
            with self._changed:
                self.pid = event.get("pid", self.pid)
                if event["kind"] == "progress":
                    self.progress = event["processed"]
                else:
                    self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def last(self, *kinds: str) -> dict[str, Any] | None:
        """The latest event of one of ``kinds`` (not progress), or None."""
        return next((e for e in reversed(self.events) if e["kind"] in kinds), None)

    def wait_for(self, kind: str, timeout: float) -> dict[str, Any]:
        """Block until the process announced ``kind``; fail with its stderr if it exits first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while (event := self.last(kind)) is None:
                left = deadline - time.monotonic()
                if left <= 0 or (not self.running and not self._reader.is_alive()):
                    raise RuntimeError(f"{self.name}: no {kind!r} event within {timeout:.0f}s{self._stderr_tail()}")
                self._changed.wait(min(left, 0.5))
        return event

    def signal(self, sig: int = signal.SIGUSR1) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float) -> dict[str, Any]:
        """Wait for the exit; its result line (raises with the stderr tail if there is none)."""
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(
                f"{self.name}: still running after {timeout:.0f}s, killed{self._stderr_tail()}"
            ) from None
        self._reader.join(10)
        stdout = "\n".join(self._lines)
        (self.logs / f"{self.name}.stdout.log").write_text(stdout + "\n")
        result = parse_result(stdout)
        if code != 0 or result is None:
            raise RuntimeError(f"{self.name} failed (exit {code}){self._stderr_tail()}")
        return result

    def kill(self) -> None:
        """Only for clean-up after a failure: the process we started, by its handle."""
        if self.running:
            self.popen.kill()
            self.popen.wait()

    def _stderr_tail(self) -> str:
        path = self.logs / f"{self.name}.stderr.log"
        text = path.read_text(errors="replace")[-3000:] if path.exists() else ""
        return f"; stderr tail:\n{text}" if text else ""


class Sampler:
    """Calls ``sample()`` every ``interval`` seconds on a thread, stamping each dict with ``t``
    (time.monotonic()), from ``with`` until the block ends. Sampling from outside the measured
    process sees it even while its event loop is stuck."""

    def __init__(self, sample: Callable[[], dict[str, Any]], interval: float = 0.25) -> None:
        self.sample = sample
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append({"t": time.monotonic(), **self.sample()})
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def rate(self, key: str, t0: float, t1: float) -> float | None:
        """d(key)/dt between the samples nearest to t0 and t1 (e.g. CPU-seconds per second)."""
        if not self.samples:
            return None
        a = min(self.samples, key=lambda s: abs(s["t"] - t0))
        b = min(self.samples, key=lambda s: abs(s["t"] - t1))
        if b["t"] <= a["t"] or a.get(key) is None or b.get(key) is None:
            return None
        return float(b[key] - a[key]) / float(b["t"] - a["t"])


def percentiles(values: list[float], qs: Iterable[float] = (50, 90, 99, 99.9)) -> dict[str, float]:
    """Nearest-rank percentiles plus max and mean of ``values`` (e.g. latencies in ms)."""
    if not values:
        return {}
    ordered = sorted(values)
    out = {f"p{q:g}": ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))] for q in qs}
    out["max"] = ordered[-1]
    out["mean"] = sum(ordered) / len(ordered)
    return out


def downsample(series: list[Any], points: int = 50) -> list[Any]:
    """About ``points`` evenly spaced items of ``series``, always with the first and the last."""
    if len(series) <= points:
        return list(series)
    step = (len(series) - 1) / (points - 1)
    return [series[round(i * step)] for i in range(points)]
