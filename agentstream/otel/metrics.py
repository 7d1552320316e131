"""Metrics through OpenTelemetry: Faust's ``OpenTelemetryMonitor`` and the worker's own numbers.

:class:`OpenTelemetryMonitor` is ``app.monitor`` (a :class:`~agentstream.sensors.Monitor`) that
also records Faust's instruments (``faust.messages.received``, ``faust.commit.latency``... the names,
units and attributes of faust-streaming's ``faust.sensors.otel``) from the sensor hooks.

:func:`setup_opentelemetry_metrics` makes one ``app.monitor`` and adds the worker's numbers, read from
its published status snapshot (:mod:`agentstream.worker.status`, what ``/metrics`` and ``/status``
read) every ``interval`` seconds, with the meanings ``/metrics`` gives them:

* ``agentstream.consumer.lag`` ({record}; topic, partition): high watermark minus the next offset to handle;
* ``agentstream.consumer.highwater`` ({offset}; topic, partition): the end offset seen in the last fetch;
* ``agentstream.records.processed`` ({record}; agent): records handled since the worker started;
* ``agentstream.commits`` ({commit}): commits done (tables, producer, offsets);
* ``agentstream.rebalances`` ({assignment}): assignments received (the group generation);
* ``agentstream.assigned.partitions`` ({partition}; role active/standby): partition numbers owned;
* ``agentstream.table.keys`` ({key}; table, partition, role): keys per local table partition;
* ``agentstream.table.partition.ready`` (1; table, partition, role): 1 when restored and serving;
* ``agentstream.table.restoring`` (1): 1 while tables are being restored;
* ``agentstream.table.restored_records`` ({record}): changelog records replayed into stores;
* ``agentstream.table.ready`` (%): served table partitions restored (restore progress);
* ``agentstream.rocksdb.memory`` (By; table, partition, role, kind memtables/table_readers/block_cache):
  what RocksDB holds in memory per partition;
* ``agentstream.errors`` ({record}; kind decode/agent/dead_lettered): records that failed.

Commit latency is Faust's ``faust.commit.latency`` (ms: the whole commit unit, from the caches'
flush to the checkpoints). The observable instruments report the last sample (none before the
first): a reader collecting more often than ``interval`` sees the same numbers again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..clock import clock_for
from ..exceptions import ImproperlyConfigured
from ..sensors import Monitor, stream_label
from ..transport.base import TP

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError:  # pragma: no cover - the otel extra is not installed
    otel_metrics = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ..worker.status import WorkerStatus

log = logging.getLogger(__name__)

__all__ = ["OTelMetrics", "OpenTelemetryMonitor", "setup_opentelemetry_metrics", "DEFAULT_INTERVAL"]

DEFAULT_INTERVAL = 5.0
"""Seconds between two samples of the worker's status for the observable instruments."""


def _require(what: str) -> None:
    if otel_metrics is None:
        raise ImproperlyConfigured(what, "opentelemetry-api is not installed", "pip install 'agentstream[otel]'")


class OTelMetrics:
    """Faust's instruments (faust-streaming's ``OTelMetrics``), made once from one meter; latencies
    in milliseconds, as Faust observes them."""

    def __init__(self, meter: Any) -> None:
        self.meter = meter
        counter, updown, histogram, gauge = (
            meter.create_counter,
            meter.create_up_down_counter,
            meter.create_histogram,
            meter.create_gauge,
        )
        self.messages_received = counter("faust.messages.received", unit="1", description="Messages received.")
        self.events_total = counter("faust.events.total", unit="1", description="Stream events processed by agents.")
        self.messages_sent = counter("faust.messages.sent", unit="1", description="Messages sent.")
        self.messages_send_errors = counter(
            "faust.messages.send_errors", unit="1", description="Messages that failed to send."
        )
        self.table_operations = counter(
            "faust.table.operations", unit="1", description="Table key operations (get/set/del)."
        )
        self.assignments = counter(
            "faust.assignments", unit="1", description="Partition assignor runs (completed/error)."
        )
        self.http_requests = counter(
            "faust.http.requests", unit="1", description="Web requests served, by status code."
        )
        self.custom_counts = counter("faust.custom.count", unit="1", description="Counters from Monitor.count().")
        self.messages_active = updown("faust.messages.active", unit="1", description="Messages being processed.")
        self.events_active = updown("faust.events.active", unit="1", description="Stream events being processed.")
        self.rebalances_active = updown("faust.rebalances.active", unit="1", description="Rebalances in progress.")
        self.rebalances_recovering = updown(
            "faust.rebalances.recovering", unit="1", description="Rebalances in their recovery phase."
        )
        self.events_runtime = histogram("faust.events.runtime", unit="ms", description="Time handling a stream event.")
        self.commit_latency = histogram("faust.commit.latency", unit="ms", description="Commit latency.")
        self.send_latency = histogram("faust.send.latency", unit="ms", description="Producer send latency (success).")
        self.send_error_latency = histogram(
            "faust.send.error_latency", unit="ms", description="Producer send latency (failure)."
        )
        self.assignment_latency = histogram(
            "faust.assignment.latency", unit="ms", description="Partition assignment latency."
        )
        self.rebalance_return_latency = histogram(
            "faust.rebalance.return_latency", unit="ms", description="Time until the assignment came back."
        )
        self.rebalance_end_latency = histogram(
            "faust.rebalance.end_latency", unit="ms", description="Total rebalance time, recovery included."
        )
        self.http_latency = histogram("faust.http.latency", unit="ms", description="Web request latency.")
        self.offset_read = gauge("faust.offset.read", unit="1", description="Last read offset per topic/partition.")
        self.offset_committed = gauge(
            "faust.offset.committed", unit="1", description="Last committed offset per topic/partition."
        )
        self.offset_end = gauge("faust.offset.end", unit="1", description="Last known end offset per topic/partition.")
        self.producer_buffer = gauge(
            "faust.producer.buffer", unit="1", description="Faust's threaded producer buffer (never set here)."
        )


def _stream_attr(stream: Any) -> str:
    label = stream_label(stream)
    if label.startswith("Stream:"):
        label = label[len("Stream:") :]
    return label.strip().strip("_").lower()


class OpenTelemetryMonitor(Monitor):
    """``app.monitor`` recording Faust's OpenTelemetry instruments (faust-streaming's names).

    ``meter``: the meter to use, by default the global provider's (a no-op until the application
    sets a MeterProvider); ``service_name``: that meter's name; ``metrics``: ready-made instruments.
    The worker's own numbers come with :func:`setup_opentelemetry_metrics` (or :meth:`observe_worker`)."""

    def __init__(
        self, *, meter: Any = None, service_name: str = "agentstream", metrics: OTelMetrics | None = None, **kwargs: Any
    ) -> None:
        _require(type(self).__name__)
        self.service_name = service_name
        self._meter = meter
        self._metrics = metrics
        self.status: WorkerStatus | None = None  # the last sample (observe_worker)
        self._observing = False
        super().__init__(**kwargs)

    @property
    def meter(self) -> Any:
        if self._meter is None:
            self._meter = otel_metrics.get_meter(self.service_name, __version__)
        return self._meter

    @property
    def metrics(self) -> OTelMetrics:
        if self._metrics is None:
            self._metrics = OTelMetrics(self.meter)
        return self._metrics

    # -- attributes --------------------------------------------------------------------------------
    @staticmethod
    def _tp_attrs(tp: TP, stream: Any = None) -> dict[str, Any]:
        attrs: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition}
        if stream is not None:
            attrs["stream"] = _stream_attr(stream)
        return attrs

    @staticmethod
    def _table_attrs(table: Any, operation: str) -> dict[str, Any]:
        return {"table": str(getattr(table, "name", table)), "operation": operation}

    # -- hooks (Monitor's counters, then Faust's instruments) -----------------------------------------
    def on_message_in(self, tp: TP, offset: int, message: Any) -> None:
        super().on_message_in(tp, offset, message)
        attrs = self._tp_attrs(tp)
        m = self.metrics
        m.messages_received.add(1, attrs)
        m.messages_active.add(1, attrs)
        m.offset_read.set(offset, attrs)

    def on_message_out(self, tp: TP, offset: int, message: Any) -> None:
        super().on_message_out(tp, offset, message)
        self.metrics.messages_active.add(-1, self._tp_attrs(tp))

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any:
        state = super().on_stream_event_in(tp, offset, stream, event)
        attrs = self._tp_attrs(tp, stream)
        self.metrics.events_total.add(1, attrs)
        self.metrics.events_active.add(1, attrs)
        return state

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        super().on_stream_event_out(tp, offset, stream, event, state)
        attrs = self._tp_attrs(tp, stream)
        self.metrics.events_active.add(-1, attrs)
        if isinstance(state, dict) and state.get("time_total") is not None:
            self.metrics.events_runtime.record(self.secs_to_ms(state["time_total"]), attrs)

    def on_table_get(self, table: Any, key: Any) -> None:
        super().on_table_get(table, key)
        self.metrics.table_operations.add(1, self._table_attrs(table, "get"))

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        super().on_table_set(table, key, value)
        self.metrics.table_operations.add(1, self._table_attrs(table, "set"))

    def on_table_del(self, table: Any, key: Any) -> None:
        super().on_table_del(table, key)
        self.metrics.table_operations.add(1, self._table_attrs(table, "del"))

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        return (super().on_send_initiated(producer, topic, message, keysize, valsize), topic)

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        started, topic = state if isinstance(state, tuple) else (state, getattr(metadata, "topic", None))
        super().on_send_completed(producer, started, metadata)
        self.metrics.messages_sent.add(1, {"topic": topic} if topic is not None else {})
        if isinstance(started, float):
            self.metrics.send_latency.record(self.ms_since(started))

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        started = state[0] if isinstance(state, tuple) else state
        super().on_send_error(producer, exc, started)
        self.metrics.messages_send_errors.add(1)
        if isinstance(started, float):
            self.metrics.send_error_latency.record(self.ms_since(started))

    def _assignment(self, state: Any, result: str) -> None:
        attrs = {"result": result}
        self.metrics.assignments.add(1, attrs)
        if isinstance(state, dict) and "time_start" in state:
            self.metrics.assignment_latency.record(self.ms_since(state["time_start"]), attrs)

    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None:
        super().on_assignment_error(assignor, state, exc)
        self._assignment(state, "error")

    def on_assignment_completed(self, assignor: Any, state: Any) -> None:
        super().on_assignment_completed(assignor, state)
        self._assignment(state, "completed")

    def on_rebalance_start(self, app: Any) -> Any:
        state = super().on_rebalance_start(app)
        self.metrics.rebalances_active.add(1)
        return state

    def on_rebalance_return(self, app: Any, state: Any) -> None:
        super().on_rebalance_return(app, state)
        if isinstance(state, dict) and "latency_return" in state:  # started here: the pair balances
            self.metrics.rebalances_active.add(-1)
            self.metrics.rebalances_recovering.add(1)
            self.metrics.rebalance_return_latency.record(self.secs_to_ms(state["latency_return"]))

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        super().on_rebalance_end(app, state)
        if isinstance(state, dict) and "latency_end" in state:
            if "latency_return" in state:
                self.metrics.rebalances_recovering.add(-1)
            else:  # ended without a return
                self.metrics.rebalances_active.add(-1)
            self.metrics.rebalance_end_latency.record(self.secs_to_ms(state["latency_end"]))

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        super().on_commit_completed(consumer, state)
        if isinstance(state, float):
            self.metrics.commit_latency.record(self.ms_since(state))

    def on_tp_commit(self, tp_offsets: Any) -> None:
        super().on_tp_commit(tp_offsets)
        for tp, offset in tp_offsets.items():
            self.metrics.offset_committed.set(offset, self._tp_attrs(tp))

    def track_tp_end_offset(self, tp: TP, offset: int) -> None:
        super().track_tp_end_offset(tp, offset)
        self.metrics.offset_end.set(offset, self._tp_attrs(tp))

    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None:
        super().on_web_request_end(app, request, response, state, view=view)
        if isinstance(state, dict) and "status_code" in state:
            self.metrics.http_requests.add(1, {"status_code": int(state["status_code"])})
            self.metrics.http_latency.record(self.secs_to_ms(state["latency_end"]))

    def count(self, metric_name: str, count: int = 1) -> None:
        super().count(metric_name, count=count)
        self.metrics.custom_counts.add(count, {"name": metric_name})

    # -- the worker's own numbers, from its status snapshot --------------------------------------------
    def observe_worker(self, app: Any, *, interval: float = DEFAULT_INTERVAL) -> None:
        """Add the worker's instruments (the module's table) and sample ``app``'s worker status every
        ``interval`` seconds while a worker runs (a startup task: call this before the worker starts)."""
        if interval <= 0:
            raise ValueError(f"observe_worker(interval={interval!r}): the sampling interval must be > 0 seconds")
        if self._observing:
            return
        self._observing = True
        self._create_observables()
        monitor = self

        async def opentelemetry_metrics_sampler() -> None:
            clock = clock_for(app)
            while True:
                try:
                    await monitor.refresh(app)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a failed sample is skipped, never stops the worker
                    log.warning("OpenTelemetry metrics: status sample failed: %r", exc)
                await clock.sleep(interval)

        app.startup_tasks.append(opentelemetry_metrics_sampler)

    async def refresh(self, app: Any) -> None:
        """Take a sample of ``app``'s worker status now (what the sampler does every interval)."""
        worker = getattr(app, "worker", None)
        if worker is not None:
            self.status = await worker.status()

    def _create_observables(self) -> None:
        meter = self.meter

        def observable(kind: str, name: str, unit: str, description: str, read: Callable[[Any], Iterable[Any]]) -> None:
            def callback(options: CallbackOptions) -> Iterable[Observation]:
                status = self.status
                if status is None:
                    return []
                try:
                    return [Observation(value, attrs) for value, attrs in read(status)]
                except Exception as exc:  # pragma: no cover - a reader's bug never breaks an export
                    log.warning("OpenTelemetry metrics: %s not observed: %r", name, exc)
                    return []

            create = meter.create_observable_gauge if kind == "gauge" else meter.create_observable_counter
            create(name, callbacks=[callback], unit=unit, description=description)

        observable(
            "gauge",
            "agentstream.consumer.lag",
            "{record}",
            "Records not yet handled: high watermark minus position.",
            lambda st: [
                (p.lag, {"topic": p.tp.topic, "partition": p.tp.partition}) for p in st.partitions if p.lag is not None
            ],
        )
        observable(
            "gauge",
            "agentstream.consumer.highwater",
            "{offset}",
            "Partition end offset seen in the last fetch.",
            lambda st: [
                (p.highwater, {"topic": p.tp.topic, "partition": p.tp.partition})
                for p in st.partitions
                if p.highwater is not None
            ],
        )
        observable(
            "counter",
            "agentstream.records.processed",
            "{record}",
            "Records handled per agent since the worker started.",
            lambda st: [(n, {"agent": agent}) for agent, n in st.agents],
        )
        observable(
            "counter",
            "agentstream.commits",
            "{commit}",
            "Commits (tables, producer, offsets) done.",
            lambda st: [(st.commits, {})],
        )
        observable(
            "counter",
            "agentstream.rebalances",
            "{assignment}",
            "Assignments received.",
            lambda st: [(st.assignment.generation, {})],
        )
        observable(
            "gauge",
            "agentstream.assigned.partitions",
            "{partition}",
            "Partition numbers this worker owns, by role.",
            lambda st: [
                (len(st.assignment.active), {"role": "active"}),
                (len(st.assignment.standby), {"role": "standby"}),
            ],
        )
        observable(
            "gauge",
            "agentstream.table.keys",
            "{key}",
            "Keys per local table partition (RocksDB: an estimate).",
            lambda st: [
                (p.keys, {"table": t.name, "partition": p.partition, "role": _role(t, p)})
                for t in st.tables
                for p in t.parts
                if p.keys is not None
            ],
        )
        observable(
            "gauge",
            "agentstream.table.partition.ready",
            "1",
            "1 when the table partition is restored and serving.",
            lambda st: [
                (int(p.ready), {"table": t.name, "partition": p.partition, "role": _role(t, p)})
                for t in st.tables
                for p in t.parts
            ],
        )
        observable(
            "gauge",
            "agentstream.table.restoring",
            "1",
            "1 while tables are being restored.",
            lambda st: [(int(st.restore.restoring), {})],
        )
        observable(
            "counter",
            "agentstream.table.restored_records",
            "{record}",
            "Changelog records replayed into stores.",
            lambda st: [(st.restore.restored_records, {})],
        )
        observable(
            "gauge",
            "agentstream.table.ready",
            "%",
            "Served table partitions restored, in percent (restore progress).",
            lambda st: [(st.restore.ready_pct, {})],
        )
        observable(
            "gauge",
            "agentstream.rocksdb.memory",
            "By",
            "Bytes RocksDB holds in memory per table partition, by kind (its own estimates).",
            lambda st: [
                (size, {"table": t.name, "partition": p.partition, "role": _role(t, p), "kind": kind})
                for t in st.tables
                for p in t.parts
                for kind, size in p.memory
            ],
        )
        observable(
            "counter",
            "agentstream.errors",
            "{record}",
            "Records that failed to decode, made their agent raise, or were dead-lettered.",
            lambda st: [
                (st.errors.decode, {"kind": "decode"}),
                (st.errors.agent, {"kind": "agent"}),
                (st.errors.dead_lettered, {"kind": "dead_lettered"}),
            ],
        )


def _role(table: Any, part: Any) -> str:
    return "active" if part.active or table.is_global else "standby"


def setup_opentelemetry_metrics(
    app: Any, *, meter: Any = None, interval: float = DEFAULT_INTERVAL, service_name: str = "agentstream"
) -> OpenTelemetryMonitor:
    """``app.monitor`` becomes an :class:`OpenTelemetryMonitor` (Faust's instruments), plus the
    worker's own numbers sampled every ``interval`` seconds. Call it before the worker starts."""
    _require("setup_opentelemetry_metrics")
    monitor = OpenTelemetryMonitor(meter=meter, service_name=service_name)
    monitor.observe_worker(app, interval=interval)
    app.monitor = monitor
    return monitor
