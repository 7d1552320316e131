"""Where the worker tells the app's signals and sensors what happened (Faust's signals and
Sensor hooks). One function per moment, so the worker's call sites stay one line each and the
App stays a declaration: the receivers and sensors are user code the App only lists."""

from __future__ import annotations

import weakref
from typing import Any

from ..transport.base import TP

__all__ = ["worker_init", "revoked", "assigned", "rebalance_complete", "committed", "before_shutdown"]

_rebalance_state: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()
_last_offsets: weakref.WeakKeyDictionary[Any, dict[TP, int]] = weakref.WeakKeyDictionary()
# worker -> task id -> (the task, its processed count at the last commit). Keyed by worker (tasks,
# compiled classes, cannot be weakly referenced); a task object that is not the one seen last
# (recreated after a rebalance) counts from 0.
_processed: weakref.WeakKeyDictionary[Any, dict[Any, tuple[Any, int]]] = weakref.WeakKeyDictionary()


def _signal(app: Any, name: str) -> Any:
    return getattr(app, name, None)


def worker_init(worker: Any) -> None:
    """The worker is starting: Faust sends its configuration signals when the app is first
    configured (lazily, in a worker), then ``on_worker_init``; so do we, in that order."""
    app = worker.app
    for name, args in (
        ("on_before_configured", ()),
        ("on_configured", (app.settings,)),
        ("on_after_configured", ()),
        ("on_worker_init", ()),
    ):
        sig = _signal(app, name)
        if sig is not None:
            sig.send(app, *args)


async def revoked(worker: Any, tps: set[TP]) -> None:
    app = worker.app
    sensors = getattr(app, "sensors", None)
    if sensors:
        _rebalance_state[worker] = sensors.call("on_rebalance_start", app)
    sig = _signal(app, "on_rebalance_start")
    if sig is not None:
        sig.send(app)
    sig = _signal(app, "on_partitions_revoked")
    if sig is not None:
        await sig.send(app, set(tps))


async def assigned(worker: Any, tps: set[TP]) -> None:
    app = worker.app
    sensors = getattr(app, "sensors", None)
    if sensors:
        sensors.call("on_assignment_completed", worker.assignor, None)
    sig = _signal(app, "on_partitions_assigned")
    if sig is not None:
        await sig.send(app, set(tps))


async def rebalance_complete(worker: Any) -> None:
    app = worker.app
    sensors = getattr(app, "sensors", None)
    if sensors:
        sensors.call_end("on_rebalance_end", _rebalance_state.pop(worker, {}), app)
    sig = _signal(app, "on_rebalance_complete")
    if sig is not None:
        await sig.send(app)


def committed(worker: Any) -> None:
    """After a commit: how many records each task handled since the last one, then the commit hook.

    A task's count is exact (its acknowledged records); a task reading several partitions splits
    it by how far each partition's committable offset moved (the rest goes to its first partition)."""
    sensors = getattr(worker.app, "sensors", None)
    if not sensors:
        return
    seen = _last_offsets.setdefault(worker, {})
    counts: dict[TP, int] = {}
    counted = _processed.get(worker, {})
    counting: dict[Any, tuple[Any, int]] = {}
    for task in list(worker.tasks.values()):
        last = counted.get(task.id)
        delta = task.processed - (last[1] if last is not None and last[0] is task else 0)
        counting[task.id] = (task, task.processed)
        tps = list(task.partitions)
        if delta <= 0 or not tps:
            continue
        rest = delta
        if len(tps) > 1:
            for tp in tps[1:]:
                now, before = task.committable.get(tp), seen.get(tp)
                if now is not None and before is not None and now > before:
                    moved = min(rest, now - before)
                    counts[tp] = counts.get(tp, 0) + moved
                    rest -= moved
        counts[tps[0]] = counts.get(tps[0], 0) + rest
        seen.update(task.committable)
    _processed[worker] = counting
    if counts:
        sensors.call("on_messages_handled", counts)
    sensors.call("on_commit_completed", worker.consumer, dict(seen))


async def before_shutdown(worker: Any) -> None:
    sig = _signal(worker.app, "on_before_shutdown")
    if sig is not None:
        await sig.send(worker.app)
