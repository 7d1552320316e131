"""Live numbers of one worker for ``/status`` and ``/metrics``, plus a one-per-second history.

Task counters restart with every rebalance (tasks are rebuilt), so per-agent totals are kept
here: each reading adds what every task processed since the previous reading (tasks are
tracked weakly, by object). The history is a fixed-size ring buffer of samples, enough for the
status page's plots without any storage.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

from ..transport.base import TP
from .tables import part_size, refresh_count

if TYPE_CHECKING:
    from ..app import App
    from ..worker.task import StreamTask
    from ..worker.worker import Worker

log = logging.getLogger("agentstream.web")

__all__ = ["Stats", "tp_name"]


def tp_name(tp: TP) -> str:
    return f"{tp.topic}[{tp.partition}]"


class Stats:
    """Reads the worker's counters; :meth:`run` samples them into :attr:`samples` every ``interval``."""

    def __init__(self, app: "App", worker: "Worker", *, history: int = 300, interval: float = 1.0) -> None:
        self.app = app
        self.worker = worker
        self.interval = interval
        self.samples: deque[dict[str, Any]] = deque(maxlen=max(1, history))
        self.started = time.time()
        self._seen: weakref.WeakKeyDictionary["StreamTask", int] = weakref.WeakKeyDictionary()
        self._totals: dict[str, int] = {a.name: 0 for a in app.agents}
        self._last: tuple[float, dict[str, int]] | None = None

    # -- readings ---------------------------------------------------------------------------------
    def agent_totals(self) -> dict[str, int]:
        """Records handled per agent since the worker started (monotonic, across rebalances)."""
        for task in list(self.worker.tasks.values()):
            seen = self._seen.get(task, 0)
            if task.processed != seen:
                name = task.agent.name
                self._totals[name] = self._totals.get(name, 0) + task.processed - seen
                self._seen[task] = task.processed
        return dict(self._totals)

    async def positions(self) -> dict[TP, tuple[int | None, int | None]]:
        """Per assigned source partition: (high watermark from the last fetch, processed position).

        The position is the next offset to handle: from the tasks' handled offsets, else the
        head of their buffer, else the last commit, else the consumer's fetch position.
        """
        worker, consumer = self.worker, self.worker.consumer
        if consumer is None:
            return {}
        routes = worker.fetcher.routes if worker.fetcher is not None else {}
        out: dict[TP, tuple[int | None, int | None]] = {}
        for tp in sorted(consumer.assignment()):
            tasks = routes.get(tp, [])
            handled = [o for o in (t.committable.get(tp) for t in tasks) if o is not None]
            pos: int | None = min(handled) if handled else None
            if pos is None:
                heads = [t.group.queues[tp].messages[0].offset for t in tasks
                         if tp in t.group.queues and t.group.queues[tp].messages]
                pos = min(heads) if heads else worker.committed_offsets.get(tp)
            if pos is None:
                try:
                    pos = await asyncio.wait_for(consumer.position(tp), 0.2)
                except (asyncio.TimeoutError, Exception):
                    pos = None
            out[tp] = (consumer.highwater(tp), pos)
        return out

    async def lag(self) -> dict[TP, int | None]:
        """Records not yet handled per partition (None until both ends are known)."""
        return {tp: (None if hw is None or pos is None else max(0, hw - pos))
                for tp, (hw, pos) in (await self.positions()).items()}

    def restore(self) -> dict[str, Any]:
        manager = self.worker.tables
        active = [part for table in self.app.tables.values() for part in table.parts.values()
                  if part.active or table.is_global]
        ready = sum(1 for part in active if part.ready)
        return {
            "restoring": bool(manager is not None and manager.restoring),
            "restored_records": manager.restored_records if manager is not None else 0,
            "parts_active": len(active),
            "parts_ready": ready,
            "ready_pct": 100.0 if not active else round(100.0 * ready / len(active), 1),
            "not_ready": sorted(f"{p.table.name}[{p.partition}]" for p in active if not p.ready),
        }

    def tables(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for name, table in sorted(self.app.tables.items()):
            parts = {}
            for p, part in sorted(table.parts.items()):
                parts[str(p)] = {"keys": part_size(part), "active": part.active, "ready": part.ready,
                                 "changelog_offset": part.changelog_offset}
            out[name] = {
                "partitions": table.partitions,
                "local_keys": sum(v["keys"] for v in parts.values() if v["active"] or table.is_global),
                "parts": parts,
            }
        return out

    # -- sampling ---------------------------------------------------------------------------------------
    async def sample(self) -> dict[str, Any]:
        """Take one sample now and append it to the history."""
        now = time.time()
        totals = self.agent_totals()
        if self._last is None:
            rates = {a: 0.0 for a in totals}
        else:
            then, before = self._last
            dt = max(now - then, 1e-3)
            rates = {a: round((n - before.get(a, 0)) / dt, 2) for a, n in totals.items()}
        self._last = (now, totals)
        for table in list(self.app.tables.values()):  # exact key counts, in slices, only after changes
            for part in list(table.parts.values()):
                await refresh_count(part)
        restore = self.restore()
        sample = {
            "t": round(now, 3),
            "rates": rates,
            "lag": {tp_name(tp): n for tp, n in (await self.lag()).items()},
            "restored_records": restore["restored_records"],
            "ready_pct": restore["ready_pct"],
            "tables": {name: t["local_keys"] for name, t in self.tables().items()},
        }
        self.samples.append(sample)
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
            await asyncio.sleep(self.interval)

    def history(self) -> dict[str, Any]:
        """The samples as columns (one list per series, None where a series had no value)."""
        samples = list(self.samples)

        def columns(field: str) -> dict[str, list[Any]]:
            names: list[str] = []
            for s in samples:
                names.extend(n for n in s[field] if n not in names)
            return {n: [s[field].get(n) for s in samples] for n in sorted(names)}

        return {
            "t": [s["t"] for s in samples],
            "records_per_s": columns("rates"),
            "lag": columns("lag"),
            "restore": {"restored_records": [s["restored_records"] for s in samples],
                        "ready_pct": [s["ready_pct"] for s in samples]},
            "table_keys": columns("tables"),
        }

    # -- views ---------------------------------------------------------------------------------------------
    async def status(self, *, history: bool) -> dict[str, Any]:
        worker = self.worker
        a = worker.assignor.assignment
        totals = self.agent_totals()
        rates = self.samples[-1]["rates"] if self.samples else {}
        errors = worker.errors
        positions = await self.positions()
        out: dict[str, Any] = {
            "app": self.app.id,
            "worker": {
                "address": self.worker.web.address if self.worker.web is not None else None,
                "pid": os.getpid(),
                "uptime": round(time.time() - self.started, 1),
                "started": worker.started.is_set(),
                "running": worker.assigned.is_set(),
                "crashed": None if worker.crashed is None else repr(worker.crashed),
                "commits": worker.commits,
                "seconds_since_commit": round(time.monotonic() - worker.last_commit, 2),
            },
            "assignment": {"generation": a.generation, "active": a.active, "standby": a.standby,
                           "leader": worker.assignor.is_leader,
                           "owners": {str(p): h for p, h in sorted(a.owners.items())}},
            "agents": {name: {"processed": n, "records_per_s": rates.get(name, 0.0)} for name, n in totals.items()},
            "tasks": [{"id": str(t.id), "agent": t.agent.name, "processed": t.processed,
                       "partitions": [tp_name(tp) for tp in t.partitions]} for t in worker.tasks.values()],
            "lag": {tp_name(tp): {"highwater": hw, "position": pos,
                                  "lag": None if hw is None or pos is None else max(0, hw - pos)}
                    for tp, (hw, pos) in positions.items()},
            "tables": self.tables(),
            "restore": self.restore(),
            "errors": {"decode": errors.decode_errors, "agent": errors.agent_errors,
                       "dead_lettered": errors.dead_lettered},
            "samples": len(self.samples),
        }
        if history:
            out["history"] = self.history()
        return out

    async def prometheus(self) -> str:
        """Prometheus text exposition format 0.0.4."""
        worker = self.worker
        m = _Metrics()
        m.family("agentstream_records_processed_total", "counter",
                 "Records handled per agent since the worker started.")
        for agent, n in sorted(self.agent_totals().items()):
            m.sample("agentstream_records_processed_total", n, agent=agent)
        m.family("agentstream_task_records_processed", "gauge",
                 "Records handled per task since its assignment (tasks restart at each rebalance).")
        for t in worker.tasks.values():
            m.sample("agentstream_task_records_processed", t.processed, task=str(t.id), agent=t.agent.name)
        positions = await self.positions()
        m.family("agentstream_consumer_highwater", "gauge", "Partition end offset seen in the last fetch.")
        for tp, (hw, _) in positions.items():
            if hw is not None:
                m.sample("agentstream_consumer_highwater", hw, topic=tp.topic, partition=tp.partition)
        m.family("agentstream_consumer_lag", "gauge", "Records not yet handled: high watermark minus position.")
        for tp, (hw, pos) in positions.items():
            if hw is not None and pos is not None:
                m.sample("agentstream_consumer_lag", max(0, hw - pos), topic=tp.topic, partition=tp.partition)
        m.family("agentstream_table_keys", "gauge", "Keys per local table partition (RocksDB: an estimate).")
        m.family("agentstream_table_partition_ready", "gauge", "1 when the table partition is restored and serving.")
        for name, table in sorted(self.app.tables.items()):
            for p, part in sorted(table.parts.items()):
                role = "active" if part.active or table.is_global else "standby"
                m.sample("agentstream_table_keys", part_size(part), table=name, partition=p, role=role)
                m.sample("agentstream_table_partition_ready", int(part.ready), table=name, partition=p, role=role)
        restore = self.restore()
        m.family("agentstream_table_restored_records_total", "counter", "Changelog records replayed into stores.")
        m.sample("agentstream_table_restored_records_total", restore["restored_records"])
        m.family("agentstream_table_restoring", "gauge", "1 while tables are being restored.")
        m.sample("agentstream_table_restoring", int(restore["restoring"]))
        m.family("agentstream_commits_total", "counter", "Commits (tables, producer, offsets) done.")
        m.sample("agentstream_commits_total", worker.commits)
        errors = worker.errors
        for metric, value, help_ in (
            ("agentstream_decode_errors_total", errors.decode_errors, "Records that failed to decode."),
            ("agentstream_agent_errors_total", errors.agent_errors, "Agent exceptions while handling a record."),
            ("agentstream_dead_lettered_total", errors.dead_lettered, "Records copied to the dead-letter topic."),
        ):
            m.family(metric, "counter", help_)
            m.sample(metric, value)
        a = worker.assignor.assignment
        m.family("agentstream_assigned_partitions", "gauge", "Partition numbers this worker owns, by role.")
        m.sample("agentstream_assigned_partitions", len(a.active), role="active")
        m.sample("agentstream_assigned_partitions", len(a.standby), role="standby")
        m.family("agentstream_rebalances_total", "counter", "Assignments received.")
        m.sample("agentstream_rebalances_total", a.generation)
        return m.render()


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
