"""Faust's documented wire format, both ways (issue 14).

Faust's defaults: keys ``raw`` (str as UTF-8, typed keys parsed from their text), values ``json``
(orjson; datetimes ISO 8601, Decimals and UUIDs as strings, sets and tuples as lists), Records
with ``"__faust": {"ns": "module.Class"}`` (on by default, nested records too). The bytes below
are written by hand in that format (as a Faust producer would send them); agentstream must
decode them, and what agentstream writes must be the same bytes a Faust reader expects.
"""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import orjson
import pytest

import agentstream
from agentstream import codecs
from agentstream.faust.serializers import codecs as faust_codecs
from agentstream.testing import AppHarness
from agentstream.transport.memory import MemoryTransport

NS = __name__


class Line(agentstream.Record):
    sku: str
    qty: int


class Order(agentstream.Record):
    id: int
    customer: str
    lines: list[Line]
    at: dt.datetime
    total: Decimal
    tags: set[str]


FAUST_ORDER = (
    b'{"id": 7, "customer": "alice", "lines": [{"sku": "a", "qty": 2, "__faust": {"ns": "'
    + NS.encode()
    + b'.Line"}}], "at": "2024-01-02T03:04:05Z", "total": "9.99", "tags": ["x"], "__faust": {"ns": "'
    + NS.encode()
    + b'.Order"}}'
)
ORDER = Order(7, "alice", [Line("a", 2)], dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC), Decimal("9.99"), {"x"})


def _app() -> agentstream.App:
    return agentstream.App(f"interop-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=4)


def test_faust_bytes_decode_with_and_without_a_declared_type() -> None:
    app = _app()
    untyped = app.topic("untyped")
    typed = app.topic("typed", key_type=str, value_type=Order)
    assert untyped.value_codec.loads(FAUST_ORDER) == ORDER  # the __faust tags rebuild the records
    assert typed.value_codec.loads(FAUST_ORDER) == ORDER
    # a payload without the tag (a non-Faust producer) decodes where the type is declared
    plain = orjson.dumps(
        {
            "id": 7,
            "customer": "alice",
            "lines": [{"sku": "a", "qty": 2}],
            "at": "2024-01-02T03:04:05+00:00",
            "total": "9.99",
            "tags": ["x"],
        }
    )
    assert typed.value_codec.loads(plain) == ORDER
    assert untyped.value_codec.loads(plain) == orjson.loads(plain)  # no type, no tag: plain data
    # keys: raw; untyped keys stay bytes (Faust), typed keys are parsed from their text
    assert untyped.key_codec.loads(b"alice") == b"alice"
    assert typed.key_codec.loads(b"alice") == "alice"
    assert app.topic("by_int", key_type=int).key_codec.loads(b"42") == 42
    assert app.topic("by_dec", key_type=Decimal).key_codec.loads(b"1.50") == Decimal("1.50")
    # value_type=str is JSON, as in Faust ("bob" with its quotes on the wire)
    assert app.topic("names", value_type=str).value_codec.loads(b'"bob"') == "bob"


def test_what_agentstream_writes_is_fausts_format() -> None:
    app = _app()
    topic = app.topic("orders", key_type=str, value_type=Order)
    kb, vb = topic.encode("alice", ORDER)
    assert kb == b"alice"
    assert vb is not None and orjson.loads(vb) == orjson.loads(FAUST_ORDER)
    assert app.topic("n", key_type=int).encode(42, 1) == (b"42", b"1")
    assert app.topic("s", value_type=str).encode("k", "bob") == (b"k", b'"bob"')


def test_faust_serializer_names_and_chains() -> None:
    app = _app()
    b64 = app.topic("b64", value_serializer="json|binary", value_type=Order)
    wire = base64.b64encode(FAUST_ORDER)
    assert b64.value_codec.loads(wire) == ORDER
    assert orjson.loads(base64.b64decode(b64.value_codec.dumps(ORDER) or b"")) == orjson.loads(FAUST_ORDER)
    binary = app.topic("bin", value_serializer="binary")
    assert binary.value_codec.dumps(b"\x00\x01") == base64.b64encode(b"\x00\x01")
    assert app.topic("raw", value_serializer="raw").value_codec.loads(b"xyz") == b"xyz"

    class Upper(faust_codecs.Codec):
        def _dumps(self, obj: Any) -> bytes:
            return str(obj).upper().encode()

        def _loads(self, s: bytes) -> Any:
            return s.decode().lower()

    faust_codecs.register("interop-upper", Upper())
    shout = app.topic("shout", value_serializer="interop-upper", key_serializer="interop-upper")
    assert shout.encode("k", "hi") == (b"K", b"HI")
    assert shout.value_codec.loads(b"HI") == "hi"
    table = app.Table("shouts", value_serializer="interop-upper")
    assert table.value_codec.dumps("x") == b"X"


def test_group_by_and_tables_take_faust_serializers() -> None:
    app = _app()
    t = app.Table("t", key_type=int, key_serializer="json", value_type=Line)
    assert t.key_codec.dumps(5) == b"5" and t.key_codec.loads(b"5") == 5
    untyped = app.Table("u")
    assert untyped.key_codec.dumps("alice") == b"alice"  # Faust's raw keys
    assert untyped.key_codec.loads(b"alice") == "alice"  # and read back as the text written


@pytest.mark.asyncio
async def test_a_faust_produced_stream_through_an_agent_into_a_table_changelog() -> None:
    app = _app()
    orders = app.topic("orders")  # no types: exactly what a Faust app with defaults declares
    latest = app.Table("latest")
    seen: list[Any] = []

    @app.agent(orders)
    async def keep(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            seen.append((event.key, event.value))
            latest[event.value.customer] = event.value

    async with AppHarness(app) as h:
        producer = app.transport.producer()
        await producer.start()
        await producer.send("orders", b"alice", FAUST_ORDER)
        await producer.flush()
        await producer.stop()
        await h.wait_idle()
        assert seen == [(b"alice", ORDER)]
        assert latest["alice"] == ORDER
        changelog = MemoryTransport.read_topic(app.transport, f"{app.id}-latest-changelog")  # type: ignore[arg-type]
    assert [(m.key, orjson.loads(m.value)) for m in changelog] == [(b"alice", orjson.loads(FAUST_ORDER))]
    assert codecs.get("json").loads(changelog[0].value) == ORDER


def test_agents_take_faust_serializers_for_their_own_topic() -> None:
    app = _app()

    @app.agent(value_type=str, value_serializer="json|binary", key_serializer="json")
    async def shout(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    topic = shout.channel
    assert topic.encode("k", "hi") == (b'"k"', base64.b64encode(b'"hi"'))
    assert topic.value_codec.loads(base64.b64encode(b'"hi"')) == "hi"


def test_the_apps_default_serializers_apply_to_tables_too() -> None:
    app = agentstream.App(f"jsonkeys-{uuid.uuid4().hex[:6]}", broker="memory://", key_serializer="json")
    table = app.Table("t")
    assert table.key_codec.dumps("alice") == b'"alice"'  # as the app's topics encode keys
    assert app.topic("x").key_codec.dumps("alice") == b'"alice"'
    assert app.Table("raw", key_serializer="raw").key_codec.dumps("alice") == b"alice"
