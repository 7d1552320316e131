"""The benchmark's pure helpers (figures only: nothing here times anything)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
