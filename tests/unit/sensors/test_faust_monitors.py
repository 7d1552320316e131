"""Faust's client monitors (``faust.sensors.prometheus``, ``.statsd``, ``.datadog``) on their real
client libraries, on a worker run: what reaches a scrape of ``/metrics`` or a UDP listener."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry

import agentstream
from agentstream.faust.sensors.datadog import DatadogMonitor
from agentstream.faust.sensors.prometheus import PrometheusMonitor, setup_prometheus_sensors
from agentstream.faust.sensors.statsd import StatsdMonitor
from agentstream.testing import AppHarness


def _shop(name: str) -> agentstream.App:
    app = agentstream.App(f"{name}-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    orders = app.topic("orders", key_type=str, value_type=int)
    totals = app.Table("totals", default=int)

    @app.agent(orders)
    async def book(stream: Any) -> None:
        async for key, amount in stream.items():
            totals[key] += amount

    return app


async def _run(app: agentstream.App, *paths: str) -> dict[str, str]:
    """Three records through the app; the bodies of GET ``paths`` afterwards."""
    bodies: dict[str, str] = {}
    async with AppHarness(app) as h:
        for i in range(3):
            await h.send("orders", i + 1, key=f"k{i}")
        await h.wait_idle()
        async with aiohttp.ClientSession() as s:
            for path in paths:
                async with s.get(f"{h.web.url}{path}") as r:
                    assert r.status == 200, path
                    bodies[path] = await r.text()
    return bodies


async def test_prometheus_families_are_served_with_agentstreams_own_metrics() -> None:
    app = _shop("prom")
    registry = CollectorRegistry()
    setup_prometheus_sensors(app, registry=registry, name_prefix="shop")
    assert isinstance(app.monitor, PrometheusMonitor)
    body = (await _run(app, "/metrics"))["/metrics"]
    assert "agentstream_records_processed_total" in body  # agentstream's own, as before
    assert "shop_messages_received_total 3.0" in body
    assert 'shop_messages_received_per_topic_total{topic="orders"} 3.0' in body
    assert 'shop_table_operations_total{operation="keys_updated",table="table.totals"} 3.0' in body
    assert 'shop_topic_messages_sent_total{topic="topic.orders"} 3.0' in body  # the test's own sends
    assert "shop_total_sent_messages_total 3.0" in body
    assert "shop_consumer_commit_latency_count" in body
    assert "shop_total_events_total 3.0" in body


async def test_prometheus_at_another_path_is_a_page_of_its_own() -> None:
    app = _shop("prom-page")
    setup_prometheus_sensors(app, pattern="/faust-metrics", registry=CollectorRegistry())
    bodies = await _run(app, "/metrics", "/faust-metrics")
    prefix = app.id.replace("-", "_")
    assert f"{prefix}_messages_received_total 3.0" in bodies["/faust-metrics"]
    assert "agentstream_" not in bodies["/faust-metrics"]
    assert f"{prefix}_messages_received_total" not in bodies["/metrics"]
    assert f'{prefix}_http_status_codes_total{{status_code="200"}} 1.0' in bodies["/faust-metrics"]  # /metrics


@contextmanager
def _udp_listener() -> Iterator[tuple[int, Any]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)

    def received() -> list[str]:
        lines: list[str] = []
        while True:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                return lines
            lines.extend(data.decode().splitlines())

    try:
        yield sock.getsockname()[1], received
    finally:
        sock.close()


async def _collect(received: Any, want: str) -> list[str]:
    lines: list[str] = []
    for _ in range(200):  # the datadog client may send from its own thread
        lines.extend(received())
        if any(want in line for line in lines):
            break
        await asyncio.sleep(0.01)
    return lines


async def test_statsd_monitor_sends_fausts_metric_names() -> None:
    with _udp_listener() as (port, received):
        app = _shop("statsd")
        app.monitor = StatsdMonitor(host="127.0.0.1", port=port, prefix="shop")
        await _run(app)
        lines = await _collect(received, "shop.messages_received")
    assert lines.count("shop.messages_received:1|c") == 3
    assert lines.count("shop.topic.orders.messages_received:1|c") == 3
    assert lines.count("shop.table.totals.keys_updated:1|c") == 3
    assert lines.count("shop.topic.orders.messages_sent:1|c") == 3
    assert "shop.read_offset.orders.0:2|g" in lines
    assert any(line.startswith("shop.commit_latency:") and line.endswith("|ms") for line in lines)
    assert any(line.startswith("shop.committed_offset.orders.0:3|g") for line in lines)


async def test_datadog_monitor_sends_fausts_metric_names_with_tags() -> None:
    with _udp_listener() as (port, received):
        app = _shop("datadog")
        monitor = DatadogMonitor(host="127.0.0.1", port=port, prefix="shop")
        app.monitor = monitor
        await _run(app)
        monitor.client.client.flush()
        lines = await _collect(received, "shop.table_keys_updated")
    assert sum(line.startswith("shop.messages_received:1|c|#topic:orders,partition:0") for line in lines) == 3
    assert sum(line.startswith("shop.table_keys_updated:1|c|#table:totals") for line in lines) == 3
    assert sum(line.startswith("shop.topic_messages_sent:1|c|#topic:orders") for line in lines) == 3
    assert any(line.startswith("shop.commit_latency:") for line in lines)
