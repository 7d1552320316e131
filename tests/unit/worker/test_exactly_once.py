"""exactly_once and at_least_once under hundreds of injected crashes, on the memory transport.

A "life" is one worker process: a fresh App (so fresh memory stores, nothing process-local
survives) and Worker on the same memory broker. Each life gets a few new sentences, then a crash
point chosen by a seeded RNG (``agentstream.testing_faults``) fires and the worker is abandoned
on the spot: tasks cancelled, no flush, no commit, open transactions left open, stores dropped.
The next life resumes from what the broker holds. At the end one clean life drains everything.

exactly_once: the committed output topics, the changelog and the table equal a run without
crashes exactly. at_least_once: every record's effect is there at least once.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
from collections.abc import Iterable
from typing import Any

import orjson
import pytest

import agentstream
from agentstream.exceptions import CommitFailed, ProducerError, TopologyError, TransactionsUnsupported, TransportError
from agentstream.testing_faults import CRASH_POINTS, FailingCall, FaultInjector, InjectedCrash, abandon
from agentstream.transport.base import TP, TopicSpec
from agentstream.transport.memory import MemoryConsumer, MemoryProducer, MemoryTransport
from agentstream.worker.worker import Worker

pytestmark = [
    pytest.mark.asyncio,
    # an abandoned worker's tasks may be cancelled before their first step, like a killed process
    pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning"),
]

APP_ID = "eoswc"
PARTITIONS = 3
VOCABULARY = [f"w{i}" for i in range(30)]
# How many times each point is typically reached in one life: nth is drawn from 1..this.
REACH = {
    "before_record": 40,
    "in_agent": 8,
    "after_produce_before_commit": 4,
    "after_commit_before_checkpoint": 4,
    "mid_restore": 3,
    "rebalance_revoked": 1,
    "rebalance_assigned": 1,
}


class Holder:
    faults: FaultInjector | None = None


# Failures the worker must handle itself (it stops, and the next life resumes): the nth call of a
# client method raises in this life. (class, method, exception, guarantees it applies to)
FAILURES = {
    "failed_send": (MemoryProducer, "send", ProducerError, ("exactly_once", "at_least_once")),
    "failed_flush": (MemoryProducer, "flush", ProducerError, ("exactly_once", "at_least_once")),
    "failed_txn_commit": (MemoryProducer, "commit_transaction", TransportError, ("exactly_once",)),
    "failed_txn_offsets": (MemoryProducer, "send_offsets_to_transaction", TransportError, ("exactly_once",)),
    "failed_offset_commit": (MemoryConsumer, "commit", CommitFailed, ("at_least_once",)),
}
FAIL_REACH = {
    "failed_send": 60,
    "failed_flush": 6,
    "failed_txn_commit": 6,
    "failed_txn_offsets": 6,
    "failed_offset_commit": 6,
}


class Failure(FailingCall):
    """One named entry of FAILURES, failing at its ``nth`` call during one life."""

    def __init__(self, name: str, nth: int) -> None:
        cls, method, exc_type, _ = FAILURES[name]
        super().__init__(cls, method, exc_type, nth)
        self.name = name


def sentences(n: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [{"id": i, "text": " ".join(rnd.choice(VOCABULARY) for _ in range(rnd.randint(2, 7)))} for i in range(n)]


def make_app(url: str, guarantee: str, holder: Holder) -> agentstream.App:
    """Word count in two sub-topologies (split -> repartition -> count), with a table and sinks."""
    app = agentstream.App(
        APP_ID,
        broker=url,
        topic_partitions=PARTITIONS,
        processing_guarantee=guarantee,
        store="memory://",
        commit_interval=0.01,
        web_enabled=False,
        shutdown_timeout=2.0,
    )
    source = app.topic("sentences", value_type=dict)
    words = app.topic(f"{APP_ID}-words", key_type=str, value_type=dict, internal=True)
    counts_topic = app.topic("counts", key_type=str, value_type=int)
    seen = app.topic("seen", key_type=str, value_type=int)
    table = app.Table("counts", default=int)

    @app.agent(source)
    async def split(stream: agentstream.Stream) -> None:
        async for sentence in stream:
            ws = sentence["text"].split()
            for i, w in enumerate(ws):
                await words.send(key=w, value={"w": w, "id": sentence["id"]})
                await asyncio.sleep(0)  # like real I/O: a commit may come due in the middle of a record
                if i == 0 and holder.faults is not None:
                    holder.faults.check("in_agent")  # mid-record: some of its sends are out
            await seen.send(key=str(sentence["id"]), value=len(ws))

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:
        async for v in stream:
            n = table[v["w"]] + 1
            table[v["w"]] = n
            await asyncio.sleep(0)
            await counts_topic.send(key=v["w"], value=n)

    return app


class Cluster:
    """One memory broker and the lives of workers on it."""

    def __init__(self, name: str, guarantee: str) -> None:
        self.url = f"memory://{name}"
        self.guarantee = guarantee
        self.transport = MemoryTransport(self.url)
        self.fed = 0
        self.lives = 0
        self.crashes: collections.Counter[str] = collections.Counter()
        # Transport faults (MemoryFaults) make a worker fail on its own: it then stops the way a
        # worker process does (Worker.run -> stop()), not abandoned, so its stop path is tested too.
        self.stopped_by: collections.Counter[str] = collections.Counter()

    async def feed(self, batch: Iterable[dict[str, Any]]) -> None:
        producer = self.transport.producer()
        await producer.start()
        with self.transport.faults.suspended():  # injected faults are for the worker, not the feeder
            for s in batch:
                await producer.send("sentences", str(s["id"]).encode(), orjson.dumps(s))
                self.fed += 1

    def idle(self) -> bool:
        """Every visible record of every source partition is consumed and committed."""
        broker = self.transport._broker
        group = broker.groups.get(APP_ID)
        if group is None or "sentences" not in broker.topics:
            return False
        for topic in ("sentences", f"{APP_ID}-words"):
            for p in range(PARTITIONS):
                part = broker.partition(TP(topic, p))
                visible = [r.offset for r in part.records[: part.stable_end()] if r.offset not in part.aborted]
                if visible and group.committed.get(TP(topic, p), 0) <= visible[-1]:
                    return False
                if part.open_txns and part.stable_end() < part.end():
                    return False
        return True

    async def failing_life(self, failure: Failure) -> None:
        """Run one worker with one injected client failure; the worker handles it (it may stop
        itself), then it is stopped the normal way: its final commit must not commit past it."""
        app = make_app(self.url, self.guarantee, Holder())
        worker = Worker(app)
        self.lives += 1
        loop = asyncio.get_running_loop()
        with failure:
            await worker.start()
            deadline = loop.time() + 20
            while worker.crashed is None and not self.idle():
                assert loop.time() < deadline, f"life {self.lives} stuck ({failure.name})"
                await asyncio.sleep(0.002)
            await worker.stop()
        if failure.fired:
            self.crashes[failure.name] += 1
        else:
            assert worker.crashed is None, worker.crashed

    async def life(self, faults: FaultInjector | None, *, clean: bool = False) -> dict[Any, Any]:
        """Run one worker until its crash fires (abandon it) or all input is handled."""
        holder = Holder()
        holder.faults = faults
        app = make_app(self.url, self.guarantee, holder)
        worker = Worker(app, faults=faults)
        dead: list[asyncio.Future[Any]] = []
        if faults is not None:
            faults.on_fire = lambda point: dead.extend(abandon(worker))
        self.lives += 1
        table: dict[Any, Any] = {}
        try:
            await worker.start()
            if clean:  # everything may be committed already: read the table only once it is restored
                await asyncio.wait_for(worker.assigned.wait(), 20)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while not (faults is not None and faults.fired) and not self.idle():
                if worker.crashed is not None and not isinstance(worker.crashed, InjectedCrash):
                    assert self.transport.faults.active and isinstance(worker.crashed, TransportError), worker.crashed
                    break  # an injected transport fault stopped it
                assert loop.time() < deadline, f"life {self.lives} stuck (crash point {faults and faults.point})"
                await asyncio.sleep(0.002)
        except InjectedCrash:
            pass
        if (
            worker.crashed is not None
            and not isinstance(worker.crashed, InjectedCrash)
            and not (faults is not None and faults.fired)
        ):
            self.stopped_by[type(worker.crashed).__name__] += 1
            if faults is not None:
                faults.point = None  # this life ends by the transport fault, not a crash point
            try:
                await worker.stop()  # what Worker.run() does next in a real process
            except TransportError:
                pass  # the process exits with the producer's failure (rc 2 from the CLI)
            return table
        if faults is not None and faults.fired:
            self.crashes[faults.fired.split("#")[0]] += 1
        elif clean:
            table = app.tables["counts"].as_dict()
            await worker.stop()
            return table
        else:
            dead.extend(abandon(worker))  # the crash point was not reached in this life: die idle
        # Reap the dead worker's tasks (and a rebalance the crash broke) so their InjectedCrash
        # is retrieved; none of them may still be running afterwards.
        dead += [g._task for g in self.transport._broker.groups.values() if g._task]
        done, running = await asyncio.wait([t for t in dead if t is not asyncio.current_task()], timeout=30)
        assert not running, running
        for t in done:
            if not t.cancelled():
                t.exception()
        return table

    def committed(self, topic: str) -> list[tuple[bytes | None, bytes | None]]:
        return [(m.key, m.value) for m in self.transport.read_topic(topic, committed=True)]


def truth(texts: list[dict[str, Any]]) -> dict[str, int]:
    c: collections.Counter[str] = collections.Counter()
    for s in texts:
        c.update(s["text"].split())
    return dict(c)


def per_key(records: list[tuple[bytes | None, bytes | None]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = collections.defaultdict(list)
    for k, v in records:
        assert k is not None and v is not None
        out[k.decode()].append(orjson.loads(v))
    return dict(out)


def changelog(cluster: Cluster) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for k, v in cluster.committed(f"{APP_ID}-counts-changelog"):
        assert k is not None
        if v is None:
            state.pop(k, None)
        else:
            state[k] = v
    return state


async def crash_run(
    name: str,
    guarantee: str,
    texts: list[dict[str, Any]],
    crashes: int,
    seed: int,
    failures: bool = True,
    transport_faults: tuple[str, ...] = (),
) -> tuple[Cluster, dict[Any, Any]]:
    """Lives until ``crashes`` crash points fired; some lives (``failures``) fail a client call
    instead; with ``transport_faults``, each life also arms one of those memory-transport faults
    (it fires at the next operation of its kind)."""
    rnd = random.Random(seed)
    cluster = Cluster(name, guarantee)
    await cluster.transport.ensure_topics([TopicSpec("sentences", PARTITIONS)])
    per_life = max(1, len(texts) // max(crashes, 1))
    while cluster.fed < len(texts) and sum(cluster.crashes.values()) < crashes:
        await cluster.feed(texts[cluster.fed : cluster.fed + per_life])
        if failures and rnd.random() < 0.3:
            name = rnd.choice([n for n, f in FAILURES.items() if guarantee in f[3]])
            cluster.transport.faults.clear()  # one failure per life: an armed transport fault waits for later
            await cluster.failing_life(Failure(name, rnd.randint(1, FAIL_REACH[name])))
            continue
        if transport_faults:
            cluster.transport.faults.arm(rnd.choice(transport_faults))
        point = rnd.choice(CRASH_POINTS)
        await cluster.life(FaultInjector(point, rnd.randint(1, REACH[point])))
    cluster.transport.faults.clear()  # the last life runs clean and drains everything
    await cluster.feed(texts[cluster.fed :])
    table = await cluster.life(None, clean=True)
    return cluster, table


@pytest.fixture(autouse=True)
def fresh_brokers() -> Iterable[None]:
    MemoryTransport.reset_all()
    yield
    MemoryTransport.reset_all()


async def test_exactly_once_equals_the_run_without_crashes_after_hundreds_of_crashes() -> None:
    texts = sentences(600, seed=5)
    reference, ref_table = await crash_run("eos-reference", "exactly_once", texts, crashes=0, seed=0)
    assert reference.lives == 1
    cluster, table = await crash_run("eos-crashes", "exactly_once", texts, crashes=200, seed=1234)
    fired = sum(cluster.crashes.values())
    print(f"\nexactly_once: {cluster.lives} lives, {fired} crashes: {dict(cluster.crashes)}")
    assert fired >= 150 and all(cluster.crashes[p] > 0 for p in CRASH_POINTS), cluster.crashes
    eos_failures = [n for n, f in FAILURES.items() if "exactly_once" in f[3]]
    assert all(cluster.crashes[n] > 0 for n in eos_failures), cluster.crashes

    expected = truth(texts)
    assert ref_table == expected
    assert table == ref_table
    assert changelog(cluster) == changelog(reference)
    # Outputs: per word exactly 1, 2, ..., n (no duplicate, no gap), and every sentence seen once.
    counts = per_key(cluster.committed("counts"))
    assert counts == per_key(reference.committed("counts"))
    assert counts == {w: list(range(1, n + 1)) for w, n in expected.items()}
    assert sorted(cluster.committed("seen")) == sorted(reference.committed("seen"))
    assert len(cluster.committed("seen")) == len(texts)
    assert sorted(cluster.committed(f"{APP_ID}-words")) == sorted(reference.committed(f"{APP_ID}-words"))
    # The crashes really left debris behind: aborted records the readers had to skip.
    assert len(cluster.transport.read_topic("counts")) > len(cluster.committed("counts"))


def _gaps(values: list[int], n: int) -> str:
    """What is wrong with a word's committed counts: values missing from 1..n, and repeated ones."""
    missing = sorted(set(range(1, n + 1)) - set(values))
    repeated = sorted(v for v, c in collections.Counter(values).items() if c > 1)
    return f"n={n}, {len(values)} values, missing {missing[:5]}, repeated {repeated[:5]}"


EOS_FAULTS = ("send_fail", "send_cancel", "txn_commit_fail", "txn_abort")
ALO_FAULTS = ("send_fail", "send_cancel", "commit_fail")


@pytest.mark.parametrize(
    "kind",
    [
        "txn_commit_fail",
        "txn_abort",
        "send_fail",
        "send_cancel",
    ],
)
async def test_exactly_once_is_exact_after_a_worker_stops_on_a_transport_fault(kind: str) -> None:
    """One fault, no crash point: the worker stops on its own (commit fails, Worker.stop() runs as in a
    real process), a new worker drains the rest; the committed output is exactly the truth."""
    texts = sentences(120, seed=31)
    cluster = Cluster(f"eos-{kind}", "exactly_once")
    await cluster.transport.ensure_topics([TopicSpec("sentences", PARTITIONS)])
    await cluster.feed(texts)
    cluster.transport.faults.arm(kind)
    await cluster.life(FaultInjector(None))
    assert cluster.transport.faults.fired[kind] == 1 and sum(cluster.stopped_by.values()) == 1, cluster.stopped_by
    cluster.transport.faults.clear()
    table = await cluster.life(None, clean=True)
    expected = truth(texts)
    counts = per_key(cluster.committed("counts"))
    wrong = {w: _gaps(counts.get(w, []), n) for w, n in expected.items() if counts.get(w) != list(range(1, n + 1))}
    assert not wrong, f"{len(wrong)} words' committed counts are not exactly 1..n, e.g. {dict(list(wrong.items())[:3])}"
    assert table == expected
    assert sorted(k for k, _ in cluster.committed("seen")) == sorted(str(s["id"]).encode() for s in texts)


async def test_exactly_once_equals_the_run_without_crashes_under_transport_faults() -> None:
    """Crashes plus failed and cancelled sends, failed commits and coordinator-aborted transactions
    (injected by the memory transport): the read_committed output is still exactly the truth."""
    texts = sentences(400, seed=15)
    reference, ref_table = await crash_run("eosf-reference", "exactly_once", texts, crashes=0, seed=0)
    cluster, table = await crash_run(
        "eosf-crashes", "exactly_once", texts, crashes=60, seed=77, transport_faults=EOS_FAULTS
    )
    fired = dict(cluster.transport.faults.fired)
    print(
        f"\nexactly_once + transport faults: {cluster.lives} lives, crashes {dict(cluster.crashes)}, "
        f"injected {fired}, workers stopped by {dict(cluster.stopped_by)}"
    )
    assert all(fired.get(k, 0) > 0 for k in EOS_FAULTS), fired
    expected = truth(texts)
    assert ref_table == expected
    counts = per_key(cluster.committed("counts"))
    wrong = {w: _gaps(counts.get(w, []), n) for w, n in expected.items() if counts.get(w) != list(range(1, n + 1))}
    assert not wrong, f"{len(wrong)} words' committed counts are not exactly 1..n, e.g. {dict(list(wrong.items())[:3])}"
    assert table == expected
    assert changelog(cluster) == changelog(reference)
    assert sorted(cluster.committed("seen")) == sorted(reference.committed("seen"))
    assert sorted(cluster.committed(f"{APP_ID}-words")) == sorted(reference.committed(f"{APP_ID}-words"))


async def test_exactly_once_is_exact_when_a_transactions_offsets_reach_the_group_late() -> None:
    """Kafka answers an OffsetFetch without KIP-447's ``require_stable`` (aiokafka 0.14 sends version 3)
    with the offsets from before a transaction that has just committed, until its markers are written.
    The task's next owner (here each life's worker, after the last one stopped with a commit) must not
    start from those: the records that transaction covered would be counted twice. ``txn_offsets_late``
    keeps every transaction's offsets out of the group until the task's next InitProducerId, the moment
    Kafka is sure to have them."""
    texts = sentences(120, seed=41)
    cluster = Cluster("eos-late-offsets", "exactly_once")
    await cluster.transport.ensure_topics([TopicSpec("sentences", PARTITIONS)])
    cluster.transport.faults.randomly(41, txn_offsets_late=1.0)
    loop = asyncio.get_running_loop()
    for fed in range(30, len(texts) + 1, 30):
        await cluster.feed(texts[fed - 30 : fed])
        expected = truth(texts[:fed])
        worker = Worker(make_app(cluster.url, "exactly_once", Holder()))
        await worker.start()
        deadline = loop.time() + 20
        while not all(per_key(cluster.committed("counts")).get(w, [0])[-1] >= n for w, n in expected.items()):
            assert worker.crashed is None, worker.crashed
            assert loop.time() < deadline, f"the worker of sentences ..{fed} did not count them all in 20s"
            await asyncio.sleep(0.005)
        await worker.stop()
    assert cluster.transport.faults.fired["txn_offsets_late"] > 0
    expected = truth(texts)
    counts = per_key(cluster.committed("counts"))
    wrong = {w: _gaps(counts.get(w, []), n) for w, n in expected.items() if counts.get(w) != list(range(1, n + 1))}
    assert not wrong, f"{len(wrong)} words' committed counts are not exactly 1..n, e.g. {dict(list(wrong.items())[:3])}"


async def _count_until(cluster: Cluster, worker: Worker, expected: dict[str, int]) -> None:
    """Until every word's committed count reached ``expected`` (or the worker stopped)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not all(per_key(cluster.committed("counts")).get(w, [0])[-1] >= n for w, n in expected.items()):
        assert worker.crashed is None, f"the worker stopped: {worker.crashed!r}"
        assert loop.time() < deadline, "the words were not all counted within 20s"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("task", ["1_0", "0_2"])
async def test_a_worker_whose_task_producer_was_fenced_rejoins_and_stays_exact(
    task: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The group gave a task away while this worker did not hear from it (frozen, cut off), and the
    task's next owner started its producer (InitProducerId with the task's transactional id). The
    worker's next send or commit of that task is fenced (ProducerFenced): it must not stop, as a
    worker that was only paused would then be down for good; its tasks close dirty, it rejoins, and
    the committed output stays exact (Kafka Streams' TaskMigratedException)."""
    texts = sentences(90, seed=43)
    cluster = Cluster(f"eos-fenced-{task}", "exactly_once")
    await cluster.transport.ensure_topics([TopicSpec("sentences", PARTITIONS)])
    worker = Worker(make_app(cluster.url, "exactly_once", Holder()))
    await worker.start()
    await cluster.feed(texts[:30])
    await _count_until(cluster, worker, truth(texts[:30]))
    caplog.set_level(logging.INFO, "agentstream.worker")
    caplog.clear()
    next_owner = cluster.transport.producer(transactional_id=f"{APP_ID}-{task}")
    await next_owner.start()  # fences the worker's producer of that task
    await cluster.feed(texts[30:])
    await _count_until(cluster, worker, truth(texts))
    assert any(r.message.startswith("revoked: ") for r in caplog.records), "the worker did not rejoin"
    await worker.stop()
    assert worker.crashed is None, worker.crashed
    expected = truth(texts)
    counts = per_key(cluster.committed("counts"))
    wrong = {w: _gaps(counts.get(w, []), n) for w, n in expected.items() if counts.get(w) != list(range(1, n + 1))}
    assert not wrong, f"{len(wrong)} words' committed counts are not exactly 1..n, e.g. {dict(list(wrong.items())[:3])}"


async def test_at_least_once_loses_nothing_under_transport_faults() -> None:
    """Crashes plus failed and cancelled sends and failed offset commits: every effect at least once."""
    texts = sentences(400, seed=16)
    cluster, table = await crash_run(
        "alof-crashes", "at_least_once", texts, crashes=60, seed=78, transport_faults=ALO_FAULTS
    )
    fired = dict(cluster.transport.faults.fired)
    expected = truth(texts)
    duplicates = sum(table.get(w, 0) - n for w, n in expected.items())
    print(
        f"\nat_least_once + transport faults: {cluster.lives} lives, crashes {dict(cluster.crashes)}, "
        f"injected {fired}, workers stopped by {dict(cluster.stopped_by)}, "
        f"{duplicates} duplicated word counts of {sum(expected.values())}"
    )
    assert all(fired.get(k, 0) > 0 for k in ALO_FAULTS), fired
    low = {w: (table.get(w), n) for w, n in expected.items() if table.get(w, 0) < n}
    assert not low, f"lost updates: {low}"
    # Duplicates can hide a lost count in the table, so check the first stage record by record:
    # every word of every sentence reached the words topic at least once.
    got = collections.Counter(
        (orjson.loads(v)["id"], k.decode())
        for k, v in cluster.committed(f"{APP_ID}-words")
        if k is not None and v is not None
    )
    need = collections.Counter((s["id"], w) for s in texts for w in s["text"].split())
    lost = {key: (got[key], n) for key, n in need.items() if got[key] < n}
    assert not lost, (
        f"{len(lost)} (sentence, word) records never reached the words topic, e.g. {list(lost.items())[:5]}"
    )
    seen = {k.decode() for k, _ in cluster.committed("seen") if k is not None}
    assert seen == {str(s["id"]) for s in texts}
    counts = per_key(cluster.committed("counts"))
    assert all(max(counts[w]) >= n for w, n in expected.items())


async def test_at_least_once_loses_nothing_under_hundreds_of_crashes() -> None:
    texts = sentences(600, seed=6)
    cluster, table = await crash_run("alo-crashes", "at_least_once", texts, crashes=200, seed=4321)
    fired = sum(cluster.crashes.values())
    expected = truth(texts)
    duplicates = sum(table.get(w, 0) - n for w, n in expected.items())
    print(
        f"\nat_least_once: {cluster.lives} lives, {fired} crashes ({dict(cluster.crashes)}), "
        f"{duplicates} duplicated word counts of {sum(expected.values())}"
    )
    assert fired >= 100, cluster.crashes
    low = {w: (table.get(w), n) for w, n in expected.items() if table.get(w, 0) < n}
    assert not low, f"lost updates: {low}"
    seen = {k.decode() for k, _ in cluster.committed("seen") if k is not None}
    assert seen == {str(s["id"]) for s in texts}
    counts = per_key(cluster.committed("counts"))
    assert all(max(counts[w]) >= n for w, n in expected.items())


async def test_exactly_once_refuses_a_topic_read_by_two_agents() -> None:
    app = agentstream.App(
        "eos-shared",
        broker="memory://eos-shared",
        topic_partitions=1,
        processing_guarantee="exactly_once",
        web_enabled=False,
    )
    src = app.topic("src", value_type=int)

    @app.agent(src)
    async def one(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    @app.agent(src, name="two")
    async def two(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    worker = Worker(app)
    with pytest.raises(TopologyError, match="exactly_once.*'src' is read by"):
        await worker.start()
    await worker.stop()


async def test_exactly_once_refuses_a_table_written_by_two_sub_topologies() -> None:
    from agentstream.testing import AppHarness

    app = agentstream.App(
        "eos-two-writers",
        broker="memory://",
        topic_partitions=2,
        processing_guarantee="exactly_once",
        web_enabled=False,
        on_agent_error="skip",
    )
    src = app.topic("src", value_type=int)
    table = app.Table("t", default=int)

    @app.agent(src)
    async def writer(stream: agentstream.Stream) -> None:
        async for value in stream.through("eos-two-writers-mid").events():
            table[str(value.value)] += 1  # stage 1 writes here ...

    @app.agent(app.topic("other", value_type=int))
    async def other(stream: agentstream.Stream) -> None:
        async for value in stream:
            table[str(value)] += 1  # ... and another sub-topology writes the same table

    async with AppHarness(app) as h:
        await h.send("src", 1, key="a")
        await h.send("other", 1, key="a")
        with pytest.raises(TopologyError, match="written by two sub-topologies"):
            await h.wait_idle()


async def test_exactly_once_start_fails_clearly_when_the_broker_has_no_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentstream.transport.memory import MemoryProducer

    async def no_init(self: MemoryProducer) -> None:
        raise TransactionsUnsupported("memory://", "InitProducerId: UnknownError")

    monkeypatch.setattr(MemoryProducer, "start", no_init)
    app = agentstream.App(
        "eos-no-txn",
        broker="memory://eos-no-txn",
        topic_partitions=1,
        processing_guarantee="exactly_once",
        web_enabled=False,
    )

    @app.agent(app.topic("src", value_type=int))
    async def a(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    worker = Worker(app)
    with pytest.raises(TransactionsUnsupported, match="processing_guarantee.*at_least_once"):
        await worker.start()


async def test_a_commit_waiting_for_a_record_does_not_commit_the_task_when_the_record_fails() -> None:
    """A commit waits at the task's gate for the record in hand; the agent fails in the middle of
    it (one output sent, then its produce fails). The commit must not go on with the task: its
    transaction holds half of a record whose offset is not committed (the restart would send it again)."""
    url = "memory://eos-gate-race"
    transport = MemoryTransport(url)
    await transport.ensure_topics([TopicSpec("sentences", 1)])
    producer = transport.producer()
    await producer.start()
    for i in range(2):
        await producer.send("sentences", str(i).encode(), orjson.dumps({"id": i}))
    in_record, release = asyncio.Event(), asyncio.Event()
    fail = [True]

    def app_(commit_interval: float) -> agentstream.App:
        app = agentstream.App(
            "eosgate",
            broker=url,
            topic_partitions=1,
            processing_guarantee="exactly_once",
            store="memory://",
            commit_interval=commit_interval,
            web_enabled=False,
            shutdown_timeout=2.0,
        )
        source = app.topic("sentences", value_type=dict)
        out = app.topic("out", key_type=str, value_type=int)

        @app.agent(source)
        async def split(stream: agentstream.Stream) -> None:
            async for s in stream:
                await out.send(key=f"{s['id']}a", value=1)
                if s["id"] == 1 and fail[0]:
                    in_record.set()
                    await release.wait()
                    raise ProducerError("injected: the second produce of the record failed")
                await out.send(key=f"{s['id']}b", value=1)

        return app

    worker = Worker(app_(3600))  # no periodic commit: this test's commit is the one that races
    await worker.start()
    await asyncio.wait_for(in_record.wait(), 20)
    commit = asyncio.ensure_future(worker.commit())
    for _ in range(20):
        await asyncio.sleep(0)  # the commit now waits at the gate
    assert not commit.done()
    release.set()
    try:
        await asyncio.wait_for(commit, 20)
    except TransportError:
        pass
    assert worker.crashed is not None
    await worker.stop()

    fail[0] = False
    worker = Worker(app_(0.01))
    await worker.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while transport._broker.groups["eosgate"].committed.get(TP("sentences", 0)) != 2:
        assert loop.time() < deadline and worker.crashed is None, worker.crashed
        await asyncio.sleep(0.005)
    await worker.stop()
    keys = sorted(m.key for m in transport.read_topic("out", committed=True) if m.key is not None)
    assert keys == [b"0a", b"0b", b"1a", b"1b"]
