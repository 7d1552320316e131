"""How a table's changelog records become Spark rows: a plain-data *decode spec*.

The driver knows the table (its codecs, Record types, window size); the executors must not need
the app's code (``apps.pageviews`` need not be importable on a Spark worker). So the driver turns
the table into a JSON-able spec, and executors decode with it alone.

Type specs (nested, JSON-able):

* ``"string"``, ``"long"``, ``"double"``, ``"boolean"``, ``"binary"``, ``"timestamp"``, ``"date"``
* ``"json"``: any value as its JSON text (a string column)
* ``"text"``: strings as themselves, anything else as JSON text (untyped JSON keys: ``"hello"``
  for word count, not ``"\\"hello\\""``)
* ``["array", item]``, ``["map", value]`` (string keys), ``["struct", [[name, spec], ...]]``

Column choices (documented in :mod:`agentstream.exporter`): the value is typed when its type is
known: declared (``value_type``), a scalar ``default`` (``default=int`` gives longs), or the
Record named by the ``__faust`` tag of sampled values (a struct); else its JSON text. The key is
typed when the table declares a key type, else its text; times are Spark timestamps (UTC instants).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import pickle
import types
import typing
from collections import abc
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Union
from uuid import UUID

import orjson

from .. import codecs
from ..models import Record, _type_hints, lookup_model, wire_fields
from ..tables.sessions import parse_session_key
from ..tables.windowed import STREAM_TIME_KEY
from ..tables.windows import parse_faust_window_key, parse_window_key

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

    from ..tables.table import Table

__all__ = [
    "TableSpec",
    "table_spec",
    "type_spec",
    "spark_type",
    "converter",
    "side_decoder",
    "bulk_decoder",
    "SOURCE_COLUMNS",
]

TypeSpec = Any  # str | list: see the module docstring

SOURCE_COLUMNS = (
    "key",
    "window_start",
    "window_end",
    "value",
    "partition",
    "offset",
    "timestamp",
    "raw_key",
    "tombstone",
)
"""Columns the data source yields (window columns only for windowed tables); ``raw_key`` (the
changelog key bytes) and ``tombstone`` let Spark compute the latest value per key."""

_SCALARS: dict[Any, str] = {
    str: "string",
    int: "long",
    float: "double",
    bool: "boolean",
    dt.datetime: "timestamp",
    dt.date: "date",
    Decimal: "string",
    UUID: "string",
}


# -- Python types -> specs (driver) ---------------------------------------------------------------


def type_spec(tp: Any, _seen: frozenset[type] = frozenset()) -> TypeSpec:
    """The spec of a Python annotation (Record fields, key/value types); unknown -> ``"json"``."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    if tp is bytes or tp is Any or tp is object or tp is None or tp is type(None):
        return "json"
    if isinstance(tp, type) and issubclass(tp, Record):
        if tp in _seen:
            return "json"  # self-referencing records: a struct type cannot be infinite
        hints = _type_hints(tp)
        # columns named as the bytes name them (Faust's output_name; exclude=True fields are never written)
        fields = [[key, type_spec(hints.get(name, Any), _seen | {tp})] for name, key in wire_fields(tp)]
        return ["struct", fields]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _common_scalar([m.value for m in tp])
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return _common_scalar(list(args))
    if origin is Union or origin is types.UnionType:
        real = [a for a in args if a is not type(None)]
        return type_spec(real[0], _seen) if len(real) == 1 else "json"
    if origin in (
        list,
        set,
        frozenset,
        abc.Sequence,
        abc.MutableSequence,
        abc.Set,
        abc.MutableSet,
        abc.Iterable,
        abc.Collection,
    ):
        return ["array", type_spec(args[0], _seen) if args else "json"]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return ["array", type_spec(args[0], _seen)]
        return "json"
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        return ["map", type_spec(args[1], _seen) if len(args) == 2 else "json"]
    return "json"


def _common_scalar(values: list[Any]) -> TypeSpec:
    if values and all(isinstance(v, str) for v in values):
        return "string"
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "long"
    return "json"


@dataclasses.dataclass(frozen=True)
class TableSpec:
    """Everything an executor needs to decode one table's changelog (JSON-able via :meth:`dumps`)."""

    table: str
    topic: str
    key: dict[str, Any]  # {"codec": "json"|"str"|"raw"|"pickled", "type": spec, "pickled": b64?}
    value: dict[str, Any]  # likewise; "json_text" codec = the stored JSON bytes as they are
    window_size_ms: int | None = None
    # how windowed keys are laid out: "agentstream", "faust" (JSON) or "session" (start and end in
    # the key; window_size_ms is 0)
    window_format: str = "agentstream"

    @property
    def windowed(self) -> bool:
        return self.window_size_ms is not None

    def dumps(self) -> str:
        return orjson.dumps(dataclasses.asdict(self)).decode()

    @classmethod
    def loads(cls, text: str) -> TableSpec:
        return cls(**orjson.loads(text))

    def spark_schema(self, bookkeeping: bool = True) -> StructType:
        """The data source's schema: :data:`SOURCE_COLUMNS` (window columns if windowed;
        ``bookkeeping=False``: without ``raw_key`` and ``tombstone``, which only the latest-value
        computation needs)."""
        from pyspark.sql.types import (
            BinaryType,
            BooleanType,
            IntegerType,
            LongType,
            StructField,
            StructType,
            TimestampType,
        )

        fields = [StructField("key", spark_type(self.key["type"]))]
        if self.windowed:
            fields += [StructField("window_start", TimestampType()), StructField("window_end", TimestampType())]
        fields += [
            StructField("value", spark_type(self.value["type"])),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
        ]
        if bookkeeping:
            fields += [StructField("raw_key", BinaryType()), StructField("tombstone", BooleanType())]
        return StructType(fields)


def _codec_side(codec: Any, *, value: bool, hint: Any = None) -> dict[str, Any]:
    """Describe how one side (key or value) of the changelog is decoded.

    ``hint`` is the type known without a declaration: a table's ``default`` (``default=int``
    counts are longs) or the Record a sampled value's ``__faust`` tag names."""
    inner = getattr(codec, "inner", None)
    if inner is not None and type(codec).__name__ in ("_WindowValueCodec", "_FaustKeyCodec"):
        # windowed tables wrap the value codec; topic_naming='faust' tables wrap the key codec
        # (Faust's byte layout of the same JSON: decoding is the inner codec's)
        codec = inner
    if isinstance(codec, codecs.RecordCodec):
        return {"codec": "json", "type": type_spec(codec.model)}
    if isinstance(codec, codecs.JSONCodec):
        if codec.type_ is None and hint is not None and type_spec(hint) != "json":
            return {"codec": "json", "type": type_spec(hint)}
        if value:
            return {"codec": "json_text", "type": "json"}
        return {"codec": "json", "type": "text" if codec.type_ is None else type_spec(codec.type_)}
    if isinstance(codec, codecs.UntypedKeyCodec):
        return {"codec": "str", "type": "string"}
    if isinstance(codec, codecs.TypedRawCodec):
        tp = codec.type_
        if tp in _SCALARS:
            return {"codec": "utf8", "type": _SCALARS[tp]}
        return {"codec": "json", "type": type_spec(tp)}
    if isinstance(codec, codecs.StrCodec):
        return {"codec": "str", "type": "json" if value else "string"}
    if isinstance(codec, codecs.RawCodec):
        return {"codec": "raw", "type": "json" if value else "binary"}
    # Anything else (pickle, binary, SetTable's codec, user codecs): ship the codec itself.
    return {
        "codec": "pickled",
        "type": "json" if value else "text",
        "pickled": base64.b64encode(_cloudpickle().dumps(codec)).decode(),
    }


def value_hint(table: Table, samples: Any = ()) -> Any:
    """The value type an untyped table's values have: its ``default`` when that is a scalar type
    (``default=int``), else the Record the ``__faust`` tag of sampled changelog values names
    (when they all name the same one)."""
    default = getattr(table, "default", None)
    if default in (int, float, str, bool):
        return default
    models = set()
    for raw in samples:
        if raw is None:
            continue
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        model = lookup_model(data)
        if model is None:
            return None
        models.add(model)
    return models.pop() if len(models) == 1 else None


def _cloudpickle() -> Any:
    try:
        from pyspark import cloudpickle
    except ImportError:  # pragma: no cover - pickle suffices for importable codecs
        return pickle
    return cloudpickle


def table_spec(table: Table, samples: Any = ()) -> TableSpec:
    """The decode spec of an app's table (a WindowedTable's underlying table works too);
    ``samples``: some changelog values, whose ``__faust`` tag types an untyped table's column."""
    state = getattr(table, "_windowed", None)
    session = bool(getattr(state, "is_session", False))
    size_ms = None if state is None else 0 if session else round(state.window.size * 1000)
    window_format = (
        "session"
        if session
        else ("faust" if size_ms is not None and getattr(table, "faust_format", False) else "agentstream")
    )
    return TableSpec(
        table=table.name,
        topic=table.changelog_topic.name,
        key=_codec_side(table.key_codec, value=False),
        value=_codec_side(
            table.value_codec,
            value=True,
            hint=value_hint(table, samples) if getattr(table, "value_type", None) is None else None,
        ),
        window_size_ms=size_ms,
        window_format=window_format,
    )


# -- specs -> Spark types (driver and executor) ------------------------------------------------------


def spark_type(spec: TypeSpec) -> DataType:
    from pyspark.sql import types as T

    simple: dict[str, Callable[[], T.DataType]] = {
        "string": T.StringType,
        "json": T.StringType,
        "text": T.StringType,
        "long": T.LongType,
        "double": T.DoubleType,
        "boolean": T.BooleanType,
        "binary": T.BinaryType,
        "timestamp": T.TimestampType,
        "date": T.DateType,
    }
    if isinstance(spec, str):
        return simple[spec]()
    kind = spec[0]
    if kind == "array":
        return T.ArrayType(spark_type(spec[1]), containsNull=True)
    if kind == "map":
        return T.MapType(T.StringType(), spark_type(spec[1]), valueContainsNull=True)
    if kind == "struct":
        return T.StructType([T.StructField(name, spark_type(sub), nullable=True) for name, sub in spec[1]])
    raise ValueError(f"unknown type spec {spec!r}")


# -- decoding (executor) -------------------------------------------------------------------------------


def _json_text(v: Any) -> str | None:
    if v is None:
        return None
    return orjson.dumps(v, default=_json_default).decode()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, (bytes, bytearray)):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, Decimal):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return str(obj)


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) or v is None else _json_text(v)


def _long(v: Any) -> int | None:
    return v if v is None or type(v) is int else int(v)


def _double(v: Any) -> float | None:
    return None if v is None else float(v)


def _boolean(v: Any) -> bool | None:
    return None if v is None else bool(v)


def _binary(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return v.encode() if isinstance(v, str) else bytes(v)


def _timestamp(v: Any) -> dt.datetime | None:
    """ISO text (what Records encode datetimes as) or epoch seconds; naive means UTC."""
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return dt.datetime.fromtimestamp(v, tz=dt.UTC)
    value = v if isinstance(v, dt.datetime) else dt.datetime.fromisoformat(str(v))
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _date(v: Any) -> dt.date | None:
    if v is None or isinstance(v, dt.date):
        return v
    return dt.date.fromisoformat(str(v)[:10])


_SIMPLE: dict[str, Callable[[Any], Any]] = {
    "string": _text,
    "text": _text,
    "json": _json_text,
    "long": _long,
    "double": _double,
    "boolean": _boolean,
    "binary": _binary,
    "timestamp": _timestamp,
    "date": _date,
}


def converter(spec: TypeSpec) -> Callable[[Any], Any]:
    """Decoded JSON data -> the Python value Arrow/Spark expects for ``spec``."""
    if isinstance(spec, str):
        return _SIMPLE[spec]
    kind = spec[0]
    if kind == "array":
        item = converter(spec[1])

        def array(v: Any) -> Any:
            return None if v is None else [item(x) for x in v]

        return array
    if kind == "map":
        val = converter(spec[1])

        def mapping(v: Any) -> Any:
            return None if v is None else [(str(k), val(x)) for k, x in dict(v).items()]

        return mapping
    if kind == "struct":
        fields = [(name, converter(sub)) for name, sub in spec[1]]

        def struct(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                if isinstance(v, Record):
                    v = v.asdict()  # under the output names, as the columns are
                else:
                    v = dataclasses.asdict(v) if dataclasses.is_dataclass(v) else dict(v)  # type: ignore[arg-type]
            get = v.get
            return {name: conv(get(name)) for name, conv in fields}

        return struct
    raise ValueError(f"unknown type spec {spec!r}")


def side_decoder(side: dict[str, Any]) -> Callable[[bytes], Any]:
    """changelog bytes (never None: tombstones are handled by the caller) -> column value."""
    codec, spec = side["codec"], side["type"]
    if codec == "json_text":
        return _utf8
    if codec == "raw":
        return _json_text if spec == "json" else bytes  # type: ignore[return-value]
    if codec == "str":
        return (lambda raw: _json_text(raw.decode("utf-8"))) if spec == "json" else _utf8
    if codec == "utf8":  # raw key text of a declared scalar type (Faust's raw keys: b"42" for 42)
        text_conv = converter(spec)
        return lambda raw: text_conv(raw.decode("utf-8"))
    conv = converter(spec)
    if codec == "json":
        if spec == "text":
            return _json_key_text
        loads = orjson.loads
        return lambda raw: conv(loads(raw))
    if codec == "pickled":
        loads = _load_codec(side["pickled"]).loads
        return lambda raw: conv(loads(raw))
    raise ValueError(f"unknown codec kind {codec!r}")


def bulk_decoder(side: dict[str, Any]) -> Callable[[list[bytes]], Any]:
    """Like :func:`side_decoder`, for a whole fetched batch of non-null payloads at once: a list,
    or a pyarrow array where Arrow does the work (untyped JSON keys that are plain strings). The
    per-payload calls are made by ``map`` (no Python loop); raises where any payload fails (the
    caller then goes record by record to name it)."""
    codec, spec = side["codec"], side["type"]
    one = side_decoder(side)
    if codec == "json" and spec == "text":
        return _json_key_texts
    if codec == "json_text" or (codec == "str" and spec != "json") or (codec == "utf8" and spec == "string"):
        return lambda raws: _utf8_texts(raws, one)
    if codec == "json" and isinstance(spec, str):
        loads, conv = orjson.loads, converter(spec)
        exact = {"long": int, "string": str, "text": str, "double": float, "boolean": bool}.get(spec)

        def decode_json(raws: list[bytes]) -> list[Any]:
            decoded = list(map(loads, raws))
            if exact is not None and set(map(type, decoded)) <= {exact}:
                return decoded  # already what the converter would return
            return list(map(conv, decoded))

        return decode_json
    return lambda raws: list(map(one, raws))


def _utf8_texts(raws: list[bytes], one: Callable[[bytes], Any]) -> Any:
    """UTF-8 payloads as a string array, checked by Arrow in one pass; with a bad one, ``one`` per
    payload decides (replacement characters, or an error naming the record)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    try:
        return pa.array(raws, pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:
        return list(map(one, raws))


def _json_key_texts(raws: list[bytes]) -> Any:
    """:func:`_json_key_text` of every key: when all are plain JSON strings (quoted, no escapes),
    Arrow slices the quotes off and checks the UTF-8 in one pass; otherwise key by key."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    arr = pa.array(raws, pa.binary())
    plain = (
        pc.all(pc.starts_with(arr, '"')).as_py()
        and pc.all(pc.ends_with(arr, '"')).as_py()
        and pc.max(pc.count_substring(arr, '"')).as_py() == 2
        and pc.max(pc.count_substring(arr, "\\")).as_py() == 0
    )
    if plain:
        try:
            return pc.binary_slice(arr, 1, -1).cast(pa.string())
        except pa.ArrowInvalid:  # not UTF-8: the per-key path replaces bad bytes, as before
            pass
    return list(map(_json_key_text, raws))


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _json_key_text(raw: bytes) -> str | None:
    """Untyped JSON key: its string, or (for non-string keys) its JSON text as stored."""
    if raw[:1] == b'"' and b"\\" not in raw:
        return raw[1:-1].decode("utf-8", "replace")  # the common case, without parsing
    return _text(orjson.loads(raw))


def _load_codec(data: str) -> Any:
    return _cloudpickle().loads(base64.b64decode(data))


def split_session_key(raw: bytes) -> tuple[bytes, int, int] | None:
    """``(key bytes, start ms, end ms)`` of a session table's store key; None for bookkeeping keys."""
    try:
        return parse_session_key(raw)
    except ValueError:
        return None


def split_window_key(raw: bytes, window_format: str = "agentstream") -> tuple[bytes, int] | None:
    """``(key bytes, window start in ms)`` of a windowed store key; None for bookkeeping keys.

    ``window_format="faust"`` (tables of ``topic_naming='faust'`` apps): Faust's JSON
    ``[key, [start, end]]`` keys, whose key part comes back as the key's JSON."""
    if raw == STREAM_TIME_KEY:
        return None
    try:
        key, start = parse_faust_window_key(raw) if window_format == "faust" else parse_window_key(raw)
    except ValueError:
        return None
    return key, round(start * 1000)
