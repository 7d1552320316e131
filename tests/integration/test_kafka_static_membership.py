"""Static membership on a Kafka cluster (KIP-345): a rolling restart of three word count workers, each with its
own ``consumer_group_instance_id`` (as a StatefulSet's pod name) and back within the session timeout, moves no
partition and restores no record. The longest output gap per partition during the restarts is reported.

Each worker stops with SIGTERM (as Kubernetes stops a pod): it commits and writes its checkpoints but, being a
static member, does not leave the group; the coordinator keeps its partitions for it until the session timeout.
Its successor joins under the same instance id, and a Kafka coordinator hands it the old member's assignment
without a rebalance: the other workers never see one (under the eager protocol every rebalance revokes and
assigns every member's partitions, and the workers log both).
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest

from tests.kafka_cluster.shared import ClusterInfo

from .cluster import SteadyFeeder, Worker, stop_all, story, true_counts, wait_counts
from .test_scale_out import OutputWatch

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
# Longer than a worker's restart on a loaded machine (it must be back within it): on two cores shared by several
# test runs a new worker process waited up to 30 s for the CPU before its first line.
SESSION_TIMEOUT = "60"
RESTORED = re.compile(r"restored (\d+) records")


def _settled(workers: list[Worker], topic: str, quiet_s: float = 3.0, timeout: float = 60.0) -> None:
    """Until the group's members own every input partition between them and nobody's assignment changed for
    ``quiet_s`` (a scale-out goes through warm-ups and probing rebalances before it settles)."""
    deadline = time.monotonic() + timeout
    last, since = "", time.monotonic()
    while time.monotonic() < deadline:
        now = "|".join(str(w.log().count("assigned: ")) for w in workers)
        owned = [w.last_assignment(topic) if "assigned: " in w.log() else set() for w in workers]
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s and set().union(*owned) == {0, 1, 2, 3} and all(owned):
            return
        time.sleep(0.2)
    raise AssertionError(f"the group did not settle in {timeout}s:\n{story(workers)}")


def test_a_rolling_restart_of_static_members_moves_nothing_and_restores_nothing(
    kafka: ClusterInfo, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    prefix = f"static-{uuid.uuid4().hex[:8]}"
    topic, out = f"{prefix}-sentences", f"{prefix}-word-counts"
    logs = ARTIFACTS / request.node.name

    def start(i: int, suffix: str = "") -> Worker:
        env = {
            "WORDCOUNT_PREFIX": prefix,
            "AGENTSTREAM_CONSUMER_GROUP_INSTANCE_ID": f"{prefix}-pod-{i}",
            "AGENTSTREAM_SESSION_TIMEOUT": SESSION_TIMEOUT,
        }
        return Worker(
            f"w{i}{suffix}", kafka.url, tmp_path / f"w{i}", logs, app="tests.integration.named_wordcount", env=env
        )

    workers = [start(1)]
    everyone = list(workers)
    feeder = SteadyFeeder(kafka.bootstrap, topic, rate=100, seed=5)
    watch = OutputWatch(kafka.bootstrap, topic=out)
    try:
        workers[0].wait_log(rf"assigned: .*{topic}\[")
        feeder.start()
        feeder.wait_sent(300)  # every partition holds table state before the others join
        workers += [start(2), start(3)]
        everyone += workers[1:]
        _settled(workers, topic)
        before = {w.name: w.last_assignment(topic) for w in workers}
        watch.start()
        t0 = time.monotonic()
        restarts: list[float] = []  # from each worker's exit to its successor's assignment, seconds
        for i in range(3):
            old = workers[i]
            seen = {w.name: w.log().count("assigned: ") for w in workers if w is not old}
            assert old.terminate() == 0, old.log()[-3000:]
            stopped = time.monotonic()
            fresh = start(i + 1, "-restarted")
            everyone.append(fresh)
            workers[i] = fresh
            fresh.wait_log(rf"assigned: .*{topic}\[", timeout=90)
            restarts.append(round(time.monotonic() - stopped, 1))
            fresh.wait_log(r"tables for partitions .*: restored", timeout=60)
            # the others kept their partitions throughout: no rebalance reached them
            for w in workers:
                if w is not fresh:
                    assert w.log().count("assigned: ") == seen[w.name], (
                        f"{w.name} was rebalanced (restarts took {restarts} s):\n{story(everyone)}"
                    )
            assert fresh.last_assignment(topic) == before[old.name], story(everyone)
        t1 = time.monotonic()
        texts = feeder.finish()
        got = wait_counts(kafka.bootstrap, true_counts(texts), topic=out, timeout=90)
        watch.stop()
        restored = [int(n) for w in workers for n in RESTORED.findall(w.log())]
        gaps = watch.longest_gaps(t0, t1)
        print(
            f"\nstatic rolling restart: partitions moved 0, records restored {sum(restored)}, "
            f"longest output gap per partition {gaps} s; restarts (exit to assignment) {restarts} s "
            f"(session timeout {SESSION_TIMEOUT} s)"
        )
        assert sum(restored) == 0, story(everyone)
        # and no rebalance came later either (a static leader's rejoin must not leave a probe behind)
        assert [w.log().count("assigned: ") for w in workers] == [1, 1, 1], story(everyone)
        assert {w.name.split("-")[0]: w.last_assignment(topic) for w in workers} == before
        assert got == true_counts(texts), "counts differ from the truth after a clean rolling restart"
    finally:
        feeder.stop()
        if watch.is_alive():
            watch.stop()
        stop_all(everyone)
