"""Scaling out a stateful app (on the Kafka cluster; on the dev broker where none can be had) without a restore stall (issue 30, KIP-441): the word
count runs on one worker under a steady feed; a second worker joins. Its first assignment is warm-up
replicas only (the first worker keeps processing every partition), it asks for a probing rebalance once
they are caught up, and then owns its share. Nothing is lost, and the longest pause in the output of
any partition during the scale-out is reported."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from .cluster import Feeder, Worker, assert_counts_after_rebalances, sentences, stop_all, true_counts, wait_counts
from .targets import Target

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

pytestmark = pytest.mark.integration


class OutputWatch(threading.Thread):
    """When each output record arrives, per partition of ``word-counts`` (fetched every 50 ms)."""

    def __init__(self, bootstrap: str, topic: str = "word-counts", partitions: int = 4) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.arrivals: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self._done = threading.Event()

    def run(self) -> None:
        asyncio.run(self._watch())

    async def _watch(self) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])
            while not self._done.is_set():
                batches = await consumer.getmany(timeout_ms=50)
                now = time.monotonic()
                for tp, messages in batches.items():
                    if messages:
                        self.arrivals[tp.partition].append(now)
        finally:
            await consumer.stop()

    def stop(self) -> None:
        self._done.set()
        self.join(10)

    def longest_gaps(self, start: float, end: float) -> dict[int, float]:
        """Per partition, the longest time without output within [start, end]."""
        gaps = {}
        for p, times in self.arrivals.items():
            inside = [start] + [t for t in times if start <= t <= end] + [end]
            gaps[p] = round(max(b - a for a, b in zip(inside, inside[1:])), 2)
        return gaps


@pytest.mark.parametrize("target", ["kafka-else-dev"], indirect=True)
def test_a_joining_worker_warms_up_then_takes_its_share(
    target: Target, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    t = target
    texts = sentences(12000, seed=11)
    logs = ARTIFACTS / request.node.name
    w1 = Worker("w1", t.url, tmp_path / "w1", logs, app=t.wordcount, env=t.env)
    workers = [w1]
    try:
        w1.wait_log(r"assigned: .*sentences\[")
        feeder = Feeder(t.bootstrap, texts, chunk=300, pause=0.1, hold_at=9000, topic=t.sentences)
        feeder.start()
        feeder.wait_sent(4000)  # w1 holds table state for every partition by now
        watch = OutputWatch(t.bootstrap, t.word_counts)
        watch.start()
        time.sleep(1.0)
        joined = time.monotonic()
        w2 = Worker("w2", t.url, tmp_path / "w2", logs, app=t.wordcount, env=t.env)
        workers.append(w2)
        warm = w2.wait_log(r"warm-up replicas of partitions \[([\d, ]+)\]")
        warmups = {int(p) for p in warm.group(1).split(",")}
        # the first assignment gave w2 no active partition: it waited, warm, while w1 went on
        before_probe = w2.log()[: w2.log().index("warm-up replicas of partitions")]
        assert not re.search(r"assigned: .*sentences\[", before_probe), before_probe[-2000:]
        w2.wait_log(r"asking for a probing rebalance")
        w2.wait_log(r"assigned: .*sentences\[")
        assert w2.last_assignment("sentences") >= warmups, (w2.last_assignment("sentences"), warmups)
        time.sleep(2.0)  # output from the new owner
        taken = time.monotonic()
        assert feeder.is_alive(), "the feed ended before the scale-out: not under load"
        watch.stop()
        gaps = watch.longest_gaps(joined, taken)
        figures = {"longest_output_gap_s": gaps, "scale_out_s": round(taken - joined, 1), "warmups": sorted(warmups)}
        print(f"scale-out figures: {figures}")
        (logs / "scale_out_figures.json").write_text(json.dumps(figures))
        feeder.finish()
        expected = true_counts(texts)
        got = wait_counts(t.bootstrap, expected, topic=t.word_counts)
        assert_counts_after_rebalances(got, expected, workers)
        for w in workers:
            assert w.terminate() == 0
    finally:
        stop_all(workers)
