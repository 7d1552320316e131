"""The hooks Faust's statsd and Datadog monitors share: each hook is one or more metric events
(a counter up or down, a gauge, a timing in milliseconds) with labels; the subclass names them
and hands them to its client (statsd folds labels into the name, Datadog sends them as tags)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentstream.sensors import Monitor
from agentstream.transport.base import TP

from ._labels import stream_metric_label, table_name

Labels = dict[str, Any]


class ClientMonitor(Monitor):
    """The Monitor, also reporting each hook to a metrics client (subclasses: :meth:`emit`)."""

    def __init__(
        self, host: str = "localhost", port: int = 8125, prefix: str = "faust-app", rate: float = 1.0, **kwargs: Any
    ) -> None:
        self.host = host
        self.port = port
        self.prefix = prefix
        self.rate = rate
        super().__init__(**kwargs)

    def emit(self, kind: str, metric: str, value: float, labels: Labels) -> None:
        """``kind``: incr, decr, gauge or timing (milliseconds)."""
        raise NotImplementedError

    @staticmethod
    def _tp(tp: TP) -> Labels:
        return {"topic": tp.topic, "partition": tp.partition}

    def on_message_in(self, tp: TP, offset: int, message: Any) -> None:
        super().on_message_in(tp, offset, message)
        self.emit("incr", "messages_received", 1, self._tp(tp))
        self.emit("incr", "messages_active", 1, self._tp(tp))
        self.emit("incr", "topic_messages_received", 1, {"topic": tp.topic})
        self.emit("gauge", "read_offset", offset, self._tp(tp))

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any:
        state = super().on_stream_event_in(tp, offset, stream, event)
        labels = {**self._tp(tp), "stream": stream_metric_label(stream)}
        self.emit("incr", "events", 1, labels)
        self.emit("incr", "stream_events", 1, labels)
        self.emit("incr", "events_active", 1, labels)
        return state

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        super().on_stream_event_out(tp, offset, stream, event, state)
        labels = {**self._tp(tp), "stream": stream_metric_label(stream)}
        self.emit("decr", "events_active", 1, labels)
        if state is not None and self.events_runtime:
            self.emit("timing", "events_runtime", self.secs_to_ms(self.events_runtime[-1]), labels)

    def on_message_out(self, tp: TP, offset: int, message: Any) -> None:
        super().on_message_out(tp, offset, message)
        self.emit("decr", "messages_active", 1, self._tp(tp))

    def on_table_get(self, table: Any, key: Any) -> None:
        super().on_table_get(table, key)
        self.emit("incr", "table_keys_retrieved", 1, {"table": table_name(table)})

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        super().on_table_set(table, key, value)
        self.emit("incr", "table_keys_updated", 1, {"table": table_name(table)})

    def on_table_del(self, table: Any, key: Any) -> None:
        super().on_table_del(table, key)
        self.emit("incr", "table_keys_deleted", 1, {"table": table_name(table)})

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        super().on_commit_completed(consumer, state)
        if isinstance(state, float):
            self.emit("timing", "commit_latency", self.ms_since(state), {})

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        self.emit("incr", "topic_messages_sent", 1, {"topic": topic})
        return super().on_send_initiated(producer, topic, message, keysize, valsize)

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        super().on_send_completed(producer, state, metadata)
        self.emit("incr", "messages_sent", 1, {})
        if isinstance(state, float):
            self.emit("timing", "send_latency", self.ms_since(state), {})

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        super().on_send_error(producer, exc, state)
        self.emit("incr", "messages_send_failed", 1, {})
        if isinstance(state, float):
            self.emit("timing", "send_latency_for_error", self.ms_since(state), {})

    def _assignment(self, state: Any, counter: str) -> None:
        self.emit("incr", counter, 1, {})
        if isinstance(state, dict) and "time_start" in state:
            self.emit("timing", "assignment_latency", self.ms_since(state["time_start"]), {})

    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None:
        super().on_assignment_error(assignor, state, exc)
        self._assignment(state, "assignments_error")

    def on_assignment_completed(self, assignor: Any, state: Any) -> None:
        super().on_assignment_completed(assignor, state)
        self._assignment(state, "assignments_complete")

    def on_rebalance_start(self, app: Any) -> Any:
        state = super().on_rebalance_start(app)
        self.emit("incr", "rebalances", 1, {})
        return state

    def on_rebalance_return(self, app: Any, state: Any) -> None:
        super().on_rebalance_return(app, state)
        self.emit("decr", "rebalances", 1, {})
        self.emit("incr", "rebalances_recovering", 1, {})
        if isinstance(state, dict) and "latency_return" in state:
            self.emit("timing", "rebalance_return_latency", self.secs_to_ms(state["latency_return"]), {})

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        super().on_rebalance_end(app, state)
        self.emit("decr", "rebalances_recovering", 1, {})
        if isinstance(state, dict) and "latency_end" in state:
            self.emit("timing", "rebalance_end_latency", self.secs_to_ms(state["latency_end"]), {})

    def count(self, metric_name: str, count: int = 1) -> None:
        super().count(metric_name, count=count)
        self.emit("incr", metric_name, count, {})

    def on_tp_commit(self, tp_offsets: Mapping[TP, int]) -> None:
        super().on_tp_commit(tp_offsets)
        for tp, offset in tp_offsets.items():
            self.emit("gauge", "committed_offset", offset, self._tp(tp))

    def track_tp_end_offset(self, tp: TP, offset: int) -> None:
        super().track_tp_end_offset(tp, offset)
        self.emit("gauge", "end_offset", offset, self._tp(tp))

    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None:
        super().on_web_request_end(app, request, response, state, view=view)
        if isinstance(state, dict) and "status_code" in state:
            self.emit("incr", "http_status_code", 1, {"status_code": int(state["status_code"])})
            self.emit("timing", "http_response_latency", self.secs_to_ms(state["latency_end"]), {})
