"""Where the worker tells the app's signals and sensors what happened (Faust's signals and
Sensor hooks). One function per moment, so the worker's call sites stay one line each and the
App stays a declaration: the receivers and sensors are user code the App only lists."""

from __future__ import annotations

import logging
import weakref
from typing import Any

from ..transport.base import TP

__all__ = [
    "worker_init",
    "apply_sensors",
    "tasks_created",
    "revoked",
    "assigned",
    "rebalance_complete",
    "commit_initiated",
    "committed",
    "before_shutdown",
]

log = logging.getLogger(__name__)
_watchers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_rebalance_state: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()
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
        ("on_configured", (getattr(app, "conf", app.settings),)),  # Faust's receivers assign conf.x = ...
        ("on_after_configured", ()),
        ("on_worker_init", ()),
    ):
        sig = _signal(app, name)
        if sig is not None:
            sig.send(app, *args)
    sensors = getattr(app, "sensors", None)
    if sensors is not None and hasattr(sensors, "watch") and worker not in _watchers:
        _watchers[worker] = watcher = lambda: apply_sensors(worker)
        sensors.watch(watcher)  # sensors added or removed while the worker runs switch its paths
    apply_sensors(worker)


def _delegate(worker: Any) -> Any:
    """The app's sensor delegate while a sensor is registered, else None."""
    sensors = getattr(worker.app, "sensors", None)
    return sensors if sensors else None


def apply_sensors(worker: Any) -> None:
    """Tell the record path whether sensors are registered: tasks switch between the fast pull
    and the sensed one, tables call their get/set/del hooks, the fetcher reports full buffers,
    the assignor its assignments. With no sensor, every one of them holds None (no call)."""
    delegate = _delegate(worker)
    for task in list(getattr(worker, "tasks", {}).values()):
        task.sense(delegate)
    from ..tables.hooks import observer

    for table in getattr(worker.app, "tables", {}).values():
        table._sensed = observer(table, delegate)  # a subclass's on_key_get/set/del hooks too
    fetcher = getattr(worker, "fetcher", None)
    if fetcher is not None:
        fetcher.on_full = None if delegate is None else delegate.on_topic_buffer_full
    assignor = getattr(worker, "assignor", None)
    if assignor is not None:
        assignor.sensors = delegate


def tasks_created(worker: Any, tasks: list[Any]) -> None:
    """New tasks (an assignment): they start on the sensed path if sensors are registered."""
    apply_sensors(worker)  # the fetcher exists by now
    delegate = _delegate(worker)
    if delegate is not None:
        for task in tasks:
            task.sense(delegate)


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
    if sensors:  # the assignment is back from the group: Faust's on_rebalance_return
        sensors.call_end("on_rebalance_return", _rebalance_state.get(worker, {}), app)
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


def commit_initiated(worker: Any) -> dict[Any, Any] | None:
    """Before a commit: Faust's ``on_commit_initiated`` (the states go to :func:`committed`)."""
    sensors = getattr(worker.app, "sensors", None)
    if not sensors:
        return None
    states: dict[Any, Any] = sensors.on_commit_initiated(worker.consumer)
    return states


def committed(worker: Any, states: dict[Any, Any] | None = None, done: bool = True) -> None:
    """After a commit (``done``: offsets were committed): the committed offsets to
    ``on_tp_commit``, how many records each task handled since the last one to
    ``on_messages_handled``, then Faust's ``on_commit_completed`` with its state.

    A task's count is exact (its acknowledged records); a task reading several partitions splits
    it by how far each partition's committable offset moved (the rest goes to its first partition)."""
    sensors = getattr(worker.app, "sensors", None)
    if not sensors:
        return
    if not done:
        sensors.on_commit_completed(worker.consumer, states)
        return
    seen = _last_offsets.setdefault(worker, {})
    before = dict(seen)
    counts: dict[TP, int] = {}
    counted = _processed.get(worker, {})
    counting: dict[Any, tuple[Any, int]] = {}
    for task in list(worker.tasks.values()):
        last = counted.get(task.id)
        delta = task.processed - (last[1] if last is not None and last[0] is task else 0)
        counting[task.id] = (task, task.processed)
        tps = list(task.partitions)
        if delta <= 0 or not tps:
            seen.update(task.committable)
            continue
        rest = delta
        if len(tps) > 1:
            for tp in tps[1:]:
                now, was = task.committable.get(tp), before.get(tp)
                if now is not None and was is not None and now > was:
                    moved = min(rest, now - was)
                    counts[tp] = counts.get(tp, 0) + moved
                    rest -= moved
        counts[tps[0]] = counts.get(tps[0], 0) + rest
        seen.update(task.committable)
    _processed[worker] = counting
    moved_offsets = {tp: offset for tp, offset in seen.items() if before.get(tp) != offset}
    if moved_offsets:
        sensors.on_tp_commit(moved_offsets)
    _track_end_offsets(worker, sensors)
    if counts:
        sensors.call("on_messages_handled", counts)
    sensors.on_commit_completed(worker.consumer, states)


def _track_end_offsets(worker: Any, sensors: Any) -> None:
    """Each assigned partition's end offset from the last fetch, to the sensors that keep them
    (Faust's ``Monitor.track_tp_end_offset``: the lag gauges of its client monitors)."""
    consumer = worker.consumer
    trackers = [t for t in (getattr(s, "track_tp_end_offset", None) for s in sensors) if t is not None]
    if consumer is None or not trackers:
        return
    for tp in list(consumer.assignment()):
        end = consumer.highwater(tp)
        if end is not None:
            for track in trackers:
                try:
                    track(tp, end)
                except Exception as exc:
                    log.exception("sensor raised in track_tp_end_offset: %s", exc)


async def before_shutdown(worker: Any) -> None:
    watcher = _watchers.pop(worker, None)
    sensors = getattr(worker.app, "sensors", None)
    if watcher is not None and sensors is not None:
        sensors.unwatch(watcher)
    sig = _signal(worker.app, "on_before_shutdown")
    if sig is not None:
        await sig.send(worker.app)
