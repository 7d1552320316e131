"""Codecs chosen once per topic: the send and take paths call the codec itself (compiled, with
its own one-call paths for common types), so what they give is what the codec gives, and a
payload the codec refuses is reported with its message."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentstream
from agentstream import codecs
from agentstream.exceptions import SerializationError, ValueDecodeError
from agentstream.models import json_dumps
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
def test_json_scalars_encode_as_json_dumps_does(value: Any) -> None:
    """JSONCodec.dumps encodes str/int/float/bool with one orjson call: the bytes (or the error)
    of the general path, json_dumps. Bytes are already encoded: sent as they are (Faust's
    serializers skip bytes)."""
    for codec in ENCODING:
        if not isinstance(codec, codecs.JSONCodec):
            continue
        try:
            expected: Any = ("bytes", value if type(value) is bytes else json_dumps(value))
        except SerializationError as exc:
            expected = ("error", str(exc))
        try:
            got: Any = ("bytes", codec.dumps(value))
        except SerializationError as exc:
            got = ("error", str(exc))
        assert got == expected, (codec, value)


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
def test_typed_json_decodes_to_the_declared_type_or_refuses(data: bytes) -> None:
    """A JSON payload of exactly the declared type is taken as it is; another one goes through
    the type's converter (an int for a float field becomes a float) or is refused."""
    for codec in DECODING:
        try:
            value = codec.loads(data)
        except ValueDecodeError:
            continue
        if isinstance(codec, codecs.JSONCodec) and codec.type_ is not None:
            assert type(value) is codec.type_, (codec, data, value)
            assert value == codec._convert(orjson.loads(data))  # type: ignore[misc]  # the converter agrees


async def test_a_codec_subclass_is_what_a_topic_and_a_task_use() -> None:
    """The built-in codecs are open to subclasses (in the compiled build too), and a topic's send
    and a task's decode call the subclass's methods, not a copy of the base class's."""

    class Shouting(codecs.StrCodec):
        def dumps(self, obj: Any) -> bytes | None:
            return b"!" + (super().dumps(obj) or b"")

        def loads(self, data: bytes | None) -> Any:
            text = super().loads(data)
            return None if text is None else text.upper()

    app = agentstream.App(f"direct-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    words = app.topic("words", value_serializer=Shouting())
    seen: list[Any] = []

    @app.agent(words)
    async def collect(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for value in stream:
            seen.append(value)

    async with AppHarness(app) as h:
        await words.send(value="hi")
        await h.wait_idle()
    assert seen == ["!HI"]


pytestmark_async = pytest.mark.asyncio


@pytestmark_async
async def test_a_payload_of_another_type_is_converted_by_the_codec_or_reported(
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
async def test_send_raises_the_codecs_own_error_for_a_value_it_cannot_encode() -> None:
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


def test_a_table_key_the_codec_refuses_gets_its_error_naming_the_table() -> None:
    """An int key past 64 bits under a JSON key codec: orjson refuses it, and the codec's
    SerializationError, naming the table, is what reaches the app."""
    app = agentstream.App(f"direct-{uuid.uuid4().hex[:6]}", broker="memory://", key_serializer="json")
    table = app.Table("t", default=int)
    with pytest.raises(SerializationError) as refused:
        table._key_dumps(2**70)
    assert str(refused.value).startswith("table 't' cannot encode key 1180591620717411303424")
    assert table._key_dumps(7) == b"7"  # the one-call path still serves what it can
