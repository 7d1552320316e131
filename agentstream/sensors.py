"""Sensors (Faust's ``faust.Sensor``) and ``app.monitor``: observers the worker tells what happens.

A sensor subclasses :class:`Sensor` and overrides the hooks it cares about (Faust's names); add it
with ``app.sensors.add(sensor)``. The worker calls the hooks through :mod:`agentstream.worker.hooks`
at assignment, rebalance, commit and send; a sensor that raises is logged, never fatal.

Per-record hooks (``on_message_in``, ``on_stream_event_in/out``, ``on_message_out``, table get/set)
are not called one record at a time: that would tax the per-record path of every app for the few
that watch it. Instead, at every commit the worker reports how many records each task handled
since the last commit, through :meth:`Sensor.on_messages_handled`; :class:`Monitor` turns that
into Faust's counters (``messages_received_total``, ``messages_received_by_topic``...).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from .transport.base import TP

log = logging.getLogger(__name__)

__all__ = ["Sensor", "Monitor", "SensorDelegate"]


class Sensor:
    """Base class: every hook does nothing (override what you need)."""

    def on_message_in(self, tp: TP, offset: int, message: Any) -> None: ...
    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any: ...
    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None: ...
    def on_message_out(self, tp: TP, offset: int, message: Any) -> None: ...
    def on_messages_handled(self, counts: dict[TP, int]) -> None: ...
    def on_topic_buffer_full(self, tp: TP) -> None: ...
    def on_table_get(self, table: Any, key: Any) -> None: ...
    def on_table_set(self, table: Any, key: Any, value: Any) -> None: ...
    def on_table_del(self, table: Any, key: Any) -> None: ...
    def on_commit_initiated(self, consumer: Any) -> Any: ...
    def on_commit_completed(self, consumer: Any, state: Any) -> None: ...
    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any: ...
    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None: ...
    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None: ...
    def on_assignment_start(self, assignor: Any) -> Any: ...
    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None: ...
    def on_assignment_completed(self, assignor: Any, state: Any) -> None: ...
    def on_rebalance_start(self, app: Any) -> Any: ...
    def on_rebalance_return(self, app: Any, state: Any) -> None: ...
    def on_rebalance_end(self, app: Any, state: Any) -> None: ...
    def on_web_request_start(self, app: Any, request: Any, *, view: Any = None) -> Any: ...
    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None: ...

    def asdict(self) -> dict[str, Any]:
        return {}


class Monitor(Sensor):
    """Faust's ``app.monitor``: counters of what the worker did (read them, or ``asdict()``)."""

    def __init__(self) -> None:
        self.messages_received_total = 0
        self.messages_received_by_topic: Counter[str] = Counter()
        self.messages_sent = 0
        self.messages_sent_by_topic: Counter[str] = Counter()
        self.send_errors = 0
        self.commit_count = 0
        self.rebalances = 0
        self.assignments_complete = 0
        self.assignments_failed = 0
        self.rebalance_end_latency: list[float] = []
        self.tp_committed: dict[TP, int] = {}

    @property
    def messages_s(self) -> int:  # Faust's name for the total
        return self.messages_received_total

    def on_messages_handled(self, counts: dict[TP, int]) -> None:
        for tp, n in counts.items():
            self.messages_received_total += n
            self.messages_received_by_topic[tp.topic] += n

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        self.messages_sent += 1
        self.messages_sent_by_topic[topic] += 1
        return time.monotonic()

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        self.send_errors += 1

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        self.commit_count += 1
        if isinstance(state, dict):
            self.tp_committed.update(state)

    def on_rebalance_start(self, app: Any) -> Any:
        self.rebalances += 1
        return time.monotonic()

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        if isinstance(state, float):
            self.rebalance_end_latency.append(time.monotonic() - state)

    def on_assignment_completed(self, assignor: Any, state: Any) -> None:
        self.assignments_complete += 1

    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None:
        self.assignments_failed += 1

    def asdict(self) -> dict[str, Any]:
        return {
            "messages_received_total": self.messages_received_total,
            "messages_received_by_topic": dict(self.messages_received_by_topic),
            "messages_sent": self.messages_sent,
            "messages_sent_by_topic": dict(self.messages_sent_by_topic),
            "send_errors": self.send_errors,
            "commit_count": self.commit_count,
            "rebalances": self.rebalances,
            "assignments_complete": self.assignments_complete,
            "assignments_failed": self.assignments_failed,
        }


class SensorDelegate:
    """``app.sensors``: the set of sensors; ``call(hook, ...)`` calls each, logging failures."""

    def __init__(self) -> None:
        self._sensors: list[Sensor] = []
        self.on_change: Callable[[], None] | None = None  # told when a sensor comes or goes

    def add(self, sensor: Sensor) -> None:
        if sensor not in self._sensors:
            self._sensors.append(sensor)
            if self.on_change is not None:
                self.on_change()

    def remove(self, sensor: Sensor) -> None:
        if sensor in self._sensors:
            self._sensors.remove(sensor)
            if self.on_change is not None:
                self.on_change()

    def __iter__(self) -> Iterator[Sensor]:
        return iter(list(self._sensors))

    def __len__(self) -> int:
        return len(self._sensors)

    def __bool__(self) -> bool:
        return bool(self._sensors)

    def call(self, hook: str, *args: Any, **kwargs: Any) -> dict[int, Any]:
        """Call ``hook`` on every sensor; returns each sensor's state (by id) for the matching end hook."""
        states: dict[int, Any] = {}
        for sensor in list(self._sensors):
            try:
                states[id(sensor)] = getattr(sensor, hook)(*args, **kwargs)
            except Exception as exc:
                log.exception("sensor %r raised in %s: %s", sensor, hook, exc)
        return states

    def call_end(self, hook: str, states: dict[int, Any], *args: Any) -> None:
        """Call an end hook with the state its start hook returned (Faust's ``(..., state)`` pairs)."""
        for sensor in list(self._sensors):
            try:
                getattr(sensor, hook)(*args, states.get(id(sensor)))
            except Exception as exc:
                log.exception("sensor %r raised in %s: %s", sensor, hook, exc)
