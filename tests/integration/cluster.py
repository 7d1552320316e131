"""Test-side tools for running wordcount workers as real processes against the dev broker."""

from __future__ import annotations

import asyncio
import collections
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

ROOT = Path(__file__).resolve().parents[2]
WORD = re.compile(r"\W+")
VOCABULARY = [f"w{i}" for i in range(300)] + ["Hello", "WORLD", "it's", "naïve"]


def sentences(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    return [
        " ".join(rnd.choice(VOCABULARY) for _ in range(rnd.randint(3, 12))) + rnd.choice([".", "!", ""])
        for _ in range(n)
    ]


def true_counts(texts: list[str]) -> dict[str, int]:
    c: collections.Counter[str] = collections.Counter()
    for t in texts:
        c.update(w for w in WORD.split(t.lower()) if w)
    return dict(c)


def worker_env(broker_url: str) -> dict[str, str]:
    """The environment of a test worker or CLI process: short group timeouts, the repo importable."""
    # the tests' own variables (AGENTSTREAM_TEST_KAFKA...) are not settings: a worker would warn of each
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTREAM_TEST_")}
    env.update(
        {
            "AGENTSTREAM_BROKER": broker_url,
            "AGENTSTREAM_SESSION_TIMEOUT": "6",
            "AGENTSTREAM_HEARTBEAT_INTERVAL": "1",
            # how long the group waits for every member to rejoin; generous, because a member starved
            # of CPU on a loaded machine would otherwise be evicted (and replay its uncommitted
            # records); it does not lengthen a join (tansu's join wait follows the session timeout)
            "AGENTSTREAM_REBALANCE_TIMEOUT": "20",
            "AGENTSTREAM_COMMIT_INTERVAL": "0.5",
            # a worker that joins warms its copies up first and takes over in a probing rebalance:
            # check every second (the default, 10 s, is for production)
            "AGENTSTREAM_PROBING_REBALANCE_INTERVAL": "1",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",  # apps that print() must reach the log file at once
        }
    )
    return env


class Worker:
    """A worker process of an app (``agentstream -A apps.wordcount worker``)."""

    def __init__(
        self,
        name: str,
        broker_url: str,
        data_dir: Path,
        log_dir: Path,
        *,
        app: str = "apps.wordcount",
        env: dict[str, str] | None = None,
        prefix: list[str] | None = None,
        web_port: int | None = None,
    ) -> None:
        self.name = name
        xdist = os.environ.get("PYTEST_XDIST_WORKER")
        if xdist:  # a module's fixture may run in each xdist process: one log file each, never shared
            log_dir = log_dir / xdist  # (a worker's URL and readiness are read from its log)
        self.log_path = log_dir / f"{name}.log"
        self.data_dir = data_dir
        full_env = worker_env(broker_url)
        full_env.update(env or {})
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                *(prefix or []),
                sys.executable,
                "-m",
                "agentstream",
                "-A",
                app,
                "worker",
                "--data-dir",
                str(data_dir),
                *(["--without-web"] if web_port is None else ["--web-port", str(web_port), "--web-host", "127.0.0.1"]),
                "-l",
                "info",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, pattern: str, timeout: float = 120.0, count: int = 1) -> re.Match[str]:
        """Wait for the ``count``-th match of ``pattern`` in the log and return it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            matches = list(re.finditer(pattern, self.log()))
            if len(matches) >= count:
                return matches[count - 1]
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: no {pattern!r} in its log within {timeout}s:\n{self.log()[-3000:]}")

    def last_assignment(self, topic: str) -> set[int]:
        lines = [line for line in self.log().splitlines() if "assigned: " in line]
        assert lines, f"{self.name} logged no assignment"
        m = re.search(re.escape(topic) + r"\[([0-9, ]*)\]", lines[-1])
        return {int(x) for x in m.group(1).split(",") if x.strip()} if m else set()

    def terminate(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self._log.close()
        return code

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    def stop_quietly(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if not self._log.closed:
            self._log.close()


async def _produce(bootstrap: str, topic: str, values: list[bytes], acks: int | str = 1) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=acks)
    await producer.start()
    try:
        for v in values:
            await producer.send(topic, v)
        await producer.flush()
    finally:
        await producer.stop()


def feed(bootstrap: str, texts: list[str], topic: str = "sentences", acks: int | str = 1) -> None:
    """Send ``texts`` as sentences; ``acks="all"`` where a broker may die (a leader's ack alone can be lost)."""
    asyncio.run(_produce(bootstrap, topic, [orjson.dumps({"text": t}) for t in texts], acks))


class Feeder(threading.Thread):
    """Feeds ``texts`` in chunks with pauses, so workers can join and leave while data flows.

    With ``hold_at``, the feed stops before that many sentences until :meth:`release` (or
    :meth:`finish`): the rest is still to come after the membership change the test makes, however
    long a loaded machine takes for it, so "mid-stream" holds by construction, not by timing."""

    def __init__(
        self,
        bootstrap: str,
        texts: list[str],
        *,
        chunk: int = 500,
        pause: float = 0.25,
        hold_at: int | None = None,
        topic: str = "sentences",
        acks: int | str = 1,
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.texts, self.chunk, self.pause = bootstrap, texts, chunk, pause
        self.topic, self.acks = topic, acks
        self.hold_at = len(texts) if hold_at is None else hold_at
        self._released = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for i in range(0, len(self.texts), self.chunk):
                if i >= self.hold_at:
                    self._released.wait()
                feed(self.bootstrap, self.texts[i : i + self.chunk], topic=self.topic, acks=self.acks)
                self.sent = min(len(self.texts), i + self.chunk)
                time.sleep(self.pause)
        except BaseException as exc:  # surfaced by finish()
            self.error = exc

    def release(self) -> None:
        """Let the feed go on past ``hold_at``."""
        self._released.set()

    def wait_sent(self, n: int, timeout: float = 120.0) -> None:
        """Until at least ``n`` sentences were sent (fails if the feeder died or stalled)."""
        deadline = time.monotonic() + timeout
        while self.sent < n:
            if not self.is_alive():
                raise AssertionError(f"the feeder stopped after {self.sent} sentences: {self.error!r}")
            assert time.monotonic() < deadline, f"the feeder sent {self.sent} of {n} sentences in {timeout}s"
            time.sleep(0.05)

    def finish(self, timeout: float = 120.0) -> None:
        self.release()
        self.join(timeout)
        assert not self.is_alive(), "feeder did not finish"
        if self.error is not None:
            raise self.error


class SteadyFeeder(threading.Thread):
    """Sends sentences at about ``rate`` per second through one producer until :meth:`finish`, so the output
    flows the whole time a test kills, restarts or moves something. ``acks="all"`` by default: where a broker
    dies, a record only its leader had acknowledged could be lost, and the test would blame the app.
    :attr:`texts` holds every sentence the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, *, rate: float = 100.0, seed: int = 7, acks: int | str = "all"):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate, self.acks = bootstrap, topic, rate, acks
        self._pool = sentences(2000, seed)
        self.texts: list[str] = []
        self.error: BaseException | None = None
        self._done = threading.Event()

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # surfaced by finish()
            self.error = exc

    async def _run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5, acks=self.acks)
        await producer.start()
        tick, n = 0.05, 0
        next_at = time.monotonic()
        try:
            while not self._done.is_set():
                batch = [self._pool[(n + i) % len(self._pool)] for i in range(max(1, round(self.rate * tick)))]
                n += len(batch)
                futures = [await producer.send(self.topic, orjson.dumps({"text": t})) for t in batch]
                await asyncio.gather(*futures)  # acknowledged: only then are they part of the truth
                self.texts.extend(batch)
                next_at += tick
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        finally:
            await producer.stop()

    def wait_sent(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.texts) < n:
            if not self.is_alive():
                raise AssertionError(f"the feeder stopped after {len(self.texts)} sentences: {self.error!r}")
            assert time.monotonic() < deadline, f"the feeder sent {len(self.texts)} of {n} sentences in {timeout}s"
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop feeding, whatever happened (for a test's clean-up)."""
        self._done.set()
        self.join(30)

    def finish(self, timeout: float = 60.0) -> list[str]:
        """Stop feeding; every sentence sent (and acknowledged)."""
        self._done.set()
        self.join(timeout)
        assert not self.is_alive(), "feeder did not finish"
        if self.error is not None:
            raise self.error
        return self.texts


async def _read_all(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        parts = await consumer._client.fetch_all_metadata()
        n = len(parts.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in range(n)]
        consumer.assign(tps)
        out: list[tuple[bytes | None, bytes | None]] = []
        empty = 0
        # Read until fetches come back empty (the dev broker's ListOffsets(latest) is not to be trusted).
        while empty < 3:
            batches = await consumer.getmany(timeout_ms=300)
            if not batches:
                empty += 1
                continue
            empty = 0
            for messages in batches.values():
                out.extend((m.key, m.value) for m in messages)
        return out
    finally:
        await consumer.stop()


def read_topic(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    return asyncio.run(_read_all(bootstrap, topic))


def final_counts(bootstrap: str, topic: str = "word-counts") -> dict[str, int]:
    """Last value per word in ``word-counts`` (or ``topic``)."""
    out: dict[str, int] = {}
    for k, v in read_topic(bootstrap, topic):
        assert k is not None and v is not None
        out[k.decode()] = int(v)
    return out


def changelog_state(bootstrap: str, topic: str = "wordcount-word_counts-changelog") -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for k, v in read_topic(bootstrap, topic):
        assert k is not None
        if v is None:
            state.pop(k, None)
        else:
            state[k] = v
    return state


def wait_counts(
    bootstrap: str,
    expected: dict[str, int],
    *,
    timeout: float = 120.0,
    at_least: bool = False,
    topic: str = "word-counts",
) -> dict[str, int]:
    """Poll the output until it matches (exactly, or >= per word); returns the last reading."""
    deadline = time.monotonic() + timeout
    got: dict[str, int] = {}
    while time.monotonic() < deadline:
        got = final_counts(bootstrap, topic)
        if at_least:
            if set(got) >= set(expected) and all(got[w] >= c for w, c in expected.items()):
                return got
        elif got == expected:
            return got
        time.sleep(1.0)
    return got


# What a worker logs when an offset commit fails (docs/guarantees.md): under at_least_once the records
# since its last commit are handled again by the partition's next owner, so counts may exceed the truth.
COMMIT_FAILED = re.compile(
    r"^.*(?:commit on revoke failed|final commit failed|offset commit failed|commit of task\(s\) .* failed).*$", re.M
)
_STORY = re.compile(r"^.*(?:assigned: |revoked: |SIGTERM|WARNING|ERROR).*$", re.M)


def story(workers: list[Worker]) -> str:
    """Each worker's assignments, revocations and warnings: why the counts came out as they did."""
    return "\n".join(f"{w.name}: {line[:240]}" for w in workers for line in _STORY.findall(w.log()))


def assert_counts_after_rebalances(got: dict[str, int], expected: dict[str, int], workers: list[Worker]) -> None:
    """Exact counts while every commit succeeded. A loaded machine can make a member miss the group's
    deadlines (it is then evicted and its commit fails, and the worker logs it): at_least_once then
    promises no loss, and duplicates only of what was not committed; anything else is a defect."""
    failures = [f"{w.name}: {m.group(0)[:240]}" for w in workers for m in COMMIT_FAILED.finditer(w.log())]
    low = {w: (got.get(w), c) for w, c in expected.items() if got.get(w, 0) < c}
    assert not low, f"{len(low)} words below the truth (lost updates), e.g. {list(low.items())[:5]}\n{story(workers)}"
    assert set(got) == set(expected), f"unexpected words {set(got) - set(expected)}"
    if failures:
        print("\ncommits failed (at_least_once replays the records since each):\n" + "\n".join(failures))
        return
    diff = {w: (got.get(w), c) for w, c in expected.items() if got.get(w) != c}
    assert got == expected, f"{len(diff)} words differ, e.g. {list(diff.items())[:5]}\n{story(workers)}"


def stop_all(workers: Iterator[Worker] | list[Worker]) -> None:
    for w in workers:
        w.stop_quietly()
