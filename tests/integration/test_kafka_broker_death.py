"""A broker dies under a steady feed (issue 39, item 4), on a 3-broker Kafka cluster of the test's own (RF 3,
``min.insync.replicas=2``).

A word count worker (at-least-once) runs under a steady feed; the broker coordinating its group, which also leads
some of the app's partitions (input, repartition, changelog, output; found in the cluster's metadata), is killed
with ``kill -9`` and brought back a few seconds later. The worker never stops; nothing is lost (every word's count reaches the truth); what is
counted twice (at-least-once replays what was not committed, and a producer retry may write a record twice) is
reported with the records sent and the longest output gap per partition.

Then a worker starting on an empty data dir, with a broker down again, restores its table from the surviving
replicas: fed one more sentence holding every word once, it answers each word's count plus one.
"""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaClient, AIOKafkaProducer, TopicPartition
from aiokafka.client import CoordinationType

from tests.kafka_cluster.cluster import KafkaCluster

from .cluster import COMMIT_FAILED, SteadyFeeder, Worker, final_counts, stop_all, story, true_counts, wait_counts
from .test_scale_out import OutputWatch

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


async def _leaders(bootstrap: str, topics: list[str]) -> dict[int, list[str]]:
    """Broker id -> the ``topic[partition]`` it leads, from the cluster's metadata."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        metadata = await client.fetch_all_metadata()
        led: dict[int, list[str]] = collections.defaultdict(list)
        for topic in topics:
            for p in sorted(metadata.partitions_for_topic(topic) or ()):
                led[metadata.leader_for_partition(TopicPartition(topic, p))].append(f"{topic}[{p}]")
        return dict(led)
    finally:
        await client.close()


def leaders(bootstrap: str, topics: list[str]) -> dict[int, list[str]]:
    return asyncio.run(_leaders(bootstrap, topics))


async def _coordinator(bootstrap: str, group: str) -> int:
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        node: int = await client.coordinator_lookup(CoordinationType.GROUP, group)
        return node
    finally:
        await client.close()


def coordinator(bootstrap: str, group: str) -> int:
    """The broker coordinating ``group`` (FindCoordinator)."""
    return asyncio.run(_coordinator(bootstrap, group))


async def _send(bootstrap: str, topic: str, text: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await (await producer.send(topic, orjson.dumps({"text": text})))
    finally:
        await producer.stop()


def test_a_broker_dies_under_a_steady_feed_and_a_new_worker_restores_from_the_replicas(
    own_kafka: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    prefix = f"death-{uuid.uuid4().hex[:8]}"
    url = "kafka://" + ";".join(own_kafka.bootstrap.split(","))
    bootstrap = own_kafka.bootstrap
    source, out = f"{prefix}-sentences", f"{prefix}-word-counts"
    changelog = f"{prefix}-word_counts-changelog"
    topics = [source, f"{prefix}-words", changelog, out]
    logs = ARTIFACTS / request.node.name
    env = {"WORDCOUNT_PREFIX": prefix}
    app = "tests.integration.named_wordcount"
    w1 = Worker("w1", url, tmp_path / "w1", logs, app=app, env=env)
    workers = [w1]
    feeder = SteadyFeeder(bootstrap, source, rate=100, seed=3)
    watch = OutputWatch(bootstrap, topic=out)
    try:
        w1.wait_log(rf"assigned: .*{source}\[")
        feeder.start()
        feeder.wait_sent(300)
        watch.start()
        led = leaders(bootstrap, topics)
        # the group coordinator's broker: its death also moves the group (and the commits) to another broker
        victim = coordinator(bootstrap, prefix)
        t_kill = time.monotonic()
        own_kafka.kill(victim)
        time.sleep(4)
        own_kafka.restart(victim)
        t_back = time.monotonic()
        sent_before = len(feeder.texts)
        feeder.wait_sent(sent_before + 500)  # the feed goes on past the broker's return
        texts = feeder.finish()
        truth = true_counts(texts)
        got = wait_counts(bootstrap, truth, topic=out, at_least=True, timeout=90)
        watch.stop()
        lost = {w: (got.get(w, 0), c) for w, c in truth.items() if got.get(w, 0) < c}
        duplicated = sum(got[w] - c for w, c in truth.items() if got.get(w, 0) > c)
        gaps = watch.longest_gaps(t_kill - 1, time.monotonic())
        failed_commits = len(COMMIT_FAILED.findall(w1.log()))
        print(
            f"\nbroker {victim} killed (the group coordinator; it led {', '.join(led.get(victim, [])) or 'nothing'}), back after {t_back - t_kill:.1f} s: "
            f"sentences sent {len(texts)}, words counted {sum(truth.values())}, lost {sum(c - g for g, c in lost.values())}, "
            f"duplicated {duplicated} (failed commits {failed_commits}), longest output gap per partition {gaps} s"
        )
        assert not lost, f"{len(lost)} words below the truth, e.g. {list(lost.items())[:5]}\n{story(workers)}"
        assert w1.proc.poll() is None, f"the worker stopped:\n{w1.log()[-3000:]}"

        # a worker on an empty data dir, with a broker down, restores every count from the surviving replicas
        assert w1.terminate() == 0
        got = final_counts(bootstrap, out)  # as w1 left it (its last outputs may have come after the reading above)
        led = leaders(bootstrap, [changelog])
        victim = max(led, key=lambda node: len(led[node]))
        own_kafka.kill(victim)
        w2 = Worker("w2", url, tmp_path / "w2", logs, app=app, env=env)
        workers.append(w2)
        restored = w2.wait_log(r"tables for partitions \[0, 1, 2, 3\]: restored (\d+) records", timeout=90)
        every_word = " ".join(sorted(got))
        asyncio.run(_send(bootstrap, source, every_word))
        expected = {w: c + 1 for w, c in got.items()}
        after = wait_counts(bootstrap, expected, topic=out, timeout=60)
        print(
            f"with broker {victim} (leading {', '.join(led[victim])}) down, a worker on an empty data dir "
            f"restored {restored.group(1)} changelog records"
        )
        assert after == expected, f"the restored table differs:\n{story(workers)}"
    finally:
        feeder.stop()
        if watch.is_alive():
            watch.stop()
        stop_all(workers)
