"""Backlog case: memory of a worker draining a large backlog (pass-through workload).

A worker started behind a big backlog fetches as fast as it can; if any buffer on the way is
unbounded (fetched records, pending sends, offsets to commit), its memory grows with the backlog
instead of staying flat. Peak RSS alone (the other cases) cannot tell a flat curve from a
growing one, so this case samples it.

``n`` pass-through records (:func:`bench.common.passthrough_records`) are loaded first; then each
side (``bench.apps.passthrough`` worker, then ``bench.raw_passthrough``) drains them to its own
output topic. The orchestrator samples the process's RSS every 0.25 s from outside (so a stuck
event loop is still sampled) next to the latest ``progress`` event the process prints every
0.1 s (records handled so far). RSS is ``Rss`` of ``/proc/PID/smaps_rollup`` (exact); ``VmRSS``
of ``/proc/PID/status`` (approximate per-CPU counters since Linux 6.2) is kept next to it in the
series, and agreed with it in every sample so far.

Reported per side: RSS once the first ``min(100 000, n // 5)`` records are handled (the
"warm" point: connections, buffers and caches are all in use by then), the peak and the minimum
of the samples after it, and ``flat``: every sample after it is within +-20 % of the warm
value. The series, downsampled to ~50 points of (seconds, records, RSS MB, VmRSS MB), is in the detail.
Correct when the output's count and checksum equal the input's.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from bench import common

if TYPE_CHECKING:
    from bench.run import Case

WARM_RECORDS = 100_000
FLAT_BAND = 0.20
SAMPLE_S = 0.25
PROGRESS_S = 0.1
IN_TOPIC = "bl-in"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] backlog: {msg}", flush=True)


def side_argv(case: Case, side: str, n: int) -> tuple[list[str], dict[str, str]]:
    out = f"bl-out-{side}"
    if side == "agentstream":
        return (
            [
                "bench.as_runner",
                "worker",
                "--app",
                "bench.apps.passthrough",
                "--expect",
                str(n),
                "--progress",
                str(PROGRESS_S),
                "--data-dir",
                str(case.scratch / "as"),
                "--logfile",
                str(case.logs / "worker.log"),
            ],
            {"BENCH_IN": IN_TOPIC, "BENCH_OUT": out, "BENCH_APP_ID": "bench-backlog"},
        )
    return (
        [
            "bench.raw_passthrough",
            "--in",
            IN_TOPIC,
            "--out",
            out,
            "--group",
            "raw-backlog",
            "--expect",
            str(n),
            "--progress",
            str(PROGRESS_S),
        ],
        {},
    )


def memory_profile(samples: list[dict[str, Any]], warm: int, t_end: float | None = None) -> dict[str, Any]:
    """Warm RSS, peak/min after it, and whether the curve stays within +-FLAT_BAND of it.

    ``t_end`` (``time.monotonic()``, the clock of the side and of the sampler alike): when the
    side reported the drain done. Later samples are its shutdown (memory freed while the process
    exits, with a progress count that lags), not the drain, so they are left out."""
    live = [s for s in samples if s["rss_mb"] is not None and (t_end is None or s["t"] <= t_end)]
    after = [s for s in live if s["processed"] >= warm]
    if not after:
        return {"warm_records": warm, "flat": None}
    base = after[0]["rss_mb"]
    rest = [s["rss_mb"] for s in after[1:]] or [base]
    t0 = live[0]["t"]
    return {
        "warm_records": warm,
        "rss_at_warm_mb": round(base, 1),
        "peak_after_warm_mb": round(max(rest), 1),
        "min_after_warm_mb": round(min(rest), 1),
        "flat": all(abs(v - base) <= FLAT_BAND * base for v in rest),
        "growth_pct": round(100 * (max(rest) - base) / base, 1),
        "samples": len(live),
        "series": [
            (
                round(s["t"] - t0, 2),
                s["processed"],
                round(s["rss_mb"], 1),
                round(s["vmrss_mb"], 1) if s["vmrss_mb"] is not None else None,
            )
            for s in common.downsample(live)
        ],
    }


def drain(case: Case, side: str, n: int, warm: int) -> dict[str, Any]:
    """Run one side over the whole backlog while sampling its RSS next to its progress."""
    argv, env = side_argv(case, side, n)
    proc = case.spawn(side, argv, env)
    try:
        with common.Sampler(
            lambda: {
                "rss_mb": common.rss_mb(proc.pid),
                "vmrss_mb": common.rss_mb(proc.pid, exact=False),
                "processed": proc.progress,
            },
            SAMPLE_S,
        ) as sampler:
            result = proc.wait(900)
    finally:
        proc.kill()
    result.pop("timeline", None)
    result["memory"] = memory_profile(sampler.samples, warm, result.get("t_end_monotonic"))
    m = result["memory"]
    log(
        f"{side}: {result['records_per_s']:.0f} records/s; RSS at {warm} records {m.get('rss_at_warm_mb')} MB, "
        f"after: peak {m.get('peak_after_warm_mb')} / min {m.get('min_after_warm_mb')} MB, flat={m['flat']}"
    )
    return result


def headline(a: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name, side in (("agentstream", a), ("raw", r)):
        m = side["memory"]
        for key in ("rss_at_warm_mb", "peak_after_warm_mb", "min_after_warm_mb", "flat"):
            row[f"{name}_{key}"] = m.get(key)
    row["summary"] = (
        f"RSS at {a['memory']['warm_records']:,} records -> peak/min after: agentstream "
        f"{row['agentstream_rss_at_warm_mb']} -> {row['agentstream_peak_after_warm_mb']}/"
        f"{row['agentstream_min_after_warm_mb']} MB (flat={row['agentstream_flat']}), raw "
        f"{row['raw_rss_at_warm_mb']} -> {row['raw_peak_after_warm_mb']}/{row['raw_min_after_warm_mb']} MB "
        f"(flat={row['raw_flat']})"
    )
    return row


def case_backlog(case: Case, n: int) -> dict[str, Any]:
    """A :mod:`bench.run` case: drain an ``n``-record backlog, each side, sampling RSS."""
    b = case.broker
    records = common.passthrough_records(n)
    expected = common.checksum(records)
    t = time.perf_counter()
    asyncio.run(common.create_topics(b.bootstrap, [IN_TOPIC, "bl-out-agentstream", "bl-out-raw"]))
    asyncio.run(common.load_topic(b.bootstrap, IN_TOPIC, records))
    log(f"loaded {n} records in {time.perf_counter() - t:.1f}s")
    del records
    warm = min(WARM_RECORDS, n // 5)
    sides = {side: drain(case, side, n, warm) for side in ("agentstream", "raw")}
    for side, res in sides.items():
        got = asyncio.run(common.read_checksum(b.bootstrap, f"bl-out-{side}"))
        res["output"] = list(got)
        res["correct"] = got == expected
    a, r = sides["agentstream"], sides["raw"]
    return {"expected": list(expected), "agentstream": a, "raw": r, "row": headline(a, r)}
