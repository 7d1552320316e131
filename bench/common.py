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
import sys
import time
import zlib
from typing import Any, Callable, Iterable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

RESULT_PREFIX = "BENCH_RESULT "
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
        value = b"%010d" % i + block[off:off + value_size - 10]
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

async def create_topics(bootstrap: str, names: Iterable[str], partitions: int = PARTITIONS,
                        compacted: Iterable[str] = ()) -> None:
    compacted = set(compacted)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([
            NewTopic(name, partitions, 1, topic_configs={"cleanup.policy": "compact"} if name in compacted else {})
            for name in names
        ])
    finally:
        await admin.close()


async def load_topic(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]],
                     partitioner: Callable[[bytes | None, int], int] | None = None,
                     partitions: int = PARTITIONS) -> None:
    """Append ``records`` fast: hand-built batches per partition (the default partitioner
    on the key, as a producer.send() would choose, unless ``partitioner`` is given)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=50,
                                max_batch_size=512 * 1024, max_request_size=4 * 1024 * 1024)
    await producer.start()
    try:
        await producer.partitions_for(topic)
        if partitioner is None:
            parts = list(range(partitions))

            def partitioner(key: bytes | None, n: int) -> int:  # noqa: F811 - aiokafka's choice
                return producer._partitioner(key, parts, parts)

        by_part: dict[int, list[tuple[bytes | None, bytes]]] = collections.defaultdict(list)
        for key, value in records:
            by_part[partitioner(key, partitions)].append((key, value))
        futures = []
        for p, recs in by_part.items():
            batch = producer.create_batch()
            for key, value in recs:
                if batch.append(key=key, value=value, timestamp=None) is None:
                    futures.append(await producer.send_batch(batch, topic, partition=p))
                    batch = producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)
            futures.append(await producer.send_batch(batch, topic, partition=p))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def read_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS,
                     on_batch: Callable[[list[Any]], None] | None = None) -> int:
    """Read a whole topic (until fetches come back empty: ListOffsets(latest) is wrong on the
    dev broker). Calls ``on_batch(messages)`` per fetched batch; returns the record count."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=4 * 1024 * 1024,
                                fetch_max_bytes=16 * 1024 * 1024)
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


# -- process stats (measured subprocess side) ------------------------------------------------------

def peak_rss_mb(pid: int | str = "self") -> float:
    """VmHWM (peak resident set size) of a process, in MB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def cpu_seconds() -> float:
    """User + system CPU of this process, all threads (RocksDB's background threads too)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def proc_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU of another process (the broker), from /proc/<pid>/stat."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


class Meter:
    """Times one measured interval: wall time, this process's CPU and the broker's CPU."""

    def __init__(self) -> None:
        self.broker_pid = int(os.environ.get("BENCH_BROKER_PID", "0") or 0) or None
        self.t0: float | None = None
        self.cpu0 = 0.0
        self.bcpu0: float | None = None

    def start(self) -> None:
        if self.t0 is None:
            self.t0 = time.perf_counter()
            self.cpu0 = cpu_seconds()
            self.bcpu0 = proc_cpu_seconds(self.broker_pid)

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
        }
        out.update(extra)
        return out


def report(result: dict[str, Any]) -> None:
    """The one line the orchestrator parses (peak RSS read last, at the very end of the work)."""
    result.setdefault("peak_rss_mb", peak_rss_mb())
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


def parse_result(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            parsed: dict[str, Any] = json.loads(line[len(RESULT_PREFIX):])
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
