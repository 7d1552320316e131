"""Final window results (``final_results()``) on the 3-broker Kafka cluster while workers die and join.

Worker processes of ``tests/integration/final_windows_app.py`` count clicks per user in 0.5 s tumbling
windows of event time and send one final per user and window when it closes. While the windows close:
a second worker joins (scale-out), the first is killed with SIGKILL mid-stream (its partitions go to the
survivor, the next owner, which restores them), then a third joins. Counted per window on the finals
topic, read as a downstream reader would:

- ``exactly_once`` (read_committed): every window exactly once, with its true count;
- ``at_least_once``: every window at least once (never none); a duplicate only for a window whose
  partition a killed worker had.

The same app counts the clicks per user and session (gap 0.25 s of the records' timestamps) too, with
final results: the same counts hold per session, with the session's bounds.

Each run prints its figures for docs/guarantees.md.
"""

from __future__ import annotations

import asyncio
import collections
import random
import re
import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped,unused-ignore]

from tests.kafka_cluster.shared import ClusterInfo

from .cluster import Worker, stop_all
from .test_kafka_eos import ARTIFACTS, RUNNING, _read

APP = "tests.integration.final_windows_app"
USERS = [f"u{i}" for i in range(12)]
RECORDS = 1200  # event time 0 .. 12 s: 24 windows of 0.5 s per user
STEP_MS = 10
WINDOW_MS = 500
FLUSH_TS = 1000.0  # one click per user far ahead: closes every earlier window in every partition
SESSION_GAP_MS = 250
# record timestamps (the session table's time): the clicks' ts after this base, an hour back
BASE_MS = (round(time.time()) - 3600) * 1000


def clicks() -> list[tuple[str, float]]:
    rnd = random.Random(42)
    return [(rnd.choice(USERS), i * STEP_MS / 1000) for i in range(RECORDS)]


def true_finals(records: list[tuple[str, float]]) -> dict[tuple[str, int], int]:
    """(user, window start ms) -> clicks in it."""
    out: collections.Counter[tuple[str, int]] = collections.Counter()
    for user, ts in records:
        ms = round(ts * 1000)
        out[(user, ms - ms % WINDOW_MS)] += 1
    return dict(out)


def true_sessions(records: list[tuple[str, float]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(user, session start ms) -> (session end ms, clicks in it): a click more than the gap after
    the user's previous one starts a session (each user's clicks come in time order)."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    current: dict[str, int] = {}
    for user, ts in records:
        ms = BASE_MS + round(ts * 1000)
        start = current.get(user)
        if start is not None and ms - out[(user, start)][0] <= SESSION_GAP_MS:
            out[(user, start)] = (ms, out[(user, start)][1] + 1)
        else:
            current[user] = ms
            out[(user, ms)] = (ms, 1)
    return out


class Feed(threading.Thread):
    """Sends ``records`` (in order: each partition's event time only goes up) in chunks with pauses, so
    windows close all along while workers die and join; :attr:`sent` counts the acknowledged ones."""

    def __init__(self, bootstrap: str, topic: str, records: list[tuple[str, float]], chunk: int, pause: float):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.records, self.chunk, self.pause = bootstrap, topic, records, chunk, pause
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._produce())
        except BaseException as exc:  # surfaced by finish()
            self.error = exc

    async def _produce(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
        await producer.start()
        try:
            for i in range(0, len(self.records), self.chunk):
                for user, ts in self.records[i : i + self.chunk]:
                    await producer.send(
                        self.topic, orjson.dumps({"ts": ts}), key=user.encode(), timestamp_ms=BASE_MS + round(ts * 1000)
                    )
                await producer.flush()
                self.sent = min(len(self.records), i + self.chunk)
                await asyncio.sleep(self.pause)
        finally:
            await producer.stop()

    def wait_sent(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.sent < n:
            assert self.is_alive() or self.sent >= n, f"the feed stopped after {self.sent}: {self.error!r}"
            assert time.monotonic() < deadline, f"the feed sent {self.sent} of {n} in {timeout}s"
            time.sleep(0.02)

    def finish(self) -> None:
        self.join(60)
        assert not self.is_alive(), "the feed did not finish"
        if self.error is not None:
            raise self.error


def produce(bootstrap: str, topic: str, records: list[tuple[str, float]]) -> None:
    feed = Feed(bootstrap, topic, records, chunk=len(records), pause=0)
    feed.start()
    feed.finish()


def finals_by_window(bootstrap: str, topic: str, committed: bool) -> dict[tuple[str, int], list[int]]:
    """(user, window start ms) -> the counts of the finals sent for it, in order."""
    records = asyncio.run(_read(bootstrap, topic, "read_committed" if committed else "read_uncommitted"))
    out: dict[tuple[str, int], list[int]] = collections.defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        final = orjson.loads(r.value)
        assert r.key.decode() == final["key"]
        assert round((final["end"] - final["start"]) * 1000) == WINDOW_MS
        out[(final["key"], round(final["start"] * 1000))].append(final["value"])
    return dict(out)


def finals_by_session(bootstrap: str, topic: str, committed: bool) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """(user, session start ms) -> the (end ms, count) of the finals sent for it, in order."""
    records = asyncio.run(_read(bootstrap, topic, "read_committed" if committed else "read_uncommitted"))
    out: dict[tuple[str, int], list[tuple[int, int]]] = collections.defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        final = orjson.loads(r.value)
        assert r.key.decode() == final["key"]
        out[(final["key"], round(final["start"] * 1000))].append((round(final["end"] * 1000), final["value"]))
    return dict(out)


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_one_final_per_window_across_kill9_and_scale_out(
    guarantee: str, kafka: ClusterInfo, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app_id = f"final-{guarantee[:3]}-{uuid.uuid4().hex[:8]}"
    logs = ARTIFACTS / request.node.name
    records = clicks()
    expected = true_finals(records)
    expected_sessions = true_sessions(records)
    eos = guarantee == "exactly_once"
    topic_in, topic_out, topic_sessions = f"{app_id}-clicks", f"{app_id}-finals", f"{app_id}-session-finals"
    env = {"FINAL_APP_ID": app_id, "FINAL_GUARANTEE": guarantee}

    def start(name: str) -> Worker:
        return Worker(name, kafka.url, tmp_path / name, logs, app=APP, env=env)

    third = len(records) // 3
    began = time.monotonic()
    a = start("a")
    everyone = [a]
    try:
        a.wait_log(RUNNING, timeout=60)
        produce(kafka.bootstrap, topic_in, records[:third])  # windows close on a
        b = start("b")  # scale-out while a closes windows
        everyone.append(b)
        b.wait_log(RUNNING, timeout=60)
        feed = Feed(kafka.bootstrap, topic_in, records[third:], chunk=20, pause=0.05)
        feed.start()
        feed.wait_sent(len(records) // 3)
        a.kill()  # kill -9 mid-stream, windows closing: b becomes the next owner of a's partitions
        c = start("c")  # and the group scales out again while windows close
        everyone.append(c)
        feed.finish()
        produce(kafka.bootstrap, topic_in, [(user, FLUSH_TS) for user in USERS])
        deadline = time.monotonic() + 60
        got: dict[tuple[str, int], list[int]] = {}
        while time.monotonic() < deadline:
            got = finals_by_window(kafka.bootstrap, topic_out, eos)
            if set(expected) <= set(got) and set(expected_sessions) <= set(
                finals_by_session(kafka.bootstrap, topic_sessions, eos)
            ):
                break
            dead = [w for w in (b, c) if w.proc.poll() is not None]
            assert not dead, f"{dead[0].name} exited:\n{dead[0].log()[-3000:]}"
            time.sleep(0.5)
        for w in (b, c):
            assert w.terminate() == 0, w.log()[-3000:]
        got = finals_by_window(kafka.bootstrap, topic_out, eos)
        got_sessions = finals_by_session(kafka.bootstrap, topic_sessions, eos)
        # what the survivors sent at once after restoring partitions (at_least_once: finals of windows
        # that closed on the killed worker without an acknowledged final)
        after_restore = sum(
            int(n) for w in (b, c) for n in re.findall(r"(\d+) final results due after restore", w.log())
        )
    finally:
        stop_all(everyone)
    missing = sorted(set(expected) - set(got))
    assert not missing, f"{len(missing)} windows never got a final, e.g. {missing[:5]}"
    unexpected = sorted(set(got) - set(expected))
    assert not unexpected, f"finals for windows that had no click or never closed: {unexpected[:5]}"
    per_window = collections.Counter(len(v) for v in got.values())
    duplicated = sum(len(v) - 1 for v in got.values())
    if eos:
        assert per_window == {1: len(expected)}, f"finals per window: {dict(per_window)}"
        wrong = {w: (v, expected[w]) for w, v in got.items() if v != [expected[w]]}
        assert not wrong, f"finals differing from the true count: {list(wrong.items())[:5]}"
    else:
        assert min(per_window) >= 1
        # a window can only be counted twice by re-processing after the crash: never fewer clicks
        short = {w: (v, expected[w]) for w, v in got.items() if min(v) < expected[w]}
        assert not short, f"finals below the true count: {list(short.items())[:5]}"
    missing_sessions = sorted(set(expected_sessions) - set(got_sessions))
    assert not missing_sessions, f"{len(missing_sessions)} sessions never got a final, e.g. {missing_sessions[:5]}"
    unexpected_sessions = sorted(set(got_sessions) - set(expected_sessions))
    assert not unexpected_sessions, f"finals for sessions that never were or never closed: {unexpected_sessions[:5]}"
    per_session = collections.Counter(len(v) for v in got_sessions.values())
    wrong_bounds = {s: v for s, v in got_sessions.items() if any(end != expected_sessions[s][0] for end, _ in v)}
    assert not wrong_bounds, f"session finals with other bounds: {list(wrong_bounds.items())[:5]}"
    if eos:
        assert per_session == {1: len(expected_sessions)}, f"finals per session: {dict(per_session)}"
        wrong = {s: v for s, v in got_sessions.items() if v != [expected_sessions[s]]}
        assert not wrong, f"session finals differing from the true count: {list(wrong.items())[:5]}"
    else:
        short = {s: v for s, v in got_sessions.items() if min(n for _, n in v) < expected_sessions[s][1]}
        assert not short, f"session finals below the true count: {list(short.items())[:5]}"
    print(
        f"\nfinal results, {guarantee} on Kafka: {len(records)} clicks, {len(expected)} windows, 1 kill -9, "
        f"scale-out 1 -> 2 -> (kill) 1 -> 2; finals per window {dict(sorted(per_window.items()))}, "
        f"duplicates {duplicated}, missing 0; {after_restore} sent right after a restore "
        f"({time.monotonic() - began:.0f}s); {len(expected_sessions)} sessions (gap {SESSION_GAP_MS} ms), finals per "
        f"session {dict(sorted(per_session.items()))}"
    )
