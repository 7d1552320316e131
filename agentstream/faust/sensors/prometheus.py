"""``faust.sensors.prometheus``: Faust's Prometheus monitor on the real ``prometheus_client``.

``setup_prometheus_sensors(app)`` makes ``app.monitor`` a :class:`PrometheusMonitor` that keeps
Faust's metric families (``<app>_messages_received``, ``<app>_table_operations``...: the same
names, labels and millisecond buckets, so Faust dashboards keep working) in a registry, and
serves the registry: at ``/metrics`` it is appended to agentstream's own metrics (one scrape
gives both), at any other ``pattern`` it is an app page of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentstream.exceptions import ImproperlyConfigured
from agentstream.sensors import Monitor
from agentstream.transport.base import TP

from ._labels import stream_metric_label, table_name

try:
    import prometheus_client
    from prometheus_client import REGISTRY, Counter, Gauge, Histogram, generate_latest
except ImportError:  # pragma: no cover - the extra is not installed
    prometheus_client = None  # type: ignore[assignment]
    REGISTRY = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["setup_prometheus_sensors", "PrometheusMonitor", "FaustMetrics", "MS_LATENCY_BUCKETS"]

MS_LATENCY_BUCKETS = (5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000)
"""Latencies are observed in milliseconds (Faust's): buckets from 5 ms to 10 s."""

# attribute: (kind, name suffix, help, labels), Faust's families
_FAMILIES: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "messages_received": ("counter", "messages_received", "Total messages received", ()),
    "active_messages": ("gauge", "active_messages", "Total active messages", ()),
    "messages_received_per_topics": (
        "counter",
        "messages_received_per_topic",
        "Messages received per topic",
        ("topic",),
    ),
    "messages_received_per_topics_partition": (
        "gauge",
        "messages_received_per_topics_partition",
        "Messages received per topic/partition",
        ("topic", "partition"),
    ),
    "events_runtime_latency": ("histogram", "events_runtime_ms", "Events runtime in ms", ()),
    "total_events": ("counter", "total_events", "Total events received", ()),
    "total_active_events": ("gauge", "total_active_events", "Total active events", ()),
    "total_events_per_stream": ("counter", "total_events_per_stream", "Events received per Stream", ("stream",)),
    "table_operations": ("counter", "table_operations", "Total table operations", ("table", "operation")),
    "topic_messages_sent": ("counter", "topic_messages_sent", "Total messages sent per topic", ("topic",)),
    "total_sent_messages": ("counter", "total_sent_messages", "Total messages sent", ()),
    "producer_send_latency": ("histogram", "producer_send_latency", "Producer send latency in ms", ()),
    "total_error_messages_sent": ("counter", "total_error_messages_sent", "Total error messages sent", ()),
    "producer_error_send_latency": (
        "histogram",
        "producer_error_send_latency",
        "Producer error send latency in ms",
        (),
    ),
    "assignment_operations": (
        "counter",
        "assignment_operations",
        "Total assigment operations (completed/error)",
        ("operation",),
    ),
    "assign_latency": ("histogram", "assign_latency", "Assignment latency in ms", ()),
    "total_rebalances": ("gauge", "total_rebalances", "Total rebalances", ()),
    "total_rebalances_recovering": ("gauge", "total_rebalances_recovering", "Total rebalances recovering", ()),
    "rebalance_done_consumer_latency": (
        "histogram",
        "rebalance_done_consumer_latency",
        "Consumer replying that rebalance is done to broker in ms",
        (),
    ),
    "rebalance_done_latency": ("histogram", "rebalance_done_latency", "Rebalance finished latency in ms", ()),
    "count_metrics_by_name": ("gauge", "metrics_by_name", "Total metrics by name", ("metric",)),
    "http_status_codes": ("counter", "http_status_codes", "Total http_status code", ("status_code",)),
    "http_latency": ("histogram", "http_latency", "Http response latency in ms", ()),
    "topic_partition_end_offset": (
        "gauge",
        "topic_partition_end_offset",
        "Offset ends per topic/partition",
        ("topic", "partition"),
    ),
    "topic_partition_offset_commited": (
        "gauge",
        "topic_partition_offset_commited",
        "Offset commited per topic/partition",
        ("topic", "partition"),
    ),
    "consumer_commit_latency": ("histogram", "consumer_commit_latency", "Consumer commit latency in ms", ()),
}


def _require() -> None:
    if prometheus_client is None:
        raise ImproperlyConfigured(
            "prometheus sensors", "prometheus_client is not installed", "pip install 'agentstream[metrics]'"
        )


class FaustMetrics:
    """Faust's metric families, registered in one registry under one name prefix (attributes
    named as Faust's ``FaustMetrics`` fields)."""

    def __init__(self, metrics: Mapping[str, Any]) -> None:
        self._metrics = dict(metrics)
        for attr, metric in metrics.items():
            setattr(self, attr, metric)

    def __getattr__(self, name: str) -> Any:  # the families, for mypy (set in __init__)
        raise AttributeError(name)

    @classmethod
    def create(cls, registry: Any, app_name: str) -> FaustMetrics:
        _require()
        kinds: dict[str, Any] = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}
        made: dict[str, Any] = {}
        for attr, (kind, suffix, help_text, labels) in _FAMILIES.items():
            options: dict[str, Any] = {"registry": registry}
            if kind == "histogram":
                options["buckets"] = MS_LATENCY_BUCKETS
            made[attr] = kinds[kind](f"{app_name}_{suffix}", help_text, list(labels), **options)
        return cls(made)

    def clear_topic_related_metrics(self) -> None:
        """Drop the per-topic and per-partition series (a rebalance moves partitions away)."""
        for attr in (
            "messages_received_per_topics_partition",
            "topic_partition_end_offset",
            "topic_partition_offset_commited",
            "messages_received_per_topics",
            "topic_messages_sent",
        ):
            self._metrics[attr].clear()


class PrometheusMonitor(Monitor):
    """Faust's ``PrometheusMonitor``: the Monitor's counters, also kept in Prometheus families."""

    ERROR = "error"
    COMPLETED = "completed"
    KEYS_RETRIEVED = "keys_retrieved"
    KEYS_UPDATED = "keys_updated"
    KEYS_DELETED = "keys_deleted"

    def __init__(self, metrics: FaustMetrics, registry: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._metrics = metrics
        self._registry = registry
        # What agentstream's /metrics appends (set by setup_prometheus_sensors for pattern /metrics)
        self.metrics_exposition: Callable[[], bytes] | None = None

    def prometheus_exposition(self) -> bytes:
        """The registry in Prometheus' text format (agentstream's ``/metrics`` appends it)."""
        return bytes(generate_latest(self._registry if self._registry is not None else REGISTRY))

    def on_message_in(self, tp: TP, offset: int, message: Any) -> None:
        super().on_message_in(tp, offset, message)
        m = self._metrics
        m.messages_received.inc()
        m.active_messages.inc()
        m.messages_received_per_topics.labels(topic=tp.topic).inc()
        m.messages_received_per_topics_partition.labels(topic=tp.topic, partition=tp.partition).set(offset)

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any:
        state = super().on_stream_event_in(tp, offset, stream, event)
        m = self._metrics
        m.total_events.inc()
        m.total_active_events.inc()
        m.total_events_per_stream.labels(stream=f"stream.{stream_metric_label(stream)}.events").inc()
        return state

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        super().on_stream_event_out(tp, offset, stream, event, state)
        self._metrics.total_active_events.dec()
        if state is not None and self.events_runtime:
            self._metrics.events_runtime_latency.observe(self.secs_to_ms(self.events_runtime[-1]))

    def on_message_out(self, tp: TP, offset: int, message: Any) -> None:
        super().on_message_out(tp, offset, message)
        self._metrics.active_messages.dec()

    def _table_op(self, table: Any, operation: str) -> None:
        self._metrics.table_operations.labels(table=f"table.{table_name(table)}", operation=operation).inc()

    def on_table_get(self, table: Any, key: Any) -> None:
        super().on_table_get(table, key)
        self._table_op(table, self.KEYS_RETRIEVED)

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        super().on_table_set(table, key, value)
        self._table_op(table, self.KEYS_UPDATED)

    def on_table_del(self, table: Any, key: Any) -> None:
        super().on_table_del(table, key)
        self._table_op(table, self.KEYS_DELETED)

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        super().on_commit_completed(consumer, state)
        if isinstance(state, float):
            self._metrics.consumer_commit_latency.observe(self.ms_since(state))

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        self._metrics.topic_messages_sent.labels(topic=f"topic.{topic}").inc()
        return super().on_send_initiated(producer, topic, message, keysize, valsize)

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        super().on_send_completed(producer, state, metadata)
        self._metrics.total_sent_messages.inc()
        if isinstance(state, float):
            self._metrics.producer_send_latency.observe(self.ms_since(state))

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        super().on_send_error(producer, exc, state)
        self._metrics.total_error_messages_sent.inc()
        if isinstance(state, float):
            self._metrics.producer_error_send_latency.observe(self.ms_since(state))

    def _assignment(self, state: Any, operation: str) -> None:
        self._metrics.assignment_operations.labels(operation=operation).inc()
        if isinstance(state, dict) and "time_start" in state:
            self._metrics.assign_latency.observe(self.ms_since(state["time_start"]))

    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None:
        super().on_assignment_error(assignor, state, exc)
        self._assignment(state, self.ERROR)

    def on_assignment_completed(self, assignor: Any, state: Any) -> None:
        super().on_assignment_completed(assignor, state)
        self._assignment(state, self.COMPLETED)

    def on_rebalance_start(self, app: Any) -> Any:
        state = super().on_rebalance_start(app)
        self._metrics.clear_topic_related_metrics()
        self._metrics.total_rebalances.inc()
        return state

    def on_rebalance_return(self, app: Any, state: Any) -> None:
        super().on_rebalance_return(app, state)
        self._metrics.total_rebalances.dec()
        self._metrics.total_rebalances_recovering.inc()
        if isinstance(state, dict) and "latency_return" in state:
            self._metrics.rebalance_done_consumer_latency.observe(self.secs_to_ms(state["latency_return"]))

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        super().on_rebalance_end(app, state)
        self._metrics.clear_topic_related_metrics()
        self._metrics.total_rebalances_recovering.dec()
        if isinstance(state, dict) and "latency_end" in state:
            self._metrics.rebalance_done_latency.observe(self.secs_to_ms(state["latency_end"]))

    def count(self, metric_name: str, count: int = 1) -> None:
        super().count(metric_name, count=count)
        self._metrics.count_metrics_by_name.labels(metric=metric_name).inc(count)

    def on_tp_commit(self, tp_offsets: Mapping[TP, int]) -> None:
        super().on_tp_commit(tp_offsets)
        for tp, offset in tp_offsets.items():
            self._metrics.topic_partition_offset_commited.labels(topic=tp.topic, partition=tp.partition).set(offset)

    def track_tp_end_offset(self, tp: TP, offset: int) -> None:
        super().track_tp_end_offset(tp, offset)
        self._metrics.topic_partition_end_offset.labels(topic=tp.topic, partition=tp.partition).set(offset)

    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None:
        super().on_web_request_end(app, request, response, state, view=view)
        if isinstance(state, dict) and "status_code" in state:
            self._metrics.http_status_codes.labels(status_code=int(state["status_code"])).inc()
            self._metrics.http_latency.observe(self.secs_to_ms(state["latency_end"]))


def setup_prometheus_sensors(
    app: Any, pattern: str = "/metrics", registry: Any = None, name_prefix: str | None = None
) -> None:
    """Faust's: ``app.monitor`` becomes a :class:`PrometheusMonitor` whose families (prefixed
    ``name_prefix``, by default the app's name with ``-``/``.`` as ``_``) live in ``registry``
    (prometheus_client's global one by default), served at ``pattern``: at ``/metrics`` after
    agentstream's own metrics, elsewhere as an app page."""
    _require()
    registry = REGISTRY if registry is None else registry
    prefix = (name_prefix if name_prefix is not None else str(app.id)).replace("-", "_").replace(".", "_")
    monitor = PrometheusMonitor(FaustMetrics.create(registry, prefix), registry=registry)
    app.monitor = monitor
    if pattern.rstrip("/") == "/metrics":
        monitor.metrics_exposition = monitor.prometheus_exposition  # appended to the built-in /metrics
        return

    from aiohttp import web

    async def metrics_handler(web_: Any, request: Any) -> Any:
        return web.Response(body=monitor.prometheus_exposition(), headers={"Content-Type": "text/plain; version=0.0.4"})

    app.page(pattern)(metrics_handler)
