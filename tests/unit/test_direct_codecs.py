"""Codecs chosen once per topic: the direct encoders and decoders the send and take paths use
give exactly what the codec gives, and anything they do not take goes to the codec itself (its
conversion, or its error with its message)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentstream
from agentstream import codecs
from agentstream.exceptions import SerializationError, ValueDecodeError
from agentstream.testing import AppHarness

ENCODING = [
    codecs.RawCodec(),
    codecs.UntypedKeyCodec(),
    codecs.TypedRawCodec(str),
    codecs.TypedRawCodec(int),
    codecs.StrCodec(),
    codecs.JSONCodec(),
    codecs.JSONCodec(int),
    codecs.JSONCodec(str),
]
scalars = st.one_of(st.text(), st.binary(), st.integers(), st.floats(allow_nan=True), st.booleans())


@given(value=scalars)
def test_direct_encoders_give_the_codecs_bytes(value: Any) -> None:
    for codec in ENCODING:
        enc = codecs.direct_encoders(codec).get(type(value))
        if enc is None:
            continue
        try:
            got = enc(value)
        except Exception:
            continue  # Topic.send then asks the codec (e.g. an int past 64 bits for orjson)
        assert got == codec.dumps(value), (codec, value)


def test_a_codec_subclass_gets_no_direct_encoder_or_decoder() -> None:
    class Shouting(codecs.JSONCodec):
        def dumps(self, obj: Any) -> bytes | None:
            return b"!" + (super().dumps(obj) or b"")

    assert codecs.direct_encoders(Shouting()) == {}
    shouting = Shouting(str)
    assert codecs.direct_decoder(shouting).__self__ is shouting  # type: ignore[attr-defined]


DECODING = [
    codecs.TypedRawCodec(str),
    codecs.StrCodec(),
    codecs.RawCodec(),
    codecs.JSONCodec(str),
    codecs.JSONCodec(int),
    codecs.JSONCodec(float),
    codecs.JSONCodec(dict),
    codecs.UntypedKeyCodec(),
]
payloads = st.one_of(
    st.binary(max_size=20),
    st.text(max_size=20).map(str.encode),
    st.sampled_from([b"3", b"3.5", b'"x"', b"true", b"null", b'{"a": 1}', b"[1]", b"\xff", b"{"]),
)


@given(data=payloads)
def test_direct_decoders_agree_with_the_codec_or_defer_to_it(data: bytes) -> None:
    for codec in DECODING:
        direct = codecs.direct_decoder(codec)
        try:
            expected: Any = ("value", codec.loads(data))
        except ValueDecodeError as exc:
            expected = ("error", type(exc))
        try:
            got: Any = ("value", direct(data))
        except Exception:
            continue  # the task then asks the codec: its value or error counts
        assert got == expected and type(got[1]) is type(expected[1]), (codec, data)


pytestmark_async = pytest.mark.asyncio


@pytestmark_async
async def test_a_payload_the_direct_decoder_refuses_is_decoded_by_the_codec_or_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = agentstream.App(f"direct-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    numbers = app.topic("numbers", value_type=float)
    seen: list[Any] = []

    @app.agent(numbers)
    async def collect(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for value in stream:
            seen.append(value)

    async with AppHarness(app) as h:
        with caplog.at_level(logging.WARNING):
            await h.send("numbers", 1.5)
            await h.send("numbers", 3)  # JSON int: the codec makes it a float
            await numbers.send_raw(None, b'"not a number"')
            await h.send("numbers", 2.5)
            await h.wait_idle()
    assert seen == [1.5, 3.0, 2.5] and type(seen[1]) is float
    assert "numbers[0]@2" in caplog.text and "cannot decode" in caplog.text


@pytestmark_async
async def test_send_encodes_what_the_codec_encodes_where_the_direct_encoder_fails() -> None:
    app = agentstream.App(f"direct-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    counts = app.topic("counts", key_type=str, value_type=int)
    big = 2**70  # past orjson's 64-bit integers: the codec's own error, with its fix
    with pytest.raises(SerializationError) as refused:
        counts.value_codec.dumps(big)
    async with AppHarness(app) as h:
        with pytest.raises(SerializationError) as raised:
            await counts.send(key="k", value=big)
        assert str(raised.value) == str(refused.value)
        await (await counts.send(key="k", value=7))  # delivered
        assert h.read("counts") == [("k", 7)]


def test_a_table_key_its_direct_encoder_refuses_gets_the_codecs_error_naming_the_table() -> None:
    """An int key past 64 bits under a JSON key codec: the table's fast path (orjson) refuses it
    with a bare TypeError; the codec's SerializationError, naming the table, is what reaches the app."""
    app = agentstream.App(f"direct-{uuid.uuid4().hex[:6]}", broker="memory://", key_serializer="json")
    table = app.Table("t", default=int)
    with pytest.raises(SerializationError) as refused:
        table._key_dumps(2**70)
    assert str(refused.value).startswith("table 't' cannot encode key 1180591620717411303424")
    assert table._key_dumps(7) == b"7"  # the fast path still serves what it can
