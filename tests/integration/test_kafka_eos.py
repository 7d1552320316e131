"""Exactly-once on the 3-broker Apache Kafka cluster: the word count of ``apps/wordcount.py`` under
``processing_guarantee='exactly_once'`` (``tests/integration/eos_wordcount.py``) run as worker processes.

- kill -9 of a worker every few seconds, with a second worker joining in between (scale-out): read with
  ``isolation_level=read_committed``, the output holds every count exactly once (per word the counts emitted
  are 1, 2, ..., N in order, no repeat and no gap, N the true count), and the changelog agrees (per word
  increasing, ending on N);
- a worker frozen with SIGSTOP past its session timeout, whose partitions moved, then resumed: it cannot
  commit (its transactions are fenced), the records of its open transaction never become visible to
  read_committed readers, and it rejoins the group and processes again.

Each test prints its figures (sentences, kills, counts checked, duplicates) for docs/guarantees.md.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import random
import re
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped,unused-ignore]

import agentstream
from agentstream.exceptions import ProducerFenced
from agentstream.transport import get_transport
from agentstream.transport.base import TP, TopicSpec
from tests.kafka_cluster.shared import ClusterInfo

from .cluster import Feeder, Worker, sentences, stop_all, true_counts

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
APP = "tests.integration.eos_wordcount"
KILL_SENTENCES = int(os.environ.get("AGENTSTREAM_EOS_SENTENCES", "2000"))
RUNNING = r"tables for partitions .*: restored"  # a worker's tasks are restored and running


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes
    value: bytes
    worker: bytes


async def _read(bootstrap: str, topic: str, isolation_level: str) -> list[Record]:
    """Every record of ``topic`` up to its end offsets (read_committed: the last stable offsets)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation_level,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        parts = await consumer._client.fetch_all_metadata()
        tps = [TopicPartition(topic, p) for p in sorted(parts.partitions_for_topic(topic) or ())]
        assert tps, f"no topic {topic}"
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        out: list[Record] = []
        async with asyncio.timeout(60):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                for tp, messages in (await consumer.getmany(timeout_ms=500)).items():
                    out.extend(
                        Record(tp.partition, m.offset, m.key, m.value, dict(m.headers).get("worker", b""))
                        for m in messages
                        if m.offset < ends[tp]
                    )
        return out
    finally:
        await consumer.stop()


def read_committed(bootstrap: str, topic: str) -> list[Record]:
    return asyncio.run(_read(bootstrap, topic, "read_committed"))


def read_uncommitted(bootstrap: str, topic: str) -> list[Record]:
    return asyncio.run(_read(bootstrap, topic, "read_uncommitted"))


async def _open_ranges(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """Per partition with an open transaction: (last stable offset, high watermark)."""
    ends: dict[str, dict[int, int]] = {}
    for level in ("read_committed", "read_uncommitted"):
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=level, enable_auto_commit=False)
        await consumer.start()
        try:
            parts = await consumer._client.fetch_all_metadata()
            tps = [TopicPartition(topic, p) for p in sorted(parts.partitions_for_topic(topic) or ())]
            ends[level] = {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
        finally:
            await consumer.stop()
    stable, high = ends["read_committed"], ends["read_uncommitted"]
    return {p: (stable[p], high[p]) for p in high if stable[p] < high[p]}


def counts_by_word(records: list[Record]) -> dict[str, list[int]]:
    """The counts emitted per word, in the order its partition holds them."""
    seqs: dict[str, list[int]] = collections.defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        seqs[r.key.decode()].append(int(r.value))
    return dict(seqs)


def wait_for_counts(bootstrap: str, topic: str, expected: dict[str, int], workers: list[Worker]) -> None:
    """Until every word's last committed count reached its true count (a worker that died fails it)."""
    deadline = time.monotonic() + 90
    last: dict[str, int] = {}
    while time.monotonic() < deadline:
        last = {w: s[-1] for w, s in counts_by_word(read_committed(bootstrap, topic)).items()}
        if all(last.get(w, 0) >= c for w, c in expected.items()):
            return
        dead = [w for w in workers if w.proc.poll() is not None]
        assert not dead, f"{dead[0].name} exited with {dead[0].proc.returncode}:\n{dead[0].log()[-3000:]}"
        time.sleep(1.0)
    behind = {w: (last.get(w, 0), c) for w, c in expected.items() if last.get(w, 0) < c}
    raise AssertionError(f"{len(behind)} words behind their true count after 90s, e.g. {list(behind.items())[:5]}")


def check_exactly_once(bootstrap: str, app_id: str, expected: dict[str, int]) -> tuple[int, int]:
    """The output and changelog read_committed hold every count exactly once; returns (outputs, changelog records)."""
    output = read_committed(bootstrap, f"{app_id}-counts")
    seqs = counts_by_word(output)
    wrong = {w: s for w, s in seqs.items() if s != list(range(1, expected.get(w, 0) + 1))}
    assert set(seqs) == set(expected), f"words missing from the output: {sorted(set(expected) - set(seqs))[:10]}"
    assert not wrong, f"{len(wrong)} words whose counts are not 1..N exactly once, e.g. " + "; ".join(
        f"{w} (true {expected.get(w)}): dupes {[c for c, n in collections.Counter(s).items() if n > 1][:5]} "
        f"gaps {sorted(set(range(1, expected.get(w, 0) + 1)) - set(s))[:5]} last {s[-1]}"
        for w, s in list(wrong.items())[:3]
    )
    changelog = read_committed(bootstrap, f"{app_id}-word_counts-changelog")
    table = counts_by_word(changelog)
    rising = {w: s for w, s in table.items() if any(b <= a for a, b in zip(s, s[1:]))}
    assert not rising, f"changelog counts going back or repeating, e.g. {list(rising.items())[:2]}"
    finals = {w: s[-1] for w, s in table.items()}
    assert finals == expected, (
        f"changelog differs from the truth: {[(w, finals.get(w), c) for w, c in expected.items() if finals.get(w) != c][:5]}"
    )
    return len(output), len(changelog)


def _env(app_id: str, worker: str) -> dict[str, str]:
    return {
        "EOS_WORDCOUNT_ID": app_id,
        "EOS_WORKER": worker,
        "AGENTSTREAM_SESSION_TIMEOUT": "6",
        "AGENTSTREAM_HEARTBEAT_INTERVAL": "1",
        "AGENTSTREAM_REBALANCE_TIMEOUT": "10",
        "AGENTSTREAM_COMMIT_INTERVAL": "0.5",
    }


async def test_a_fenced_task_producer_raises_producer_fenced_at_every_call(kafka: ClusterInfo) -> None:
    """aiokafka's sender stops at the fence and its transaction manager goes to a fatal state where later
    calls fail with unrelated errors (IllegalOperation, an invalid state transition): each call of the
    zombie must say ProducerFenced, which the worker handles by rejoining (not by stopping)."""
    name = f"eos-fence-{uuid.uuid4().hex[:8]}"
    unhandled: list[dict[str, object]] = []  # asyncio's "Future exception was never retrieved"
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: unhandled.append(context))
    app = agentstream.App(name, broker=kafka.url)
    transport = get_transport(app.settings.broker, app.settings)
    await transport.ensure_topics([TopicSpec(name, 2)])
    zombie = transport.producer(transactional_id=name, **app.producer_settings())
    successor = transport.producer(transactional_id=name, **app.producer_settings())
    try:
        await zombie.start()
        await zombie.begin_transaction()
        await (await zombie.send(name, b"k", b"zombie", partition=0))
        await successor.start()  # the task's next owner: InitProducerId bumps the epoch, aborts the open transaction
        await zombie.send(name, b"k", b"late", partition=1)  # a new partition: AddPartitionsToTxn is refused
        with pytest.raises(ProducerFenced):
            await zombie.flush()
        with pytest.raises(ProducerFenced):
            await zombie.send_offsets_to_transaction({TP(name, 0): 1}, name)
        with pytest.raises(ProducerFenced):
            await zombie.commit_transaction()
        with pytest.raises(ProducerFenced):
            await zombie.begin_transaction()
        with pytest.raises(ProducerFenced):
            await zombie.send(name, b"k", b"later", partition=0)
            await zombie.flush()
        await successor.begin_transaction()
        await (await successor.send(name, b"k", b"successor", partition=0))
        await successor.commit_transaction()
    finally:
        await zombie.stop()
        await successor.stop()
        await transport.close()
    visible = await asyncio.to_thread(read_committed, kafka.bootstrap, name)
    assert [r.value for r in visible] == [b"successor"]
    del zombie
    gc.collect()
    assert not unhandled, f"the stopped zombie left an error nobody retrieved: {unhandled[0]}"


def test_exactly_once_word_count_under_kill9_and_scale_out(
    kafka: ClusterInfo, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app_id = f"eos-kill-{uuid.uuid4().hex[:8]}"
    logs = ARTIFACTS / request.node.name
    texts = sentences(KILL_SENTENCES, seed=39)
    rnd = random.Random(39)
    started = 0

    def start(name: str) -> Worker:
        nonlocal started
        started += 1
        label = f"{name}-{started}"
        return Worker(label, kafka.url, tmp_path / name, logs, app=APP, env=_env(app_id, label))

    workers = {"a": start("a")}
    everyone = list(workers.values())
    kills = 0
    try:
        workers["a"].wait_log(RUNNING, timeout=90)
        feeder = Feeder(kafka.bootstrap, texts, chunk=100, pause=0.3, topic=f"{app_id}-sentences")
        feeder.start()
        began = time.monotonic()
        # kill -9 a running worker every few seconds; the second worker joins after the first kill
        while feeder.is_alive() or kills < 3:
            time.sleep(rnd.uniform(2.5, 4.0))
            running = [n for n, w in workers.items() if re.search(RUNNING, w.log())]
            if not running:
                continue
            victim = rnd.choice(sorted(running))
            workers[victim].kill()
            kills += 1
            workers[victim] = start(victim)
            everyone.append(workers[victim])
            if "b" not in workers:
                workers["b"] = start("b")
                everyone.append(workers["b"])
        feeder.finish()
        fed = time.monotonic()
        expected = true_counts(texts)
        wait_for_counts(kafka.bootstrap, f"{app_id}-counts", expected, list(workers.values()))
        drained = time.monotonic()
        for w in workers.values():
            w.wait_log(r"worker for \S+ started", timeout=60)  # a SIGTERM before that is not handled yet
            assert w.terminate() == 0, w.log()[-3000:]
        outputs, changelog = check_exactly_once(kafka.bootstrap, app_id, expected)
        print(
            f"\nexactly_once on Kafka: {len(texts)} sentences, {kills} kill -9, {started} worker processes "
            f"(scale-out 1 -> 2), {len(expected)} words, {outputs} counts read_committed = "
            f"{sum(expected.values())} true word records, duplicates 0, gaps 0; {changelog} changelog records, "
            f"final values = the truth (feed and kills {fed - began:.0f}s, then all counted in {drained - fed:.0f}s)"
        )
    finally:
        stop_all(everyone)


def test_a_frozen_worker_whose_partitions_moved_is_fenced_and_its_writes_stay_invisible(
    kafka: ClusterInfo, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app_id = f"eos-stop-{uuid.uuid4().hex[:8]}"
    logs = ARTIFACTS / request.node.name
    counts = f"{app_id}-counts"
    texts = sentences(2000, seed=40)
    a = Worker("a", kafka.url, tmp_path / "a", logs, app=APP, env=_env(app_id, "a"))
    b: Worker | None = None
    try:
        a.wait_log(RUNNING, timeout=90)
        feeder = Feeder(kafka.bootstrap, texts, chunk=100, pause=0.3, topic=f"{app_id}-sentences")
        feeder.start()
        # Freeze a while a transaction of its is open on the broker (records past the last stable offset).
        zombie: dict[int, tuple[int, int]] = {}
        for _ in range(20):
            feeder.wait_sent(200)
            a.proc.send_signal(signal.SIGSTOP)
            zombie = asyncio.run(_open_ranges(kafka.bootstrap, counts))
            if zombie:
                break
            a.proc.send_signal(signal.SIGCONT)
            time.sleep(0.2)
        assert zombie, "a never had an open transaction on the output when frozen"
        b = Worker("b", kafka.url, tmp_path / "b", logs, app=APP, env=_env(app_id, "b"))
        # past a's session timeout the group gives b every partition; b's producers fence a's
        b.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]", timeout=60)
        b.wait_log(RUNNING, timeout=60)
        a.proc.send_signal(signal.SIGCONT)
        feeder.finish()
        expected = true_counts(texts)
        wait_for_counts(kafka.bootstrap, counts, expected, [a, b])
        # a resumed as a zombie: its producers were fenced by b's (the broker refused its transaction
        # calls), it committed nothing, and it rejoined the group and ran again
        a.wait_log(r"producer '[^']+' was fenced during", timeout=30)
        a.wait_log(r"assigned: .*sentences\[", timeout=30, count=2)
        assert a.proc.poll() is None, a.log()[-3000:]
        for w in (a, b):
            assert w.terminate() == 0, w.log()[-3000:]
        visible = {(r.partition, r.offset) for r in read_committed(kafka.bootstrap, counts)}
        aborted = [
            r
            for r in read_uncommitted(kafka.bootstrap, counts)
            if r.partition in zombie and zombie[r.partition][0] <= r.offset < zombie[r.partition][1]
        ]
        assert aborted and all(r.worker == b"a" for r in aborted), aborted[:5]
        leaked = [r for r in aborted if (r.partition, r.offset) in visible]
        assert not leaked, f"{len(leaked)} records of the zombie's transaction are visible: {leaked[:5]}"
        outputs, changelog = check_exactly_once(kafka.bootstrap, app_id, expected)
        print(
            f"\nSIGSTOP zombie on Kafka: {len(texts)} sentences; the frozen worker's open transaction held "
            f"{len(aborted)} output records, 0 of them visible read_committed; {outputs} counts, duplicates 0"
        )
    finally:
        stop_all([w for w in (a, b) if w is not None])
