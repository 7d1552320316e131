"""The benchmark's pure helpers (figures only: nothing here times anything)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import common
from bench.backlog_case import memory_profile
from bench.run import _merge_rows
from bench.scale_case import assignment


def test_percentiles_nearest_rank() -> None:
    stats = common.percentiles([float(i) for i in range(1, 101)], qs=(50, 99))
    assert stats["p50"] == 51.0 and stats["p99"] == 100.0 and stats["max"] == 100.0
    assert stats["mean"] == 50.5
    assert common.percentiles([]) == {}


def test_downsample_keeps_ends() -> None:
    series = list(range(1000))
    out = common.downsample(series, 50)
    assert len(out) == 50 and out[0] == 0 and out[-1] == 999
    assert common.downsample([1, 2, 3], 50) == [1, 2, 3]


def _samples(rss: list[float], step: int = 10) -> list[dict[str, Any]]:
    return [{"t": i * 0.25, "processed": i * step, "rss_mb": v, "vmrss_mb": v} for i, v in enumerate(rss)]


def test_memory_profile_flat_and_growing() -> None:
    flat = memory_profile(_samples([10, 30, 50, 52, 48, 55]), warm=20)
    assert flat["rss_at_warm_mb"] == 50 and flat["peak_after_warm_mb"] == 55 and flat["flat"] is True
    growing = memory_profile(_samples([10, 30, 50, 60, 70]), warm=20)
    assert growing["flat"] is False and growing["growth_pct"] == 40.0
    assert memory_profile(_samples([10, 20]), warm=1000)["flat"] is None  # never got there


def test_memory_profile_leaves_out_the_shutdown_after_the_drain() -> None:
    """Memory freed while the process exits (after the side reported its end) is not the drain."""
    samples = _samples([10, 30, 50, 52, 48, 55, 20])  # the last sample: t=1.5, the process exiting
    assert memory_profile(samples, warm=20)["flat"] is False
    drained = memory_profile(samples, warm=20, t_end=1.3)
    assert drained["flat"] is True and drained["min_after_warm_mb"] == 48


class _Worker:
    def __init__(self, *events: dict[str, Any]) -> None:
        self.events = list(events)

    def last(self, *kinds: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e["kind"] in kinds), None)


def test_scale_assignment_needs_a_disjoint_cover() -> None:
    a = {"kind": "assigned", "partitions": [0, 2]}
    b = {"kind": "assigned", "partitions": [1, 3]}
    assert assignment([_Worker(a), _Worker(b)], 4) == [[0, 2], [1, 3]]  # type: ignore[list-item]
    assert assignment([_Worker(a), _Worker(b, {"kind": "revoked"})], 4) is None  # type: ignore[list-item]
    assert assignment([_Worker(a), _Worker({"kind": "assigned", "partitions": [0, 1, 2, 3]})], 4) is None  # type: ignore[list-item]
    assert assignment([_Worker(a), _Worker(b)], 8) is None  # type: ignore[list-item]  # 4 of 8 partitions uncovered


def test_merge_rows_keeps_other_cases_of_the_same_size(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    out.write_text(
        json.dumps(
            {
                "quick": False,
                "results": [
                    {"case": "scale-wordcount", "v": 1},
                    {"case": "passthrough", "v": 1},
                    {"case": "scale", "v": 0},
                ],
            }
        )
    )  # a case no longer run: dropped
    merged = _merge_rows(out, [{"case": "latency", "v": 2}, {"case": "passthrough", "v": 2}], quick=False)
    assert merged == [{"case": "passthrough", "v": 2}, {"case": "latency", "v": 2}, {"case": "scale-wordcount", "v": 1}]
    assert _merge_rows(out, [{"case": "latency"}], quick=True) == [{"case": "latency"}]


def test_scale_cores_split_the_machine_into_its_users() -> None:
    from bench.scale_case import cores_used, median_pair

    cores = cores_used(workers=1.2, broker=0.3, orchestrator=0.1, busy=1.9)
    assert cores == {"workers": 1.2, "broker": 0.3, "orchestrator": 0.1, "other": 0.3, "idle": 0.1}
    assert cores_used(1.0, None, 0.1, 1.5)["broker"] is None  # not sampled: nothing made up
    pairs = [(1.5, {"r": 1}, {"r": 2}), (1.1, {"r": 3}, {"r": 4}), (1.9, {"r": 5}, {"r": 6})]
    assert median_pair(pairs)[0] == 1.5


class _Builder:
    def __init__(self, room: int) -> None:
        self.records: list[bytes] = []
        self.room = room

    def append(self, key: bytes, value: bytes, timestamp: None) -> object | None:
        if len(self.records) >= self.room:
            return None
        self.records.append(key)
        return object()

    def record_count(self) -> int:
        return len(self.records)


class _Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int, list[bytes]]] = []

    def create_batch(self) -> _Builder:
        return _Builder(room=2)

    async def send_batch(self, batch: _Builder, topic: str, partition: int) -> Any:
        import asyncio

        self.sent.append((topic, partition, batch.records))
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


async def test_batch_sender_ships_full_and_lingered_batches_and_flushes_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    from bench import raw_loop
    from bench.raw_loop import BatchSender

    # The sender's own clock, moved by the test: a loaded machine that stalls the test between
    # two steps must not make "c" linger before the test says so.
    now = [1000.0]
    monkeypatch.setattr(raw_loop, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    producer = _Producer()
    sender = BatchSender(producer, {"t": 1}, linger=0.05)  # type: ignore[arg-type]
    assert sender.due_in() is None
    for key in (b"a", b"b", b"c"):
        await sender.send("t", key, b"v")
    assert producer.sent == [("t", 0, [b"a", b"b"])]  # full: shipped at once
    now[0] += 0.01
    due = sender.due_in()
    assert due is not None and 0 < due <= 0.05
    await sender.ship()
    assert len(producer.sent) == 1  # "c" has not lingered yet
    now[0] += 0.05
    await sender.ship()
    assert producer.sent[-1] == ("t", 0, [b"c"]) and sender.due_in() is None
    await sender.send("t", b"d", b"v")
    await sender.flush()  # a commit sends everything, lingered or not
    assert producer.sent[-1] == ("t", 0, [b"d"])


# -- the broker kinds and the Kafka Streams side (issue 41) ------------------------------------------


def test_broker_kind_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import brokers

    monkeypatch.delenv("BENCH_BROKER", raising=False)
    assert brokers.kind() == "tansu" and brokers.replication_factor() == 1
    monkeypatch.setenv("BENCH_BROKER", "dev")
    assert brokers.kind() == "tansu"
    monkeypatch.setenv("BENCH_BROKER", "Kafka")
    assert brokers.kind() == "kafka" and brokers.replication_factor() == 3
    monkeypatch.setenv("BENCH_BROKER", "redpanda")
    with pytest.raises(SystemExit, match="BENCH_BROKER='redpanda'"):
        brokers.kind()


def test_broker_cpu_of_several_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("BENCH_BROKER_PID", "12, 34,0,")
    assert common.broker_pids_from_env() == [12, 34]
    monkeypatch.setenv("BENCH_BROKER_PID", "")
    assert common.broker_pids_from_env() == []
    own = common.proc_cpu_seconds(os.getpid())
    both = common.proc_cpu_seconds([os.getpid(), os.getpid()])
    assert own is not None and both is not None and both >= 2 * own  # summed (CPU only grows in between)
    assert common.proc_cpu_seconds([]) is None
    assert common.proc_cpu_seconds([os.getpid(), 2**22 + 12345]) is None  # a node gone: no figure, not a partial one


def test_kstreams_ratios_are_agentstream_over_kafka_streams() -> None:
    from bench.run import kstreams_fields

    a = {"records_per_s": 2000.0, "records_per_cpu_s": 1000.0, "peak_rss_mb": 60.0}
    ks = {"records_per_s": 1000.0, "records_per_cpu_s": 4000.0, "peak_rss_mb": 300.0, "correct": True}
    row = kstreams_fields(a, ks)
    assert row["kstreams_ratio"] == 2.0  # agentstream twice as fast
    assert row["kstreams_cpu_ratio"] == 0.25 and row["kstreams_cpu_per_record_ratio"] == 4.0  # 4x its CPU per record
    assert row["kstreams_rss_ratio"] == 0.2 and row["kstreams_correct"] is True


def test_kstreams_side_skipped_or_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bench import kstreams
    from bench.run import run_kstreams

    class _Case:
        name, scratch = "wordcount", tmp_path

        def run(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            raise AssertionError("must not run")

    monkeypatch.setenv("BENCH_KSTREAMS", "0")
    assert run_kstreams(_Case(), "wordcount") is None  # type: ignore[arg-type]
    monkeypatch.delenv("BENCH_KSTREAMS")
    monkeypatch.setenv("PATH", str(tmp_path))  # no java, no mvn
    with pytest.raises(kstreams.KStreamsUnavailable, match="not on PATH"):
        kstreams.classpath()
    skipped = run_kstreams(_Case(), "wordcount")  # type: ignore[arg-type]
    assert skipped is not None and "not on PATH" in skipped["skipped"]


def test_steady_rate_is_the_rate_between_a_fifth_and_four_fifths_of_the_records() -> None:
    # a slow start (100 records in the first 2 s), then 1,000/s, then a slow tail
    timeline = [(0.0, 0), (2.0, 100), (3.0, 1100), (4.0, 2100), (5.0, 3100), (6.0, 4100), (9.0, 4200)]
    assert common.steady_rate(timeline, 4200) == pytest.approx(1000.0)


def test_steady_rate_needs_the_span_covered() -> None:
    assert common.steady_rate([(0.0, 0), (1.0, 100)], 1000) is None
    assert common.steady_rate([], 1000) is None
