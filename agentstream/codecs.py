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
import pickle
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import orjson

from .exceptions import ConfigError, SerializationError, ValidationError, ValueDecodeError
from .models import FAUST_KEY, FieldError, Record, json_dumps, lookup_model, type_decoder

__all__ = [
    "BinaryCodec",
    "Codec",
    "JSONCodec",
    "PickleCodec",
    "RawCodec",
    "RecordCodec",
    "StrCodec",
    "codec_for",
    "get",
    "register",
]


@runtime_checkable
class Codec(Protocol):
    """Anything with ``dumps``/``loads``; both must map ``None`` to ``None`` (tombstones)."""

    def dumps(self, obj: Any) -> bytes | None:
        """Encode ``obj``; ``None`` stays ``None``."""
        ...

    def loads(self, data: bytes | None) -> Any:
        """Decode ``data``; ``None`` stays ``None``."""
        ...


def _preview(data: bytes | bytearray | memoryview) -> str:
    """First bytes of a payload for error messages: enough to recognise it, never huge."""
    head = bytes(data[:40])
    return repr(head) + ("..." if len(data) > 40 else "")


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


class RawCodec:
    """Bytes as they are; ``str`` is encoded as UTF-8 on the way out."""

    def dumps(self, obj: Any) -> bytes | None:
        return None if obj is None else _to_bytes(obj, "raw")

    def loads(self, data: bytes | None) -> Any:
        if data is None or type(data) is bytes:
            return data
        return bytes(data)


class StrCodec:
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
            raise ValueDecodeError(f"invalid UTF-8 in 'str' payload {_preview(data)}: {exc}") from exc


class JSONCodec:
    """JSON via orjson; with ``type_``, decoded data is coerced to (and checked against) it."""

    def __init__(self, type_: Any = None) -> None:
        self.type_ = type_
        self._convert: Callable[[Any], Any] | None = (
            None if type_ is None or type_ is Any or type_ is object else type_decoder(type_)
        )

    def __repr__(self) -> str:
        return f"JSONCodec({self.type_!r})" if self.type_ is not None else "JSONCodec()"

    def dumps(self, obj: Any) -> bytes | None:
        return None if obj is None else json_dumps(obj)

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueDecodeError(f"invalid JSON ({exc}) in payload {_preview(data)}") from exc
        if self._convert is None:
            if type(value) is dict and FAUST_KEY in value:  # a Faust-serialized record: its model
                model = lookup_model(value)
                if model is not None:
                    try:
                        return model.from_data(value)
                    except ValidationError as exc:
                        raise ValueDecodeError(f"cannot decode {model.__name__}: {exc}") from exc
            return value
        try:
            return self._convert(value)
        except FieldError as exc:
            name = getattr(self.type_, "__name__", str(self.type_))
            raise ValueDecodeError(f"JSON payload does not fit {name}: {exc}") from exc


class BinaryCodec:
    """Base64 of the raw bytes (Faust's ``binary``), for payloads that must be ASCII."""

    def dumps(self, obj: Any) -> bytes | None:
        return None if obj is None else base64.b64encode(_to_bytes(obj, "binary"))

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueDecodeError(f"invalid base64 in 'binary' payload {_preview(data)}: {exc}") from exc


class PickleCodec:
    """Pickle, then base64 (Faust's ``pickle``).

    Unpickling runs code chosen by whoever wrote the message: use only on trusted topics.
    """

    def dumps(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            return base64.b64encode(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise SerializationError(f"cannot pickle {type(obj).__name__}: {exc}") from exc

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return pickle.loads(base64.b64decode(data, validate=True))  # noqa: S301 - documented
        except Exception as exc:  # unpickling can raise almost anything
            raise ValueDecodeError(f"cannot unpickle payload {_preview(data)}: {exc!r}") from exc


class RecordCodec:
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
            decoded = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueDecodeError(
                f"cannot decode {model.__name__}: invalid JSON ({exc}) in payload {_preview(data)}"
            ) from exc
        try:
            if type(decoded) is dict and FAUST_KEY in decoded:  # Faust's polymorphic records
                model = lookup_model(decoded, model) or model
            return model.from_data(decoded)
        except ValidationError as exc:
            raise ValueDecodeError(f"cannot decode {model.__name__}: {exc}") from exc


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
    if not isinstance(codec, Codec):
        raise TypeError(f"codec {name!r} must have dumps() and loads() methods, got {codec!r}")
    _registry[name] = codec
    _cache.clear()  # codec_for results may have resolved the old codec of this name


def get(name: str) -> Codec:
    """The codec registered as ``name``; raises :class:`ConfigError` listing known names."""
    try:
        return _registry[name]
    except KeyError:
        available = ", ".join(sorted(_registry))
        raise ConfigError(
            "serializer",
            f"unknown serializer {name!r} (available: {available})",
            f"use one of those names, or call agentstream.codecs.register({name!r}, codec) first",
        ) from None


def codec_for(type_: Any = None, serializer: str | Codec | None = None) -> Codec:
    """Pick the codec for a topic's key or value; same arguments give the same instance.

    A ``serializer`` wins over ``type_`` (a name, or a codec object used as is), except that
    ``"json"`` with a type still decodes to that type (Faust's ``value_type=Order,
    value_serializer="json"``).  By type: ``bytes`` -> raw, ``str`` -> str, Record -> RecordCodec
    (or the model's own ``serializer`` option), ``None`` -> json, anything else -> JSON coerced
    to the type (``int`` decodes to an int or fails).
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
        if serializer == "json" and type_ is not None:
            return _typed_json(type_)
        return get(serializer)
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


def _typed_json(type_: Any) -> Codec:
    if isinstance(type_, type) and issubclass(type_, Record):
        return RecordCodec(type_)
    if type_ is Any or type_ is object:
        return get("json")
    return JSONCodec(type_)
