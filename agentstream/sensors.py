"""Sensors (Faust's ``faust.Sensor``) and ``app.monitor``: observers the worker tells what happens.

A sensor subclasses :class:`Sensor` and overrides the hooks it cares about (Faust's names and
signatures); add it with ``app.sensors.add(sensor)``. Each hook is called where Faust calls it:

* per record, only while a sensor is registered (with none, the record path has no hook call at
  all: the task, the tables and the topics switch to a sensed path when the first sensor comes):
  ``on_message_in`` and ``on_stream_event_in`` when the task hands a record to the agent,
  ``on_stream_event_out`` and ``on_message_out`` when the record is acknowledged,
  ``on_table_get/set/del`` on table access, ``on_send_initiated`` then ``on_send_completed`` or
  ``on_send_error`` for each send;
* per batch, commit or rebalance: ``on_topic_buffer_full`` (a partition's buffer filled: the
  fetcher leaves it out of the poll), ``on_commit_initiated/completed`` around each commit,
  ``on_assignment_start/error/completed`` around the group leader's assignment,
  ``on_rebalance_start/return/end`` (revoked / assignment received / tasks restored and running),
  ``on_web_request_start/end`` around each web request.

agentstream's additions, for tracing (no-ops by default): ``on_send_initiated`` gets the record
about to be sent as an :class:`OutgoingMessage` whose ``headers`` list a sensor may change (Faust's
tracing sensors inject into ``message.headers`` there); ``on_ask_start``/``on_ask_end`` around
``agent.ask()`` (from before the request is sent to the reply or error), ``on_reply_received``
when this process's reply reader takes a reply.

``on_threaded_producer_buffer_processed`` exists for Faust's ``producer_threaded`` setting, which
agentstream does not have: it is never called. :meth:`Sensor.on_messages_handled` (an agentstream
addition) tells, at each commit, how many records each partition handled since the last one.
A sensor that raises is logged, never fatal: an observer must not stop the processing it watches.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from statistics import median
from typing import Any

from .transport.base import TP

log = logging.getLogger(__name__)

__all__ = ["Sensor", "Monitor", "TableState", "SensorDelegate", "OutgoingMessage", "stream_label"]

MAX_AVG_HISTORY = 100
MAX_LATENCY_HISTORY = 30


class OutgoingMessage:
    """The record a send is about to append, as ``on_send_initiated`` sees it (Faust's
    ``PendingMessage`` role): ``headers`` is the list that goes out, so a sensor may add or
    replace a header (a trace context) before the record is appended. Key and value are bytes."""

    __slots__ = ("topic", "key", "value", "partition", "timestamp", "headers")

    def __init__(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: float | None,
        headers: list[tuple[str, bytes]],
    ) -> None:
        self.topic = topic
        self.key = key
        self.value = value
        self.partition = partition
        self.timestamp = timestamp
        self.headers = headers

    def __repr__(self) -> str:
        return f"<OutgoingMessage {self.topic} headers={[name for name, _ in self.headers]}>"


class Sensor:
    """Base class: every hook does nothing (override what you need). Start hooks return a state
    that the matching end hook gets back (``on_send_initiated`` -> ``on_send_completed``...)."""

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

    def on_assignment_start(self, assignor: Any) -> Any:
        return {"time_start": time.monotonic()}

    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None: ...
    def on_assignment_completed(self, assignor: Any, state: Any) -> None: ...

    def on_rebalance_start(self, app: Any) -> Any:
        return {"time_start": time.monotonic()}

    def on_rebalance_return(self, app: Any, state: Any) -> None: ...
    def on_rebalance_end(self, app: Any, state: Any) -> None: ...

    def on_web_request_start(self, app: Any, request: Any, *, view: Any = None) -> Any:
        return {"time_start": time.monotonic()}

    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None: ...
    def on_threaded_producer_buffer_processed(self, app: Any, size: int) -> None: ...
    def on_ask_start(self, agent: Any, correlation_id: str) -> Any: ...
    def on_ask_end(self, agent: Any, state: Any, error: BaseException | None) -> None: ...
    def on_reply_received(self, tp: TP, offset: int, message: Any) -> None: ...

    def asdict(self) -> Mapping[str, Any]:
        return {}


def stream_label(stream: Any) -> str:
    """A stream's name for metrics: Faust's ``shortlabel`` when it has one, else its agent's."""
    label = getattr(stream, "shortlabel", None)
    if isinstance(label, str):
        return label
    agent = getattr(getattr(stream, "_input", None), "agent", None)
    name = getattr(agent, "name", None)
    return f"Stream: {name}" if name else f"Stream: {type(stream).__name__}"


class TableState:
    """One table's counters in :attr:`Monitor.tables` (Faust's ``TableState``)."""

    def __init__(self, table: Any, *, keys_retrieved: int = 0, keys_updated: int = 0, keys_deleted: int = 0) -> None:
        self.table = table
        self.keys_retrieved = keys_retrieved
        self.keys_updated = keys_updated
        self.keys_deleted = keys_deleted

    def asdict(self) -> dict[str, int]:
        return {
            "keys_retrieved": self.keys_retrieved,
            "keys_updated": self.keys_updated,
            "keys_deleted": self.keys_deleted,
        }


class Monitor(Sensor):
    """Faust's ``app.monitor``: counters and latencies of what the worker did, under Faust's names
    (read them, or ``asdict()``). Latencies are in seconds, the last ones kept in deques; the per
    second rates (``messages_s``, ``events_s``) are sampled when read, at most once a second."""

    max_avg_history = MAX_AVG_HISTORY
    max_commit_latency_history = MAX_LATENCY_HISTORY
    max_send_latency_history = MAX_LATENCY_HISTORY
    max_assignment_latency_history = MAX_LATENCY_HISTORY

    def __init__(self, *, time: Callable[[], float] = time.monotonic, **kwargs: Any) -> None:
        for name in (
            "max_avg_history",
            "max_commit_latency_history",
            "max_send_latency_history",
            "max_assignment_latency_history",
        ):
            if kwargs.get(name) is not None:
                setattr(self, name, int(kwargs.pop(name)))
        self.time = time
        self.tables: dict[str, TableState] = {}
        self.messages_active = 0
        self.messages_received_total = 0
        self.messages_received_by_topic: Counter[str] = Counter()
        self.messages_sent = 0
        self.messages_sent_by_topic: Counter[str] = Counter()
        self.events_active = 0
        self.events_total = 0
        self.events_by_stream: Counter[str] = Counter()
        self.events_by_task: Counter[str] = Counter()
        self.events_runtime: deque[float] = deque(maxlen=self.max_avg_history)
        self.events_runtime_avg = 0.0
        self.commit_latency: deque[float] = deque(maxlen=self.max_commit_latency_history)
        self.send_latency: deque[float] = deque(maxlen=self.max_send_latency_history)
        self.assignment_latency: deque[float] = deque(maxlen=self.max_assignment_latency_history)
        self.topic_buffer_full: Counter[TP] = Counter()
        self.metric_counts: Counter[str] = Counter()
        self.tp_committed_offsets: dict[TP, int] = {}
        self.tp_read_offsets: dict[TP, int] = {}
        self.tp_end_offsets: dict[TP, int] = {}
        self.send_errors = 0
        self.commit_count = 0  # agentstream's: commits completed
        self.assignments_completed = 0
        self.assignments_failed = 0
        self.rebalances = 0
        self.rebalance_return_latency: deque[float] = deque(maxlen=self.max_avg_history)
        self.rebalance_end_latency: deque[float] = deque(maxlen=self.max_avg_history)
        self.rebalance_return_avg = 0.0
        self.rebalance_end_avg = 0.0
        self.http_response_codes: Counter[int] = Counter()
        self.http_response_latency: deque[float] = deque(maxlen=self.max_avg_history)
        self.http_response_latency_avg = 0.0
        self.stream_inbound_time: dict[TP, float] = {}
        self._sampled_at = self.time()
        self._sampled = (0, 0)  # (messages, events) totals at the last sample
        self._rates = (0, 0)
        if kwargs:
            raise TypeError(f"Monitor() got unexpected keyword argument(s) {', '.join(sorted(kwargs))}")

    # -- rates, sampled when read ----------------------------------------------------------------------
    def _sample(self) -> None:
        now = self.time()
        if now - self._sampled_at < 1.0:
            return
        elapsed = now - self._sampled_at
        messages, events = self._sampled
        self._rates = (
            round((self.messages_received_total - messages) / elapsed),
            round((self.events_total - events) / elapsed),
        )
        self._sampled, self._sampled_at = (self.messages_received_total, self.events_total), now
        if self.events_runtime:
            self.events_runtime_avg = median(self.events_runtime)
        if self.rebalance_return_latency:
            self.rebalance_return_avg = median(self.rebalance_return_latency)
        if self.rebalance_end_latency:
            self.rebalance_end_avg = median(self.rebalance_end_latency)
        if self.http_response_latency:
            self.http_response_latency_avg = median(self.http_response_latency)

    @property
    def messages_s(self) -> int:
        """Messages received per second, over the last second or more."""
        self._sample()
        return self._rates[0]

    @property
    def events_s(self) -> int:
        """Events handed to streams per second, over the last second or more."""
        self._sample()
        return self._rates[1]

    # -- helpers (Faust's) -----------------------------------------------------------------------------
    def secs_since(self, start_time: float) -> float:
        return self.time() - start_time

    def ms_since(self, start_time: float) -> float:
        return self.secs_to_ms(self.secs_since(start_time))

    @staticmethod
    def secs_to_ms(seconds: float) -> float:
        return seconds * 1000.0

    def count(self, metric_name: str, count: int = 1) -> None:
        """An app's own counter (Faust's ``app.monitor.count(name)``)."""
        self.metric_counts[metric_name] += count

    def on_tp_commit(self, tp_offsets: Mapping[TP, int]) -> None:
        self.tp_committed_offsets.update(tp_offsets)

    def track_tp_end_offset(self, tp: TP, offset: int) -> None:
        self.tp_end_offsets[tp] = offset

    @property
    def tp_committed(self) -> dict[TP, int]:  # agentstream's earlier name
        return self.tp_committed_offsets

    @property
    def assignments_complete(self) -> int:  # agentstream's earlier name
        return self.assignments_completed

    # -- hooks -------------------------------------------------------------------------------------------
    def on_message_in(self, tp: TP, offset: int, message: Any) -> None:
        self.messages_received_total += 1
        self.messages_active += 1
        self.messages_received_by_topic[tp.topic] += 1
        self.tp_read_offsets[tp] = offset

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any:
        self.events_total += 1
        self.events_active += 1
        self.stream_inbound_time[tp] = self.time()
        self.events_by_stream[stream_label(stream)] += 1
        agent = getattr(getattr(stream, "_input", None), "agent", None)
        self.events_by_task[str(getattr(agent, "name", "") or stream)] += 1
        return {"time_in": self.time(), "time_out": None, "time_total": None}

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        if isinstance(state, dict) and "time_in" in state:
            time_out = self.time()
            total = time_out - state["time_in"]
            state.update(time_out=time_out, time_total=total)
            self.events_active -= 1
            self.events_runtime.append(total)

    def on_message_out(self, tp: TP, offset: int, message: Any) -> None:
        self.messages_active -= 1

    def on_topic_buffer_full(self, tp: TP) -> None:
        self.topic_buffer_full[tp] += 1

    def _table(self, table: Any) -> TableState:
        name = str(getattr(table, "name", table))
        state = self.tables.get(name)
        if state is None:
            state = self.tables[name] = TableState(table)
        return state

    def on_table_get(self, table: Any, key: Any) -> None:
        self._table(table).keys_retrieved += 1

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        self._table(table).keys_updated += 1

    def on_table_del(self, table: Any, key: Any) -> None:
        self._table(table).keys_deleted += 1

    def on_commit_initiated(self, consumer: Any) -> Any:
        return self.time()

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        self.commit_count += 1
        if isinstance(state, float):
            self.commit_latency.append(self.time() - state)

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        self.messages_sent += 1
        self.messages_sent_by_topic[topic] += 1
        return self.time()

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        if isinstance(state, float):
            self.send_latency.append(self.time() - state)

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        self.send_errors += 1

    def on_assignment_start(self, assignor: Any) -> Any:
        return {"time_start": self.time()}

    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None:
        if isinstance(state, dict) and "time_start" in state:
            self.assignment_latency.append(self.time() - state["time_start"])
        self.assignments_failed += 1

    def on_assignment_completed(self, assignor: Any, state: Any) -> None:
        if isinstance(state, dict) and "time_start" in state:
            self.assignment_latency.append(self.time() - state["time_start"])
        self.assignments_completed += 1

    def _clear_topic_related(self) -> None:
        self.tp_committed_offsets.clear()
        self.tp_read_offsets.clear()
        self.tp_end_offsets.clear()
        self.topic_buffer_full.clear()
        self.stream_inbound_time.clear()

    def on_rebalance_start(self, app: Any) -> Any:
        self.rebalances += 1
        self._clear_topic_related()
        return {"time_start": self.time()}

    def on_rebalance_return(self, app: Any, state: Any) -> None:
        if isinstance(state, dict) and "time_start" in state:
            now = self.time()
            state.update(time_return=now, latency_return=now - state["time_start"])
            self.rebalance_return_latency.append(now - state["time_start"])

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        if isinstance(state, dict) and "time_start" in state:
            now = self.time()
            state.update(time_end=now, latency_end=now - state["time_start"])
            self.rebalance_end_latency.append(now - state["time_start"])
        self._clear_topic_related()

    def on_web_request_start(self, app: Any, request: Any, *, view: Any = None) -> Any:
        return {"time_start": self.time()}

    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None:
        status = int(getattr(response, "status", 500)) if response is not None else 500
        if isinstance(state, dict) and "time_start" in state:
            now = self.time()
            state.update(time_end=now, latency_end=now - state["time_start"], status_code=status)
            self.http_response_latency.append(now - state["time_start"])
        self.http_response_codes[status] += 1

    def asdict(self) -> dict[str, Any]:
        self._sample()

        def by_topic(offsets: Mapping[TP, int]) -> dict[str, dict[int, int]]:
            out: dict[str, dict[int, int]] = {}
            for tp, offset in offsets.items():
                out.setdefault(tp.topic, {})[tp.partition] = offset
            return out

        return {
            "messages_active": self.messages_active,
            "messages_received_total": self.messages_received_total,
            "messages_sent": self.messages_sent,
            "messages_sent_by_topic": dict(self.messages_sent_by_topic),
            "messages_s": self._rates[0],
            "messages_received_by_topic": dict(self.messages_received_by_topic),
            "events_active": self.events_active,
            "events_total": self.events_total,
            "events_s": self._rates[1],
            "events_runtime_avg": self.events_runtime_avg,
            "events_by_task": dict(self.events_by_task),
            "events_by_stream": dict(self.events_by_stream),
            "commit_latency": list(self.commit_latency),
            "commit_count": self.commit_count,
            "send_latency": list(self.send_latency),
            "send_errors": self.send_errors,
            "assignment_latency": list(self.assignment_latency),
            "assignments_completed": self.assignments_completed,
            "assignments_failed": self.assignments_failed,
            "topic_buffer_full": {f"{tp.topic}:{tp.partition}": n for tp, n in self.topic_buffer_full.items()},
            "tables": {name: state.asdict() for name, state in self.tables.items()},
            "metric_counts": dict(self.metric_counts),
            "topic_committed_offsets": by_topic(self.tp_committed_offsets),
            "topic_read_offsets": by_topic(self.tp_read_offsets),
            "topic_end_offsets": by_topic(self.tp_end_offsets),
            "rebalances": self.rebalances,
            "rebalance_return_latency": list(self.rebalance_return_latency),
            "rebalance_end_latency": list(self.rebalance_end_latency),
            "rebalance_return_avg": self.rebalance_return_avg,
            "rebalance_end_avg": self.rebalance_end_avg,
            "http_response_codes": dict(self.http_response_codes),
            "http_response_latency": list(self.http_response_latency),
            "http_response_latency_avg": self.http_response_latency_avg,
        }


class SensorDelegate:
    """``app.sensors``: the registered sensors, with Faust's delegate methods (``on_table_get(...)``
    calls every sensor's; start hooks return ``{sensor: state}`` for the matching end hook).

    Callers on the record path check ``if app.sensors`` (or a flag the app keeps from it) first, so
    an app without sensors pays nothing; ``watch(callback)`` tells them when sensors come or go."""

    def __init__(self) -> None:
        self._sensors: list[Sensor] = []
        self.on_change: Callable[[], None] | None = None  # the App's (its plain-send fast path)
        self._watchers: list[Callable[[], None]] = []

    def add(self, sensor: Sensor) -> None:
        if sensor not in self._sensors:
            self._sensors.append(sensor)
            self._changed()

    def remove(self, sensor: Sensor) -> None:
        if sensor in self._sensors:
            self._sensors.remove(sensor)
            self._changed()

    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever a sensor is added or removed (a worker re-picks its paths)."""
        self._watchers.append(callback)

    def unwatch(self, callback: Callable[[], None]) -> None:
        if callback in self._watchers:
            self._watchers.remove(callback)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
        for callback in list(self._watchers):
            callback()

    def __iter__(self) -> Iterator[Sensor]:
        return iter(list(self._sensors))

    def __len__(self) -> int:
        return len(self._sensors)

    def __bool__(self) -> bool:
        return bool(self._sensors)

    def __repr__(self) -> str:
        return f"<SensorDelegate: {self._sensors!r}>"

    # -- generic calls -----------------------------------------------------------------------------------
    def call(self, hook: str, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        """Call ``hook`` on every sensor; returns each sensor's state for the matching end hook."""
        states: dict[Any, Any] = {}
        for sensor in self._sensors:
            try:
                states[sensor] = getattr(sensor, hook)(*args, **kwargs)
            except Exception as exc:
                log.exception("sensor %r raised in %s: %s", sensor, hook, exc)
        return states

    def call_end(self, hook: str, states: Mapping[Any, Any] | None, *args: Any, **kwargs: Any) -> None:
        """Call an end hook with the state its start hook returned (Faust's ``(..., state)`` pairs):
        ``args`` come before the state, ``kwargs`` after."""
        states = states or {}
        for sensor in self._sensors:
            try:
                getattr(sensor, hook)(*args, states.get(sensor), **kwargs)
            except Exception as exc:
                log.exception("sensor %r raised in %s: %s", sensor, hook, exc)

    # -- Faust's delegate methods ------------------------------------------------------------------------
    def on_message_in(self, tp: TP, offset: int, message: Any) -> None:
        self.call("on_message_in", tp, offset, message)

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> dict[Any, Any]:
        return self.call("on_stream_event_in", tp, offset, stream, event)

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        self.call_end("on_stream_event_out", state, tp, offset, stream, event)

    def on_message_out(self, tp: TP, offset: int, message: Any) -> None:
        self.call("on_message_out", tp, offset, message)

    def on_topic_buffer_full(self, tp: TP) -> None:
        self.call("on_topic_buffer_full", tp)

    def on_table_get(self, table: Any, key: Any) -> None:
        self.call("on_table_get", table, key)

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        self.call("on_table_set", table, key, value)

    def on_table_del(self, table: Any, key: Any) -> None:
        self.call("on_table_del", table, key)

    def on_commit_initiated(self, consumer: Any) -> dict[Any, Any]:
        return self.call("on_commit_initiated", consumer)

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        self.call_end("on_commit_completed", state, consumer)

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> dict[Any, Any]:
        return self.call("on_send_initiated", producer, topic, message, keysize, valsize)

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        for sensor in self._sensors:
            try:
                sensor.on_send_completed(producer, (state or {}).get(sensor), metadata)
            except Exception as exc:
                log.exception("sensor %r raised in on_send_completed: %s", sensor, exc)

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        for sensor in self._sensors:
            try:
                sensor.on_send_error(producer, exc, (state or {}).get(sensor))
            except Exception as error:
                log.exception("sensor %r raised in on_send_error: %s", sensor, error)

    def on_assignment_start(self, assignor: Any) -> dict[Any, Any]:
        return self.call("on_assignment_start", assignor)

    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None:
        for sensor in self._sensors:
            try:
                sensor.on_assignment_error(assignor, (state or {}).get(sensor), exc)
            except Exception as error:
                log.exception("sensor %r raised in on_assignment_error: %s", sensor, error)

    def on_assignment_completed(self, assignor: Any, state: Any) -> None:
        self.call_end("on_assignment_completed", state, assignor)

    def on_rebalance_start(self, app: Any) -> dict[Any, Any]:
        return self.call("on_rebalance_start", app)

    def on_rebalance_return(self, app: Any, state: Any) -> None:
        self.call_end("on_rebalance_return", state, app)

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        self.call_end("on_rebalance_end", state, app)

    def on_web_request_start(self, app: Any, request: Any, *, view: Any = None) -> dict[Any, Any]:
        return self.call("on_web_request_start", app, request, view=view)

    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None:
        self.call_end("on_web_request_end", state, app, request, response, view=view)

    def on_threaded_producer_buffer_processed(self, app: Any, size: int) -> None:
        self.call("on_threaded_producer_buffer_processed", app=app, size=size)

    # -- agentstream's tracing hooks (a sensor without them, not a Sensor subclass, is skipped) -------
    def _optional(self, hook: str, *args: Any) -> dict[Any, Any]:
        states: dict[Any, Any] = {}
        for sensor in self._sensors:
            method = getattr(sensor, hook, None)
            if method is not None:
                try:
                    states[sensor] = method(*args)
                except Exception as exc:
                    log.exception("sensor %r raised in %s: %s", sensor, hook, exc)
        return states

    def on_ask_start(self, agent: Any, correlation_id: str) -> dict[Any, Any]:
        return self._optional("on_ask_start", agent, correlation_id)

    def on_ask_end(self, agent: Any, state: Any, error: BaseException | None) -> None:
        for sensor, sensor_state in (state or {}).items():
            try:
                sensor.on_ask_end(agent, sensor_state, error)
            except Exception as exc:
                log.exception("sensor %r raised in on_ask_end: %s", sensor, exc)

    def on_reply_received(self, tp: TP, offset: int, message: Any) -> None:
        self._optional("on_reply_received", tp, offset, message)

    def on_tp_commit(self, tp_offsets: Mapping[TP, int]) -> None:
        """The committed offsets, to each sensor that keeps them (Faust's ``Monitor.on_tp_commit``)."""
        for sensor in self._sensors:
            hook = getattr(sensor, "on_tp_commit", None)
            if hook is not None:
                try:
                    hook(tp_offsets)
                except Exception as exc:
                    log.exception("sensor %r raised in on_tp_commit: %s", sensor, exc)
