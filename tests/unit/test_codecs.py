"""Codecs: registry, built-in wire formats, Record codec errors, codec_for selection, tombstones.

Deliberately *without* ``from __future__ import annotations`` so plain annotations are covered.
"""

import base64
import pickle
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, List, Optional

import orjson
import pytest

from agentstream import codecs
from agentstream.codecs import JSONCodec, RecordCodec, codec_for
from agentstream.exceptions import ConfigError, SerializationError, ValidationError, ValueDecodeError
from agentstream.models import Record


class Item(Record):
    sku: str
    qty: int = 1


class Order(Record):
    id: int
    items: List[Item]
    at: datetime
    total: Decimal
    note: Optional[str] = None


class Pickled(Record, serializer="pickle"):
    a: int


ORDER = Order(1, [Item("a", 2)], datetime(2024, 1, 1, tzinfo=UTC), Decimal("9.99"))


# -- registry -----------------------------------------------------------------------------------


def test_builtin_codecs_are_registered_by_name() -> None:
    for name in ("raw", "str", "json", "binary", "pickle"):
        codec = codecs.get(name)
        assert codec.loads(codec.dumps(b"hi" if name in ("raw", "binary") else "hi")) in (b"hi", "hi")


def test_unknown_serializer_is_a_config_error_listing_names() -> None:
    with pytest.raises(ConfigError) as info:
        codecs.get("avro")
    message = str(info.value)
    assert "'avro'" in message
    for name in ("raw", "str", "json", "binary", "pickle"):
        assert name in message
    with pytest.raises(ConfigError, match="avro"):
        codec_for(Item, serializer="avro")


def test_register_makes_a_codec_available_to_get_and_codec_for() -> None:
    class Upper:
        def dumps(self, obj: Any) -> Optional[bytes]:
            return None if obj is None else obj.upper().encode()

        def loads(self, data: Optional[bytes]) -> Any:
            return None if data is None else data.decode().lower()

    upper = Upper()
    codecs.register("test-upper", upper)
    assert codecs.get("test-upper") is upper
    assert codec_for(str, serializer="test-upper") is upper
    assert codec_for(serializer="test-upper").dumps("abc") == b"ABC"
    with pytest.raises(TypeError):
        codecs.register("broken", object())  # type: ignore[arg-type]


# -- built-in wire formats ----------------------------------------------------------------------


def test_raw_codec_passes_bytes_and_encodes_str() -> None:
    raw = codecs.get("raw")
    assert raw.dumps(b"\x00\xff") == b"\x00\xff"
    assert raw.dumps("héllo") == "héllo".encode()
    assert raw.loads(b"\x00\xff") == b"\x00\xff"
    # other keys get one defined text encoding that Faust's typed key decoding reads back
    assert raw.dumps(42) == b"42" and raw.dumps(1.5) == b"1.5"
    assert raw.dumps(("a", 1)) == b'["a",1]'


def test_str_codec_is_utf8_and_rejects_bad_bytes() -> None:
    s = codecs.get("str")
    assert s.dumps("héllo") == "héllo".encode()
    assert s.loads("héllo".encode()) == "héllo"
    with pytest.raises(ValueDecodeError, match="UTF-8"):
        s.loads(b"\xff\xfe")
    with pytest.raises(SerializationError, match="str"):
        s.dumps(5)


def test_json_codec_round_trips_plain_data_and_records() -> None:
    j = codecs.get("json")
    data = {"a": [1, 2.5, None, True], "b": {"c": "d"}}
    assert j.loads(j.dumps(data)) == data
    encoded = j.dumps(ORDER)
    assert encoded is not None
    assert orjson.loads(encoded)["total"] == "9.99"  # Records encode via dataclass support
    assert j.loads(j.dumps(Item("x"))) == Item("x")  # the __faust tag names the model


def test_json_codec_invalid_json_is_a_value_decode_error() -> None:
    with pytest.raises(ValueDecodeError, match="invalid JSON") as info:
        codecs.get("json").loads(b'{"a": ')
    assert isinstance(info.value, SerializationError)
    assert isinstance(info.value.__cause__, orjson.JSONDecodeError)


def test_json_codec_unencodable_value_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError, match="object"):
        codecs.get("json").dumps(object())


def test_binary_codec_is_base64_of_the_raw_bytes() -> None:
    b = codecs.get("binary")
    assert b.dumps(b"hi") == b"aGk="
    assert b.loads(b"aGk=") == b"hi"
    with pytest.raises(ValueDecodeError, match="base64"):
        b.loads(b"not base64!!")


def test_pickle_codec_is_base64_pickle() -> None:
    p = codecs.get("pickle")
    value = {"when": datetime(2024, 1, 1), "n": Decimal("1.5"), "t": (1, 2)}
    encoded = p.dumps(value)
    assert encoded is not None
    assert pickle.loads(base64.b64decode(encoded)) == value
    assert p.loads(encoded) == value
    with pytest.raises(ValueDecodeError, match="unpickle"):
        p.loads(base64.b64encode(b"garbage"))


# -- RecordCodec --------------------------------------------------------------------------------


def test_record_codec_round_trip() -> None:
    codec = RecordCodec(Order)
    data = codec.dumps(ORDER)
    assert isinstance(data, bytes)
    back = codec.loads(data)
    assert back == ORDER and isinstance(back.items[0], Item)


def test_record_codec_validates_dicts_before_encoding() -> None:
    codec = RecordCodec(Item)
    assert codec.loads(codec.dumps({"sku": "a", "ignored": 1})) == Item("a")
    with pytest.raises(ValidationError, match=r"Item\.sku: required field is missing"):
        codec.dumps({"qty": 3})
    with pytest.raises(SerializationError, match="expected a Item"):
        codec.dumps(Order(1, [], ORDER.at, Decimal(0)))


def test_record_codec_bad_data_names_model_and_field_and_keeps_cause() -> None:
    codec = RecordCodec(Order)
    with pytest.raises(ValueDecodeError) as info:
        codec.loads(b'{"items": [{"sku": "a", "qty": "two"}], "at": 0, "total": "1"}')
    assert "Order.id: required field is missing" in str(info.value)
    cause = info.value.__cause__
    assert isinstance(cause, ValidationError) and cause.field == "id"
    # a value of the wrong type is kept, as Faust keeps it (not a decode error)
    kept = codec.loads(b'{"id": 1, "items": [{"sku": "a", "qty": "two"}], "at": 0, "total": "1"}')
    assert kept.items[0].qty == "two"


def test_record_codec_invalid_json_is_a_clear_decode_error() -> None:
    with pytest.raises(ValueDecodeError, match=r"cannot decode Order: invalid JSON.*b'\{\"id\": 1'") as info:
        RecordCodec(Order).loads(b'{"id": 1')
    assert isinstance(info.value.__cause__, orjson.JSONDecodeError)


def test_record_codec_requires_a_record_type() -> None:
    with pytest.raises(TypeError):
        RecordCodec(dict)  # type: ignore[arg-type]


# -- codec_for ----------------------------------------------------------------------------------


def test_codec_for_picks_by_type() -> None:
    assert codec_for(bytes) is codecs.get("raw")
    assert codec_for(str) is codecs.get("str")
    assert codec_for() is codecs.get("json")
    assert codec_for(None) is codecs.get("json")
    item_codec = codec_for(Item)
    assert item_codec.loads(b'{"sku": "z"}') == Item("z")


def test_codec_for_int_coerces_and_rejects_non_ints() -> None:
    codec = codec_for(int)
    assert codec.dumps(5) == b"5"
    assert codec.loads(b"5") == 5 and type(codec.loads(b"5")) is int
    assert codec.loads(b"5.0") == 5 and type(codec.loads(b"5.0")) is int
    for bad in (b'"5"', b"5.5", b"true", b"null"):
        with pytest.raises(ValueDecodeError, match="int"):
            codec.loads(bad)


def test_codec_for_other_json_types() -> None:
    assert codec_for(float).loads(b"2") == 2.0 and type(codec_for(float).loads(b"2")) is float
    assert codec_for(bool).loads(b"true") is True
    assert codec_for(dict).loads(b'{"a": 1}') == {"a": 1}
    assert codec_for(list).loads(b"[1]") == [1]
    with pytest.raises(ValueDecodeError):
        codec_for(dict).loads(b"[1]")
    with pytest.raises(ValueDecodeError):
        codec_for(bool).loads(b"1")
    items = codec_for(List[Item]).loads(b'[{"sku": "a"}, {"sku": "b", "qty": 2}]')
    assert items == [Item("a"), Item("b", 2)]
    with pytest.raises(ValueDecodeError, match=r"\[1\]\.sku: required field is missing"):
        codec_for(List[Item]).loads(b'[{"sku": "a"}, {"qty": 2}]')


def test_codec_for_serializer_name_wins_over_type() -> None:
    assert codec_for(Item, serializer="raw").loads(b'{"sku": "q"}') == Item("q")  # Record keys: JSON
    assert codec_for(str, serializer="raw").loads(b"x") == "x"
    assert codec_for(int, serializer="raw").loads(b"12") == 12
    assert codec_for(int, serializer="raw").dumps(12) == b"12"
    assert codec_for(str, serializer="json").loads(b'"x"') == "x"
    assert codec_for(bytes, serializer="binary") is codecs.get("binary")
    # Faust idiom: value_type=Model with value_serializer="json" still yields the model
    assert codec_for(Item, serializer="json").loads(b'{"sku": "q"}') == Item("q")


def test_codec_for_honours_a_records_own_serializer_option() -> None:
    codec = codec_for(Pickled)
    assert codec is codecs.get("pickle")
    assert codec.loads(codec.dumps(Pickled(3))) == Pickled(3)


def test_codec_for_returns_the_same_instance_for_the_same_arguments() -> None:
    assert codec_for(Order) is codec_for(Order)
    assert codec_for(int) is codec_for(int)
    assert codec_for(Item, "json") is codec_for(Item, "json")
    custom = JSONCodec()
    assert codec_for(Item, serializer=custom) is custom


# -- tombstones ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "codec",
    [
        *(codecs.get(n) for n in ("raw", "str", "json", "binary", "pickle")),
        RecordCodec(Order),
        codec_for(int),
        codec_for(List[Item]),
    ],
    ids=lambda c: type(c).__name__,
)
def test_none_passes_through_every_codec(codec: codecs.Codec) -> None:
    assert codec.dumps(None) is None
    assert codec.loads(None) is None
