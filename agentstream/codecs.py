"""Codecs turn message keys and values into bytes and back.

Topics pick a codec once, at creation, with :func:`codec_for` (from ``key_type``/``value_type``
and ``key_serializer``/``value_serializer``); the codec is then called per record, so codecs keep
per-call work minimal.  Every built-in codec passes ``None`` (a tombstone) through unchanged in
both directions.

Decode failures raise :class:`~agentstream.exceptions.ValueDecodeError`; code decoding a *key*
should catch :class:`~agentstream.exceptions.SerializationError` and re-raise it as
:class:`~agentstream.exceptions.KeyDecodeError` (a codec does not know which side it serves).
"""

from __future__ import annotations

import base64
import binascii
import enum
import pickle
from collections.abc import Callable, Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final, Protocol
from uuid import UUID

import orjson
from mypy_extensions import mypyc_attr

from .exceptions import ConfigError, SerializationError, ValidationError, ValueDecodeError, caused
from .models import FAUST_KEY, FieldError, Record, json_dumps, lookup_model, set_serializer_codecs, type_decoder

__all__ = [
    "BaseCodec",
    "BinaryCodec",
    "Codec",
    "JSONCodec",
    "PickleCodec",
    "RawCodec",
    "RecordCodec",
    "StrCodec",
    "TypedRawCodec",
    "UntypedKeyCodec",
    "codec_for",
    "key_text",
    "native",
    "side_codec",
    "revive",
    "get",
    "register",
]


class Codec(Protocol):
    """Anything with ``dumps``/``loads``; both must map ``None`` to ``None`` (tombstones)."""

    def dumps(self, obj: Any) -> bytes | None:
        """Encode ``obj``; ``None`` stays ``None``."""
        ...

    def loads(self, data: bytes | None) -> Any:
        """Decode ``data``; ``None`` stays ``None``."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)
class BaseCodec:
    """The base of the built-in codecs: the one typed interface compiled callers (a topic's send,
    a task's decode, a table's keys) call natively. Any object with ``dumps``/``loads`` is a
    :class:`Codec`; :func:`native` puts such a one behind this interface."""

    def dumps(self, obj: Any) -> Any:
        raise NotImplementedError

    def loads(self, data: bytes | None) -> Any:
        raise NotImplementedError


class _Foreign(BaseCodec):
    """An app's codec object (any ``dumps``/``loads``) behind the compiled interface."""

    def __init__(self, codec: Codec) -> None:
        self.codec: Any = codec  # Any: its dumps may give a bytearray (compiled code checks types)

    def dumps(self, obj: Any) -> Any:
        return self.codec.dumps(obj)

    def loads(self, data: bytes | None) -> Any:
        return self.codec.loads(data)


def native(codec: Codec) -> BaseCodec:
    """``codec`` itself when it is a built-in one (or subclasses one), else behind :class:`BaseCodec`."""
    return codec if isinstance(codec, BaseCodec) else _Foreign(codec)


def _preview(data: bytes | bytearray | memoryview) -> str:
    """First bytes of a payload for error messages: enough to recognise it, never huge."""
    head = bytes(data[:40])
    return repr(head) + ("..." if len(data) > 40 else "")


def key_text(obj: Any) -> bytes:
    """Faust's ``raw`` key bytes of ``obj``: str as UTF-8, bytes as they are.

    Faust's raw codec takes only str and bytes; agentstream also gives every other key one
    defined encoding, chosen so Faust's typed key decoding (``int(text)``, ``Decimal(text)``...)
    reads it back: numbers, UUIDs and times as their text, Records and everything else as JSON
    (Records with their ``__faust`` tag).
    """
    tp = type(obj)
    if tp is str:
        return obj.encode("utf-8")  # type: ignore[no-any-return]
    if tp is bytes:
        return obj  # type: ignore[no-any-return]
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, enum.Enum):
        return key_text(obj.value)
    if isinstance(obj, str):
        return str(obj).encode("utf-8")
    if (isinstance(obj, int) and not isinstance(obj, bool)) or isinstance(obj, (Decimal, UUID)):
        return str(obj).encode("ascii")
    if isinstance(obj, float):
        return repr(obj).encode("ascii")
    if isinstance(obj, (datetime, date)):
        return obj.isoformat().encode("ascii")
    return json_dumps(obj)


def _to_bytes(obj: Any, codec: str) -> bytes:
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    raise SerializationError(
        f"the {codec!r} codec cannot encode {type(obj).__name__} (only bytes or str). "
        "Fix: encode the value yourself, or use the 'json' serializer or a Record type"
    )


@mypyc_attr(allow_interpreted_subclasses=True)  # public: an app may subclass a built-in codec
class RawCodec(BaseCodec):
    """Bytes as they are (Faust's ``raw``); other objects are encoded by :func:`key_text`."""

    def dumps(self, obj: Any) -> bytes | None:
        if type(obj) is str:  # key_text()'s first case, inline: the common key, no call of its own
            return obj.encode("utf-8")  # type: ignore[no-any-return]
        return None if obj is None else key_text(obj)

    def loads(self, data: bytes | None) -> Any:
        if data is None or type(data) is bytes:
            return data
        return bytes(data)


@mypyc_attr(allow_interpreted_subclasses=True)
class UntypedKeyCodec(RawCodec):
    """Keys of a table (or repartition topic) without a key type: raw bytes on the wire, as Faust
    writes them, read back as text.

    Reads give ``str`` (or ``bytes`` when the bytes are not UTF-8), and a Record key by its
    ``__faust`` tag; other key types come back as their text, so declare ``key_type=int`` (etc.)
    to iterate typed keys. Lookups are unaffected: one key always has one encoding.
    """

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        raw = data if type(data) is bytes else bytes(data)
        if raw[:1] == b"{" and b'"__faust"' in raw:
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                value = None
            model = lookup_model(value)
            if model is not None:
                try:
                    return model.from_data(value)
                except ValidationError:
                    pass
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw


@mypyc_attr(allow_interpreted_subclasses=True)  # public: an app may subclass a built-in codec
class TypedRawCodec(BaseCodec):
    """Raw key bytes (:func:`key_text`) decoded to a declared type, as Faust prepares typed keys:
    ``str`` as UTF-8, numbers, UUIDs and times from their text, Records and the rest from JSON."""

    def __init__(self, type_: Any) -> None:
        self.type_ = type_
        self._parse = _text_parser(type_)

    def __repr__(self) -> str:
        return f"TypedRawCodec({getattr(self.type_, '__name__', self.type_)!r})"

    def dumps(self, obj: Any) -> bytes | None:
        if type(obj) is str:  # key_text()'s first case, inline: the common key, no call of its own
            return obj.encode("utf-8")  # type: ignore[no-any-return]
        return None if obj is None else key_text(obj)

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        raw = data if type(data) is bytes else bytes(data)
        try:
            return self._parse(raw)
        except (ValueError, TypeError, ArithmeticError) as exc:
            name = getattr(self.type_, "__name__", str(self.type_))
            raise caused(ValueDecodeError(f"raw payload {_preview(raw)} is not a {name}: {exc}"), exc) from exc


def _text_parser(type_: Any) -> Callable[[bytes], Any]:
    if type_ is str:
        return bytes.decode  # UTF-8, strict: one C call
    if type_ in (int, float, Decimal, UUID):
        return lambda raw: type_(raw.decode("ascii"))
    if type_ is datetime:
        return lambda raw: datetime.fromisoformat(raw.decode("ascii"))
    if type_ is date:
        return lambda raw: date.fromisoformat(raw.decode("ascii"))
    if isinstance(type_, type) and issubclass(type_, enum.Enum):
        inner = _text_parser(type(next(iter(type_)).value)) if len(type_) else _text_parser(str)
        return lambda raw: type_(inner(raw))
    json_codec = _typed_json(type_)
    return lambda raw: json_codec.loads(raw)


@mypyc_attr(allow_interpreted_subclasses=True)  # public: an app may subclass a built-in codec
class StrCodec(BaseCodec):
    """UTF-8 text, the usual choice for string keys."""

    def dumps(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if isinstance(obj, str):
            return obj.encode("utf-8")
        raise SerializationError(
            f"the 'str' codec cannot encode {type(obj).__name__} {obj!r:.60}. "
            "Fix: pass a str (e.g. str(key)), or declare a different key/value type"
        )

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return (data if type(data) is bytes else bytes(data)).decode("utf-8")  # no copy for bytes
        except UnicodeDecodeError as exc:
            raise caused(ValueDecodeError(f"invalid UTF-8 in 'str' payload {_preview(data)}: {exc}"), exc) from exc


@mypyc_attr(allow_interpreted_subclasses=True)  # public: an app may subclass a built-in codec
class JSONCodec(BaseCodec):
    """JSON via orjson; with ``type_``, decoded data is coerced to (and checked against) it."""

    def __init__(self, type_: Any = None) -> None:
        self.type_ = type_
        self._convert: Callable[[Any], Any] | None = (
            None if type_ is None or type_ is Any or type_ is object else type_decoder(type_)
        )
        # A declared type whose converter gives a payload of exactly that type back as it is (a
        # bare dict: an equal copy): such a payload skips the converter.
        self._exact: type | None = type_ if type_ in (str, int, float, dict) else None

    def __repr__(self) -> str:
        return f"JSONCodec({self.type_!r})" if self.type_ is not None else "JSONCodec()"

    def dumps(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if type(obj) in _JSON_SCALARS:  # orjson's bytes for them, one C call (json_dumps' too)
            try:
                return _json_dumps_c(obj)  # type: ignore[no-any-return]
            except orjson.JSONEncodeError:
                pass  # an int past 64 bits: json_dumps says what to do
        if type(obj) is bytes:
            return obj  # already encoded: sent as it is, as Faust's serializers skip bytes
        return json_dumps(obj)

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            value = _json_loads_c(data)
        except orjson.JSONDecodeError as exc:
            raise caused(ValueDecodeError(f"invalid JSON ({exc}) in payload {_preview(data)}"), exc) from exc
        if type(value) is self._exact:
            return value
        if self._convert is None:
            if _tagged(data):  # tagged records inside
                try:
                    return revive(value)
                except ValidationError as exc:
                    raise caused(ValueDecodeError(f"cannot decode a tagged record: {exc}"), exc) from exc
            return value
        try:
            return self._convert(value)
        except FieldError as exc:
            name = getattr(self.type_, "__name__", str(self.type_))
            raise caused(ValueDecodeError(f"JSON payload does not fit {name}: {exc}"), exc) from exc


_JSON_SCALARS: Final = frozenset({str, int, float, bool})
_json_dumps_c: Final = orjson.dumps  # bound once: a C static when compiled, not a module attribute lookup
_json_loads_c: Final = orjson.loads


def _tagged(data: Any) -> bool:
    """Whether a JSON payload may hold Faust-tagged records (a substring scan, no parsing)."""
    if isinstance(data, str):
        return '"__faust"' in data
    return b'"__faust"' in (data if isinstance(data, (bytes, bytearray)) else bytes(data))


def revive(value: Any) -> Any:
    """Decoded JSON with every ``{"__faust": {"ns": ...}}`` dict (top level, in lists, in dicts)
    rebuilt as its registered Record; untagged data and unknown namespaces stay as they are."""
    if type(value) is dict:
        if FAUST_KEY in value:
            model = lookup_model(value)
            if model is not None:
                return model.from_data({k: revive(v) for k, v in value.items()})
        return {k: revive(v) for k, v in value.items()}
    if type(value) is list:
        return [revive(v) for v in value]
    return value


@mypyc_attr(allow_interpreted_subclasses=True)  # public: an app may subclass a built-in codec
class BinaryCodec(BaseCodec):
    """Base64 of the raw bytes (Faust's ``binary``), for payloads that must be ASCII."""

    def dumps(self, obj: Any) -> bytes | None:
        return None if obj is None else base64.b64encode(_to_bytes(obj, "binary"))

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise caused(ValueDecodeError(f"invalid base64 in 'binary' payload {_preview(data)}: {exc}"), exc) from exc


@mypyc_attr(allow_interpreted_subclasses=True)  # public: an app may subclass a built-in codec
class PickleCodec(BaseCodec):
    """Pickle, then base64 (Faust's ``pickle``).

    Unpickling runs code chosen by whoever wrote the message: use only on trusted topics.
    """

    def dumps(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            return base64.b64encode(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise caused(SerializationError(f"cannot pickle {type(obj).__name__}: {exc}"), exc) from exc

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return pickle.loads(base64.b64decode(data, validate=True))
        except Exception as exc:  # unpickling can raise almost anything
            raise caused(ValueDecodeError(f"cannot unpickle payload {_preview(data)}: {exc!r}"), exc) from exc


@mypyc_attr(allow_interpreted_subclasses=True)  # public: an app may subclass a built-in codec
class RecordCodec(BaseCodec):
    """JSON bytes <-> instances of one :class:`~agentstream.models.Record` subclass."""

    def __init__(self, model: type[Record]) -> None:
        if not (isinstance(model, type) and issubclass(model, Record)):
            raise TypeError(f"RecordCodec needs a Record subclass, got {model!r}")
        self.model = model

    def __repr__(self) -> str:
        return f"RecordCodec({self.model.__qualname__})"

    def dumps(self, obj: Any) -> bytes | None:
        """Encode an instance, or a dict after validating it with ``model.from_data``."""
        if obj is None:
            return None
        if isinstance(obj, self.model):
            return json_dumps(obj)
        if isinstance(obj, Mapping):
            return json_dumps(self.model.from_data(obj))
        raise SerializationError(
            f"expected a {self.model.__name__} (or a dict of its fields), got {type(obj).__name__}. "
            f"Fix: send {self.model.__name__}(...) to this topic or declare the matching value_type"
        )

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        model = self.model
        try:
            decoded = _json_loads_c(data)
        except orjson.JSONDecodeError as exc:
            raise caused(
                ValueDecodeError(f"cannot decode {model.__name__}: invalid JSON ({exc}) in payload {_preview(data)}"),
                exc,
            ) from exc
        try:
            if type(decoded) is dict and FAUST_KEY in decoded:  # Faust's polymorphic records
                model = lookup_model(decoded, model) or model
            return model.from_data(decoded)
        except ValidationError as exc:
            raise caused(ValueDecodeError(f"cannot decode {model.__name__}: {exc}"), exc) from exc


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

_registry: dict[str, Codec] = {
    "raw": RawCodec(),
    "str": StrCodec(),
    "json": JSONCodec(),
    "binary": BinaryCodec(),
    "pickle": PickleCodec(),
}
_cache: dict[tuple[Any, Any], Codec] = {}


def register(name: str, codec: Codec) -> None:
    """Make ``codec`` available as ``serializer=name`` (replacing any codec of that name)."""
    if not (callable(getattr(codec, "dumps", None)) and callable(getattr(codec, "loads", None))):
        raise TypeError(f"codec {name!r} must have dumps() and loads() methods, got {codec!r}")
    _registry[name] = codec
    _cache.clear()  # codec_for results may have resolved the old codec of this name


def get(name: str) -> Codec:
    """The codec registered as ``name``; ``"a|b"`` chains codecs as Faust does (``dumps`` runs
    ``a`` then ``b``: ``"json|binary"`` is base64 of JSON). Raises :class:`ConfigError` listing
    known names."""
    try:
        return _registry[name]
    except KeyError:
        pass
    if "|" in name:
        parts = [p.strip() for p in name.split("|")]
        if all(parts):
            chain = _Chain(tuple(get(p) for p in parts))
            return chain
    available = ", ".join(sorted(_registry))
    raise ConfigError(
        "serializer",
        f"unknown serializer {name!r} (available: {available}, or names joined by '|')",
        f"use one of those names, or call agentstream.codecs.register({name!r}, codec) first",
    )


class _Chain(BaseCodec):
    """``"json|binary"``: encode with each codec in turn, decode in reverse (Faust's ``|``)."""

    def __init__(self, codecs: tuple[Codec, ...]) -> None:
        self.codecs = codecs

    def __repr__(self) -> str:
        return " | ".join(repr(c) for c in self.codecs)

    def dumps(self, obj: Any) -> bytes | None:
        data: Any = obj
        for codec in self.codecs:
            if data is None:
                return None
            dumps: Any = codec.dumps  # Any: a codec may give a bytearray (compiled code checks types)
            data = dumps(data)
        return data  # type: ignore[no-any-return]

    def loads(self, data: bytes | None) -> Any:
        value: Any = data
        for codec in reversed(self.codecs):
            if value is None:
                return None
            value = codec.loads(value)
        return value


class _Prepared(BaseCodec):
    """A named serializer (``binary``, ``json|binary``, a registered one) whose decoded payload
    is then built into the declared Record type, as Faust prepares typed payloads."""

    def __init__(self, inner: Codec, model: type[Record]) -> None:
        self.inner: Any = inner  # Any: a codec may give a bytearray (compiled code checks types)
        self.model = model

    def __repr__(self) -> str:
        return f"{self.inner!r} -> {self.model.__qualname__}"

    def dumps(self, obj: Any) -> bytes | None:
        return self.inner.dumps(obj)  # type: ignore[no-any-return]  # bytes from a well-behaved codec

    def loads(self, data: bytes | None) -> Any:
        value = self.inner.loads(data)
        if isinstance(value, (bytes, bytearray, memoryview, str)):
            return RecordCodec(self.model).loads(
                value if isinstance(value, bytes) else value.encode() if isinstance(value, str) else bytes(value)
            )
        if isinstance(value, Mapping):
            try:
                return (lookup_model(value, self.model) or self.model).from_data(value)
            except ValidationError as exc:
                raise caused(ValueDecodeError(f"cannot decode {self.model.__name__}: {exc}"), exc) from exc
        return value


def codec_for(type_: Any = None, serializer: str | Codec | None = None) -> Codec:
    """Pick the codec for a topic's key or value; same arguments give the same instance.

    Topics and tables always pass a serializer (Faust's defaults: ``"raw"`` keys, ``"json"``
    values), and the type then says what the decoded payload becomes: ``("raw", str)`` is UTF-8
    text, ``("raw", int)`` the key's digits, ``("json", str)`` a JSON string (``"bob"`` with its
    quotes on the wire), ``("json", Order)`` a RecordCodec; ``bytes`` is always raw; another
    serializer (``"binary"``, ``"json|binary"``, a registered name) decodes first and builds a
    Record type from the result. A codec object is used as is.

    Without a serializer (direct use) the type alone picks: ``bytes`` -> raw, ``str`` -> str,
    Record -> RecordCodec (or the model's own ``serializer`` option), ``None`` -> json, anything
    else -> JSON coerced to the type (``int`` decodes to an int or fails).
    """
    if serializer is not None and not isinstance(serializer, str):
        return serializer
    key = (type_, serializer)
    try:
        return _cache[key]
    except KeyError:
        pass
    except TypeError:  # unhashable type annotation: build it, don't cache
        return _build(type_, serializer)
    codec = _build(type_, serializer)
    _cache[key] = codec
    return codec


def _build(type_: Any, serializer: str | None) -> Codec:
    if serializer is not None:
        if type_ is None or type_ is Any or type_ is object:
            return get(serializer)
        if serializer == "raw":  # Faust's keys: raw bytes read back as the declared type
            return get("raw") if type_ is bytes else TypedRawCodec(type_)
        if serializer == "json":
            return get("raw") if type_ is bytes else _typed_json(type_)
        codec = get(serializer)
        if isinstance(type_, type) and issubclass(type_, Record) and serializer not in _registry_builtin_raw:
            return _Prepared(codec, type_)
        return codec
    if type_ is None:
        return get("json")
    if type_ is bytes:
        return get("raw")
    if type_ is str:
        return get("str")
    if isinstance(type_, type) and issubclass(type_, Record):
        own = type_._options.serializer
        if own is not None and own != "json":
            return get(own)
    return _typed_json(type_)


_registry_builtin_raw = frozenset({"pickle"})  # these decode to the object itself: nothing to prepare


def side_codec(type_: Any, serializer: str | Codec | None, app_default: str) -> Codec:
    """The codec of one side (key or value) of a topic or table, in Faust's precedence: the
    serializer given, else a Record type's own ``serializer`` option, else the app's default
    (``raw`` keys, ``json`` values); the type then says what the payload decodes to."""
    if serializer is None and isinstance(type_, type) and issubclass(type_, Record):
        serializer = type_._options.serializer
    return codec_for(type_, serializer if serializer is not None else app_default)


def _typed_json(type_: Any) -> Codec:
    if isinstance(type_, type) and issubclass(type_, Record):
        return RecordCodec(type_)
    if type_ is Any or type_ is object:
        return get("json")
    return JSONCodec(type_)


set_serializer_codecs(codec_for)  # Record.dumps(serializer=...) / loads(..., serializer=...) use the registry
