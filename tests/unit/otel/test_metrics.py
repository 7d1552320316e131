"""OpenTelemetry metrics (agentstream.otel.metrics, faust.sensors.otel) after a run of a whole app
in-process: what the SDK's in-memory metric reader collects."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import agentstream
from agentstream.faust.sensors.otel import OpenTelemetryMonitor as FaustOpenTelemetryMonitor
from agentstream.otel.metrics import OpenTelemetryMonitor, setup_opentelemetry_metrics
from agentstream.testing import AppHarness
from agentstream.worker.worker import Worker
from tests.support.waiting import until


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """instrument name -> [(attributes, value)] (a histogram's value: its count)."""
    data = reader.get_metrics_data()
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if value is None:
                        value = point.count  # type: ignore[attr-defined]
                    out.setdefault(metric.name, []).append((dict(point.attributes or {}), value))
    return out


def _one(points: dict[str, list[tuple[dict[str, Any], Any]]], instrument: str, **attrs: Any) -> Any:
    found = [v for a, v in points.get(instrument, []) if all(a.get(k) == w for k, w in attrs.items())]
    assert len(found) == 1, f"{instrument} {attrs}: {points.get(instrument)}"
    return found[0]


def _shop(app_id: str | None = None) -> tuple[agentstream.App, Any]:
    app = agentstream.App(app_id or f"otel-m-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2)
    orders = app.topic("orders", key_type=str, value_type=int)
    totals = app.Table("totals", default=int)

    @app.agent(orders)
    async def book(stream: Any) -> None:
        async for key, amount in stream.items():
            totals[key] += amount

    return app, orders


async def test_the_monitor_and_the_worker_numbers_reach_the_reader(tmp_path: Path) -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    app, _ = _shop()
    monitor = setup_opentelemetry_metrics(app, meter=meter, interval=3600)
    assert app.monitor is monitor
    async with AppHarness(app, store="rocksdb://", data_dir=str(tmp_path)) as h:
        for i in range(5):
            await h.send("orders", i + 1, key=f"k{i % 3}")
        await h.wait_idle()
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{h.web.url}/metrics") as r:
                scrape = await r.text()
        await monitor.refresh(app)
        status = await h.worker.status()
        points = _points(reader)
    # Faust's instruments, from the sensor hooks
    assert sum(v for _, v in points["faust.messages.received"]) == 5
    assert sum(v for _, v in points["faust.events.total"]) == 5
    assert sum(v for _, v in points["faust.messages.sent"]) == 5  # the test's sends (changelogs are not sends)
    assert _one(points, "faust.table.operations", table="totals", operation="set") == 5
    assert sum(v for _, v in points["faust.commit.latency"]) >= 1  # a histogram: commits recorded
    assert sum(v for _, v in points["faust.events.runtime"]) == 5
    # the worker's numbers, as /metrics has them
    assert _one(points, "agentstream.records.processed", agent="book") == 5
    for p in status.partitions:
        assert p.lag is not None
        assert _one(points, "agentstream.consumer.lag", topic=p.tp.topic, partition=p.tp.partition) == p.lag
        line = f'agentstream_consumer_lag{{topic="{p.tp.topic}",partition="{p.tp.partition}"}} {p.lag}'
        assert line in scrape
    assert {a["partition"] for a, _ in points["agentstream.consumer.lag"] if a["topic"] == "orders"} == {0, 1}
    assert _one(points, "agentstream.commits") == status.commits >= 1
    assert _one(points, "agentstream.rebalances") == status.assignment.generation >= 1
    assert _one(points, "agentstream.assigned.partitions", role="active") == 2
    assert _one(points, "agentstream.table.restoring") == 0
    assert _one(points, "agentstream.table.ready") == 100.0
    assert _one(points, "agentstream.table.partition.ready", table="totals", partition=0, role="active") == 1
    assert _one(points, "agentstream.table.restored_records") == 0
    assert _one(points, "agentstream.errors", kind="decode") == 0
    # RocksDB memory per partition and kind, the figures /metrics shows too
    memtables = [(a, v) for a, v in points["agentstream.rocksdb.memory"] if a["kind"] == "memtables"]
    assert {(a["table"], a["partition"]) for a, _ in memtables} == {("totals", 0), ("totals", 1)}
    assert all(v > 0 for _, v in memtables)
    assert 'agentstream_rocksdb_memory_bytes{table="totals",partition="0",role="active",kind="memtables"}' in scrape


async def test_restore_progress_is_observed() -> None:
    """A second worker restores the changelog the first wrote (memory stores start empty): the
    restored records, readiness and restore percentage reach the reader."""
    broker = f"memory://otel-restore-{uuid.uuid4().hex[:8]}"
    first, _ = _shop()
    first.settings = first.settings.replace(broker=broker, store="memory://", commit_interval=0.05, web_enabled=False)
    w1 = Worker(first)
    await w1.start()
    try:
        for i in range(6):
            await first.topics["orders"].send(key=f"k{i}", value=1)
        await until(lambda: sum(t.processed for t in w1.tasks.values()) >= 6, "the first worker handled 6 records")
    finally:
        await w1.stop()
    second, _ = _shop(first.id)
    second.settings = second.settings.replace(broker=broker, store="memory://", commit_interval=0.05, web_enabled=False)
    reader = InMemoryMetricReader()
    monitor = OpenTelemetryMonitor(meter=MeterProvider(metric_readers=[reader]).get_meter("test"))
    monitor.observe_worker(second, interval=3600)
    second.monitor = monitor
    w2 = Worker(second)
    await w2.start()
    try:
        await asyncio.wait_for(w2.assigned.wait(), 30)
        await monitor.refresh(second)
        points = _points(reader)
    finally:
        await w2.stop()
    assert _one(points, "agentstream.table.restored_records") == 6
    assert _one(points, "agentstream.table.ready") == 100.0
    assert _one(points, "agentstream.table.restoring") == 0


def test_faust_names() -> None:
    assert FaustOpenTelemetryMonitor is OpenTelemetryMonitor
    reader = InMemoryMetricReader()
    monitor = FaustOpenTelemetryMonitor(meter=MeterProvider(metric_readers=[reader]).get_meter("test"))
    monitor.count("orders_seen", 2)
    assert _one(_points(reader), "faust.custom.count", name="orders_seen") == 2
    with pytest.raises(ValueError, match="interval"):
        monitor.observe_worker(agentstream.App("x", broker="memory://"), interval=0)
