"""Live numbers of one worker for ``/status`` and ``/metrics``, plus a one-per-second history.

Everything here is read from the worker's published status snapshot
(:class:`agentstream.worker.status.WorkerStatus`), never from its internals. The history is a
fixed-size ring buffer of samples, enough for the status page's plots without any storage.

The history's columns grow with partitions x samples (3,000 lag series x 300 samples at 1,000
partitions), so they are built in one linear pass, at most once per sample whoever asks, and the
status page asks only for the samples it has not seen (``since``) after its first load.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..clock import Clock, clock_for
from ..transport.base import TP
from ..worker.descriptors import descriptor_limit, open_descriptors
from ..worker.status import WorkerStatus

if TYPE_CHECKING:
    from ..app import App
    from ..worker.worker import Worker

log = logging.getLogger("agentstream.web")

__all__ = ["Stats", "tp_name"]


def tp_name(tp: TP) -> str:
    return f"{tp.topic}[{tp.partition}]"


class Stats:
    """Reads the worker's status; :meth:`run` samples it into :attr:`samples` every ``interval``."""

    def __init__(
        self, app: App, worker: Worker, *, address: Callable[[], str], history: int = 300, interval: float = 1.0
    ) -> None:
        self.app = app
        self.worker = worker
        self.address = address
        self.interval = interval
        self.samples: deque[dict[str, Any]] = deque(maxlen=max(1, history))
        self.clock: Clock = clock_for(app)  # the harness's virtual time samples on virtual seconds
        self.started = self.clock.time()
        self._last: tuple[float, dict[str, int]] | None = None
        self._taken = 0  # samples taken so far: the full history is built once per sample
        self._full: tuple[int, dict[str, Any]] | None = None

    # -- sampling ---------------------------------------------------------------------------------------
    async def sample(self) -> dict[str, Any]:
        """Take one sample now and append it to the history."""
        status = await self.worker.status()  # key counts: RocksDB's estimates, never a scan
        now = self.clock.time()
        totals = dict(status.agents)
        if self._last is None:
            rates = {a: 0.0 for a in totals}
        else:
            then, before = self._last
            dt = max(now - then, 1e-3)
            rates = {a: round((n - before.get(a, 0)) / dt, 2) for a, n in totals.items()}
        self._last = (now, totals)
        sample = {
            "t": round(now, 3),
            "rates": rates,
            "lag": {tp_name(p.tp): p.lag for p in status.partitions},
            "restored_records": status.restore.restored_records,
            "ready_pct": status.restore.ready_pct,
            "tables": {t.name: t.local_keys for t in status.tables},
        }
        self.samples.append(sample)
        self._taken += 1
        return sample

    async def run(self) -> None:
        """Sample every ``interval`` seconds until cancelled; a failed sample is logged and skipped."""
        while True:
            try:
                await self.sample()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("status sample failed: %r", exc)
            await self.clock.sleep(self.interval)

    def history(self, since: float | None = None) -> dict[str, Any]:
        """The samples (those taken after ``since``, when given) as columns: one list per series,
        None where a series had no value; ``size`` is how many samples the history keeps."""
        if since is None:
            cached = self._full
            if cached is None or cached[0] != self._taken:
                cached = self._full = (self._taken, _columns(list(self.samples), self.samples.maxlen))
            return cached[1]
        newer: list[dict[str, Any]] = []
        for s in reversed(self.samples):  # the newest first: a poll needs the last one or two
            if s["t"] <= since:
                break
            newer.append(s)
        newer.reverse()
        return _columns(newer, self.samples.maxlen)

    # -- views ---------------------------------------------------------------------------------------------
    async def status(self, *, history: bool, since: float | None = None) -> dict[str, Any]:
        st = await self.worker.status()
        a = st.assignment
        rates = self.samples[-1]["rates"] if self.samples else {}
        out: dict[str, Any] = {
            "app": st.app,
            "worker": {
                "address": self.address(),
                "pid": os.getpid(),
                "uptime": round(self.clock.time() - self.started, 1),
                "state": st.state,
                "started": st.started,
                "running": st.running,
                "crashed": st.crashed,
                "commits": st.commits,
                "seconds_since_commit": st.seconds_since_commit,
                "open_fds": open_descriptors(),
                "fd_limit": descriptor_limit(),
            },
            "assignment": {
                "generation": a.generation,
                "active": list(a.active),
                "standby": list(a.standby),
                "leader": a.leader,
                "owners": {str(p): h for p, h in a.owners},
            },
            "agents": {name: {"processed": n, "records_per_s": rates.get(name, 0.0)} for name, n in st.agents},
            "tasks": [
                {
                    "id": t.id,
                    "agent": t.agent,
                    "processed": t.processed,
                    "partitions": [tp_name(tp) for tp in t.partitions],
                }
                for t in st.tasks
            ],
            "lag": {
                tp_name(p.tp): {"highwater": p.highwater, "position": p.position, "lag": p.lag} for p in st.partitions
            },
            "tables": tables_json(st),
            "restore": restore_json(st),
            "errors": {"decode": st.errors.decode, "agent": st.errors.agent, "dead_lettered": st.errors.dead_lettered},
            "samples": len(self.samples),
        }
        if history:
            out["history"] = self.history(since)
        return out

    async def prometheus(self) -> str:
        """Prometheus text exposition format 0.0.4."""
        st = await self.worker.status()
        m = _Metrics()
        m.family(
            "agentstream_records_processed_total", "counter", "Records handled per agent since the worker started."
        )
        for agent, n in st.agents:
            m.sample("agentstream_records_processed_total", n, agent=agent)
        m.family(
            "agentstream_task_records_processed",
            "gauge",
            "Records handled per task since its assignment (tasks restart at each rebalance).",
        )
        for t in st.tasks:
            m.sample("agentstream_task_records_processed", t.processed, task=t.id, agent=t.agent)
        m.family("agentstream_consumer_highwater", "gauge", "Partition end offset seen in the last fetch.")
        for p in st.partitions:
            if p.highwater is not None:
                m.sample("agentstream_consumer_highwater", p.highwater, topic=p.tp.topic, partition=p.tp.partition)
        m.family("agentstream_consumer_lag", "gauge", "Records not yet handled: high watermark minus position.")
        for p in st.partitions:
            if p.lag is not None:
                m.sample("agentstream_consumer_lag", p.lag, topic=p.tp.topic, partition=p.tp.partition)
        m.family(
            "agentstream_table_keys",
            "gauge",
            "Keys per local table partition (RocksDB: its estimate-num-keys, which counts overwrites until compaction).",
        )
        m.family("agentstream_table_partition_ready", "gauge", "1 when the table partition is restored and serving.")
        for table in st.tables:
            for part in table.parts:
                role = "active" if part.active or table.is_global else "standby"
                if part.keys is not None:
                    m.sample("agentstream_table_keys", part.keys, table=table.name, partition=part.partition, role=role)
                m.sample(
                    "agentstream_table_partition_ready",
                    int(part.ready),
                    table=table.name,
                    partition=part.partition,
                    role=role,
                )
        m.family(
            "agentstream_rocksdb_memory_bytes",
            "gauge",
            "Bytes RocksDB holds in memory per table partition, by kind: memtables, table_readers, block_cache.",
        )
        for table in st.tables:
            for part in table.parts:
                role = "active" if part.active or table.is_global else "standby"
                for kind, size in part.memory:
                    m.sample(
                        "agentstream_rocksdb_memory_bytes",
                        size,
                        table=table.name,
                        partition=part.partition,
                        role=role,
                        kind=kind,
                    )
        m.family("agentstream_table_restored_records_total", "counter", "Changelog records replayed into stores.")
        m.sample("agentstream_table_restored_records_total", st.restore.restored_records)
        m.family("agentstream_table_restoring", "gauge", "1 while tables are being restored.")
        m.sample("agentstream_table_restoring", int(st.restore.restoring))
        fds = open_descriptors()
        if fds is not None:
            m.family("agentstream_open_fds", "gauge", "File descriptors the worker process holds.")
            m.sample("agentstream_open_fds", fds)
        limit = descriptor_limit()
        if limit is not None:
            m.family("agentstream_max_fds", "gauge", "The process's soft limit on open file descriptors.")
            m.sample("agentstream_max_fds", limit)
        m.family("agentstream_commits_total", "counter", "Commits (tables, producer, offsets) done.")
        m.sample("agentstream_commits_total", st.commits)
        for metric, value, help_ in (
            ("agentstream_decode_errors_total", st.errors.decode, "Records that failed to decode."),
            ("agentstream_agent_errors_total", st.errors.agent, "Agent exceptions while handling a record."),
            ("agentstream_dead_lettered_total", st.errors.dead_lettered, "Records copied to the dead-letter topic."),
        ):
            m.family(metric, "counter", help_)
            m.sample(metric, value)
        a = st.assignment
        m.family("agentstream_assigned_partitions", "gauge", "Partition numbers this worker owns, by role.")
        m.sample("agentstream_assigned_partitions", len(a.active), role="active")
        m.sample("agentstream_assigned_partitions", len(a.standby), role="standby")
        m.family("agentstream_rebalances_total", "counter", "Assignments received.")
        m.sample("agentstream_rebalances_total", a.generation)
        return m.render()


def _columns(samples: list[dict[str, Any]], size: int | None) -> dict[str, Any]:
    """``samples`` as columns, in one pass per field (series names kept in a dict, not a list:
    a list's membership test made this quadratic in the number of series)."""

    def columns(field: str) -> dict[str, list[Any]]:
        names: dict[str, None] = {}
        for s in samples:
            names.update(dict.fromkeys(s[field]))
        return {n: [s[field].get(n) for s in samples] for n in sorted(names)}

    return {
        "t": [s["t"] for s in samples],
        "size": size,
        "records_per_s": columns("rates"),
        "lag": columns("lag"),
        "restore": {
            "restored_records": [s["restored_records"] for s in samples],
            "ready_pct": [s["ready_pct"] for s in samples],
        },
        "table_keys": columns("tables"),
    }


def tables_json(st: WorkerStatus) -> dict[str, dict[str, Any]]:
    return {
        t.name: {
            "partitions": t.partitions,
            "local_keys": t.local_keys,
            "parts": {
                str(p.partition): {
                    "keys": p.keys,
                    "active": p.active,
                    "ready": p.ready,
                    "changelog_offset": p.changelog_offset,
                    "memory": dict(p.memory),
                }
                for p in t.parts
            },
        }
        for t in st.tables
    }


def restore_json(st: WorkerStatus) -> dict[str, Any]:
    r = st.restore
    return {
        "restoring": r.restoring,
        "restored_records": r.restored_records,
        "parts_active": r.parts_active,
        "parts_ready": r.parts_ready,
        "ready_pct": r.ready_pct,
        "not_ready": list(r.not_ready),
    }


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Metrics:
    """Collects families in order; samples are grouped under their family's HELP/TYPE lines."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def family(self, name: str, kind: str, help_: str) -> None:
        self._families.setdefault(name, (kind, help_, []))

    def sample(self, name: str, value: float, **labels: object) -> None:
        label = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        self._families[name][2].append(f"{name}{{{label}}} {value}" if label else f"{name} {value}")

    def render(self) -> str:
        lines: list[str] = []
        for name, (kind, help_, samples) in self._families.items():
            lines.append(f"# HELP {name} " + help_.replace("\\", "\\\\").replace("\n", "\\n"))
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)
        return "\n".join(lines) + "\n"
