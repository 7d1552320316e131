"""Tracing on the real Kafka cluster: the trace context travels in Kafka record headers through a
repartition topic and a second agent's topic, and a record sent by a plain Kafka client with a
``traceparent`` of its own is parented to that client's span."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentstream
from agentstream.otel.tracing import setup_opentelemetry
from agentstream.worker.worker import Worker
from tests.kafka_cluster.shared import ClusterInfo

pytestmark = pytest.mark.asyncio

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
CLIENT_SPAN = 0x00F067AA0BA902B7


async def test_a_trace_crosses_a_repartition_and_a_second_agent_on_kafka(kafka: ClusterInfo, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = agentstream.App(
        f"otel-{suffix}",
        broker=kafka.url,
        store="memory://",
        data_dir=tmp_path,
        topic_partitions=2,
        commit_interval=0.2,
        session_timeout=6.0,
        heartbeat_interval=0.5,
        rebalance_timeout=6.0,
        web_enabled=False,
    )
    orders = app.topic(f"orders-{suffix}", value_type=dict)
    billing = app.topic(f"billing-{suffix}", key_type=str, value_type=dict)

    @app.agent(orders)
    async def route(stream: Any) -> None:
        async for order in stream.group_by(lambda o: o["customer"], name="by_customer"):
            await billing.send(key=order["customer"], value=order)

    @app.agent(billing)
    async def bill(stream: Any) -> None:
        async for _ in stream:
            pass

    setup_opentelemetry(app, tracer=provider.get_tracer("test"))
    worker = Worker(app)
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    try:
        await worker.start()
        await asyncio.wait_for(worker.assigned.wait(), 60)
        traceparent = f"00-{TRACE_ID:032x}-{CLIENT_SPAN:016x}-01".encode()
        await producer.send_and_wait(
            orders.name, b'{"customer": "c1"}', key=b"o1", headers=[("traceparent", traceparent)]
        )
        deadline = asyncio.get_running_loop().time() + 60
        while not any(s.name == f"{billing.name} process" for s in exporter.get_finished_spans()):
            assert asyncio.get_running_loop().time() < deadline, [s.name for s in exporter.get_finished_spans()]
            await asyncio.sleep(0.1)
    finally:
        await worker.stop()
        await producer.stop()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    first = spans[f"{orders.name} process"]
    second = spans[f"{app.id}-by_customer-repartition process"]
    third = spans[f"{billing.name} process"]
    assert first.parent is not None and first.parent.span_id == CLIENT_SPAN
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert third.parent is not None and third.parent.span_id == second.context.span_id
    assert {s.context.trace_id for s in (first, second, third)} == {TRACE_ID}
