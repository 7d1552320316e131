"""OpenTelemetry tracing (agentstream.otel.tracing, faust.contrib.opentelemetry) on a whole app run
in-process: the spans the SDK's in-memory exporter receives, and their parent links."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import agentstream
import agentstream.faust as faust
from agentstream.faust.contrib import opentelemetry as faust_otel
from agentstream.otel import tracing
from agentstream.testing import AppHarness

TRACEPARENT = "traceparent"


@pytest.fixture
def spans() -> tuple[Any, InMemorySpanExporter]:
    """A tracer on its own provider (the global one can be set once per process) and its exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def _by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    out: dict[str, ReadableSpan] = {}
    for span in finished:
        assert span.name not in out, f"two spans named {span.name!r}: {[s.name for s in finished]}"
        out[span.name] = span
    return out


def _parent_of(span: ReadableSpan, parent: ReadableSpan) -> bool:
    assert span.parent is not None, f"{span.name} has no parent"
    assert parent.context is not None
    return span.parent.span_id == parent.context.span_id and span.context.trace_id == parent.context.trace_id


def _traceparent(span: Any) -> bytes:
    """The W3C traceparent of ``span`` without its flags."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}".encode()


def _headers(h: AppHarness, topic: str) -> list[list[tuple[str, bytes]]]:
    return [list(r.headers or ()) for r in h.transport.read_topic(topic)]


def _pipeline(module: Any) -> tuple[Any, str]:
    """orders -> route (group_by customer, a table write) -> billing -> bill, written with ``module``'s
    names (agentstream, or Faust's through the compat package)."""
    app = module.App(f"otel-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2)

    class Order(module.Record):
        customer: str
        amount: int

    orders = app.topic("orders", value_type=Order)
    billing = app.topic("billing", value_type=Order)
    totals = app.Table("totals", default=int)

    @app.agent(orders)
    async def route(stream: Any) -> None:
        async for order in stream.group_by(Order.customer, name="by_customer"):
            totals[order.customer] += order.amount
            await billing.send(key=order.customer, value=order)

    @app.agent(billing)
    async def bill(stream: Any) -> None:
        async for _order in stream:
            pass

    return app, f"{app.id}-by_customer-repartition"


@pytest.mark.parametrize(
    ("module", "setup"),
    [(agentstream, tracing.setup_opentelemetry), (faust, faust_otel.setup_opentelemetry)],
    ids=["agentstream", "faust.contrib.opentelemetry"],
)
async def test_one_trace_across_two_agents_and_a_repartition(
    spans: tuple[Any, InMemorySpanExporter], module: Any, setup: Callable[..., Any]
) -> None:
    tracer, exporter = spans
    app, repartition = _pipeline(module)
    sensor = setup(app, tracer=tracer)
    assert isinstance(sensor, tracing.OpenTelemetrySensor)
    async with AppHarness(app) as h:
        with tracer.start_as_current_span("checkout", kind=SpanKind.PRODUCER):
            # a stale traceparent on the input: the send carries the current span's, once
            stale = [(TRACEPARENT, b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")]
            await h.send("orders", {"customer": "c1", "amount": 5}, key="o1", headers=stale)
        await h.wait_idle()
        got = _by_name(tuple(exporter.get_finished_spans()))
        assert set(got) == {"checkout", "orders process", f"{repartition} process", "billing process"}
        checkout, first, second, billed = (
            got["checkout"],
            got["orders process"],
            got[f"{repartition} process"],
            got["billing process"],
        )
        assert _parent_of(first, checkout) and _parent_of(second, first) and _parent_of(billed, second)
        assert first.kind is SpanKind.CONSUMER
        assert first.attributes is not None and first.attributes["agentstream.agent"] == "route"
        assert first.attributes["messaging.destination.name"] == "orders"
        assert second.attributes is not None and second.attributes["messaging.kafka.message.key"] == "c1"
        assert [(e.name, dict(e.attributes or {})) for e in second.events] == [
            ("table set", {"agentstream.table": "totals"})
        ]
        # every record written carries exactly one traceparent: its sender's span
        for topic, sender in (("orders", checkout), (repartition, first), ("billing", second)):
            (headers,) = _headers(h, topic)
            values = [v[:-3] for k, v in headers if k == TRACEPARENT]  # less the flags
            assert values == [_traceparent(sender)], topic


async def test_ask_and_its_reply_are_one_trace(spans: tuple[Any, InMemorySpanExporter]) -> None:
    tracer, exporter = spans
    app = agentstream.App(f"otel-ask-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)

    @app.agent(app.topic("numbers", value_type=int))
    async def double(stream: Any) -> Any:
        async for value in stream:
            yield value * 2

    tracing.setup_opentelemetry(app, tracer=tracer)
    async with AppHarness(app) as h:
        with tracer.start_as_current_span("caller"):
            assert await double.ask(21) == 42
        await h.wait_idle()
    got = _by_name(tuple(exporter.get_finished_spans()))
    replies = app._replies.topic_name if app._replies is not None else None
    names = set(got)
    (reply_name,) = [n for n in names if n.endswith(" receive")]
    assert replies is None or reply_name == f"{replies} receive"
    assert names == {"caller", "double ask", "numbers process", reply_name}
    caller, ask, handled, reply = got["caller"], got["double ask"], got["numbers process"], got[reply_name]
    assert _parent_of(ask, caller) and _parent_of(handled, ask) and _parent_of(reply, handled)
    assert ask.kind is SpanKind.CLIENT and ask.status.is_ok


async def test_a_traceparent_from_outside_is_parsed_with_bounds(spans: tuple[Any, InMemorySpanExporter]) -> None:
    """A header too long or not W3C is not a parent: the span starts a trace of its own."""
    tracer, exporter = spans
    app = agentstream.App(f"otel-bad-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)

    @app.agent(app.topic("in", value_type=int))
    async def sink(stream: Any) -> None:
        async for _ in stream:
            pass

    tracing.setup_opentelemetry(app, tracer=tracer)
    good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with AppHarness(app) as h:
        t = app.topic("in")
        for header in (good.encode(), good.encode() + b" " * 600, b"\xff not a traceparent"):
            # raw sends from outside any span: written as given
            await t.send_raw(b"k", b"1", headers=[(TRACEPARENT, header)])
        await h.wait_idle()
    handled = [s for s in exporter.get_finished_spans() if s.name == "in process"]
    assert len(handled) == 3
    assert handled[0].parent is not None and handled[0].parent.span_id == 0xB7AD6B7169203331
    assert handled[0].context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert [s.parent for s in handled[1:]] == [None, None]


def test_inject_replaces_and_leaves_other_headers() -> None:
    tracer = TracerProvider().get_tracer("test")
    headers: list[tuple[str, bytes]] = [("Traceparent", b"old"), ("x", b"1"), ("traceparent", b"old2")]
    with tracer.start_as_current_span("s") as span:
        tracing.inject_context(headers)
    assert headers[0] == ("x", b"1") and len(headers) == 2
    assert headers[1][0] == TRACEPARENT and headers[1][1][:-3] == _traceparent(span)
    untouched: list[tuple[str, bytes]] = [(TRACEPARENT, b"kept")]
    tracing.inject_context(untouched)  # no current span: nothing to carry, nothing replaced
    assert untouched == [(TRACEPARENT, b"kept")]


def test_setup_registers_one_sensor() -> None:
    app = agentstream.App(f"otel-one-{uuid.uuid4().hex[:6]}", broker="memory://")
    first = tracing.setup_opentelemetry(app)
    assert first is not None and tracing.setup_opentelemetry(app) is first
    assert [s for s in app.sensors if isinstance(s, tracing.OpenTelemetrySensor)] == [first]


def test_records_acknowledged_together_leave_no_ended_span_current() -> None:
    """A batch (``stream.take``): two records in hand, acknowledged in order. While the batch is
    handled the last record's span is current; afterwards none is (not the first, already ended)."""
    from opentelemetry import trace

    from agentstream.events import Event
    from agentstream.transport.base import TP
    from agentstream.transport.message import Message

    sensor = tracing.OpenTelemetrySensor(tracer=TracerProvider().get_tracer("test"))
    tp = TP("t", 0)
    events = [Event(None, i, Message("t", 0, i, i, 0, None, b"1", None, 0, 1, ())) for i in range(2)]
    before = trace.get_current_span()
    states = [sensor.on_stream_event_in(tp, i, None, e) for i, e in enumerate(events)]
    assert trace.get_current_span() is states[1]["span"]
    spans = [s["span"] for s in states]
    for i, (event, state) in enumerate(zip(events, states)):
        sensor.on_stream_event_out(tp, i, None, event, state)
    assert trace.get_current_span() is before
    assert all(not s.is_recording() for s in spans)
