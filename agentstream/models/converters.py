"""Converters: decoded JSON (or Python) data -> a field's declared type, built once per type.

A converter raises :class:`FieldError` naming what it expected; containers add the failing
element's index or key to the error's path. Nested records are decoded by the converter their
base class registers (:func:`register_nested`), so this module knows nothing of Record.
"""

from __future__ import annotations

import collections.abc as cabc
import enum
import types
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, Union
from uuid import UUID

from .errors import FieldError, expected, show, type_name

__all__ = [
    "Converter",
    "type_decoder",
    "converter",
    "register_nested",
    "FAST_TYPES",
    "LIST_ORIGINS",
    "DICT_ORIGINS",
    "conv_any",
    "conv_none",
    "conv_bool",
    "conv_float",
    "literal_converter",
]

Converter = Callable[[Any], Any]
"""Turns decoded JSON (or Python) data into a field's declared type, raising :class:`FieldError`."""

_NESTED: list[tuple[type, Callable[[Any], Converter]]] = []


def register_nested(base: type, make: Callable[[Any], Converter]) -> None:
    """Fields whose type is a subclass of ``base`` decode through ``make(field type)``."""
    _NESTED.append((base, make))


def type_decoder(tp: Any) -> Converter:
    """Return a function coercing decoded JSON data to ``tp`` (the rules Records use).

    The function raises :class:`FieldError` (a ``ValueError``) whose message names the path.
    """
    return converter(tp)


def _conv_int(v: Any) -> Any:
    if type(v) is int:
        return v
    if type(v) is float and v.is_integer():
        return int(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    raise expected("int", v)


def conv_float(v: Any) -> Any:
    if type(v) is float:
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise expected("float", v)


def _conv_str(v: Any) -> Any:
    if isinstance(v, str):
        return v
    raise expected("str", v)


def conv_bool(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    raise expected("bool", v)


def conv_any(v: Any) -> Any:
    return v


def conv_none(v: Any) -> Any:
    if v is None:
        return v
    raise expected("null", v)


def _parse(parse: Callable[[str], Any], text: str, what: str) -> Any:
    """Text -> value; the parser's refusal becomes ``expected <what>``."""
    try:
        return parse(text)
    except (ValueError, InvalidOperation):
        raise expected(what, text) from None


def _conv_datetime(v: Any) -> Any:
    if isinstance(v, datetime):
        return v
    if isinstance(v, str):
        return _parse(datetime.fromisoformat, v, "an ISO 8601 datetime")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return datetime.fromtimestamp(v, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise expected("an epoch timestamp in range", v) from None
    raise expected("datetime (ISO string or epoch seconds)", v)


def _instance_or_text(
    kind: type, parse: Callable[[str], Any], text_what: str, what: str, exclude: tuple[type, ...] = ()
) -> Converter:
    """A converter passing instances of ``kind`` (but not of ``exclude``) and parsing strings."""

    def convert(v: Any) -> Any:
        if isinstance(v, kind) and not isinstance(v, exclude):
            return v
        if isinstance(v, str):
            return _parse(parse, v, text_what)
        raise expected(what, v)

    return convert


_conv_date = _instance_or_text(date, date.fromisoformat, "an ISO 8601 date", "date (ISO string)", exclude=(datetime,))
_conv_uuid = _instance_or_text(UUID, UUID, "a UUID", "UUID (string)")


def _conv_decimal(v: Any) -> Any:
    if isinstance(v, Decimal):
        return v
    if isinstance(v, str):
        return _parse(Decimal, v, "a decimal number")
    if isinstance(v, int) and not isinstance(v, bool):
        return Decimal(v)
    if isinstance(v, float):
        return Decimal(repr(v))  # shortest round-trip text, not the binary expansion
    raise expected("Decimal (string or number)", v)


_SCALARS: dict[Any, Converter] = {
    int: _conv_int,
    float: conv_float,
    str: _conv_str,
    bool: conv_bool,
    datetime: _conv_datetime,
    date: _conv_date,
    Decimal: _conv_decimal,
    UUID: _conv_uuid,
    type(None): conv_none,
    None: conv_none,
    Any: conv_any,
    object: conv_any,
}

FAST_TYPES: dict[Converter, type] = {_conv_int: int, conv_float: float, _conv_str: str, conv_bool: bool}
"""Converter -> the exact type it passes as-is (generated decoders test that type inline)."""

LIST_ORIGINS: dict[Any, type] = {
    list: list,
    cabc.Sequence: list,
    cabc.MutableSequence: list,
    set: set,
    frozenset: frozenset,
    cabc.Set: frozenset,
    cabc.MutableSet: set,
}
DICT_ORIGINS: set[Any] = {dict, cabc.Mapping, cabc.MutableMapping}


def _dict_key_converter(tp: Any, user: Mapping[Any, Callable[[Any], Any]] | None = None) -> Converter:
    """JSON object keys are always strings, so numeric keys are parsed from text."""
    if tp is int:

        def key_int(k: Any) -> Any:
            if isinstance(k, str):
                try:
                    return int(k)
                except ValueError:
                    raise expected("an int key", k) from None
            return _conv_int(k)

        return key_int
    return converter(tp, user)


def _user_converter(fn: Callable[[Any], Any]) -> Converter:
    """A Record's ``coercions={type: fn}`` entry: ``fn``'s refusal becomes a FieldError."""

    def convert(v: Any) -> Any:
        try:
            return fn(v)
        except (TypeError, ValueError) as exc:
            raise FieldError(f"cannot coerce {show(v)}: {exc}") from None

    return convert


def converter(tp: Any, user: Mapping[Any, Callable[[Any], Any]] | None = None) -> Converter:
    """The converter for ``tp`` (:func:`type_decoder` is its public name); ``user`` maps types to
    the functions that convert them instead (a Record's ``coercions=``), inside containers too."""
    if user and _hashable(tp) and tp in user:
        return _user_converter(user[tp])
    scalar = _SCALARS.get(tp) if _hashable(tp) else None
    if scalar is not None:
        return scalar
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)

    if isinstance(tp, type) and origin is None:
        for base, make in _NESTED:
            if issubclass(tp, base):
                return make(tp)
        if issubclass(tp, enum.Enum):
            return _enum_converter(tp)
        if tp in LIST_ORIGINS or tp is tuple:
            return _container_converter(LIST_ORIGINS.get(tp, tuple), conv_any)
        if tp in DICT_ORIGINS:
            return _dict_converter(conv_any, conv_any)
        return _unsupported_converter(tp)

    if origin is Union or origin is types.UnionType:
        return _union_converter(args, user)
    if origin is Literal:
        return literal_converter(args)
    if origin is typing.Annotated:
        return converter(args[0], user)
    if origin in LIST_ORIGINS:
        return _container_converter(LIST_ORIGINS[origin], converter(args[0], user) if args else conv_any)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _container_converter(tuple, converter(args[0], user))
        if args == ((),):
            return _fixed_tuple_converter(())
        return _fixed_tuple_converter(tuple(converter(a, user) for a in args))
    if origin in DICT_ORIGINS:
        key = _dict_key_converter(args[0], user) if args else conv_any
        value = converter(args[1], user) if len(args) > 1 else conv_any
        return _dict_converter(key, value)
    if isinstance(tp, typing.TypeVar) or isinstance(tp, typing.ForwardRef):
        return conv_any
    return _unsupported_converter(tp)


def _hashable(tp: Any) -> bool:
    try:
        hash(tp)
    except TypeError:
        return False
    return True


def _enum_converter(tp: type[enum.Enum]) -> Converter:
    def convert(v: Any) -> Any:
        if isinstance(v, tp):
            return v
        try:
            return tp(v)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in tp)
            raise FieldError(f"expected one of {tp.__name__} ({allowed}), got {show(v)}") from None

    return convert


def _unsupported_converter(tp: Any) -> Converter:
    name = type_name(tp)

    def convert(v: Any) -> Any:
        if isinstance(tp, type) and isinstance(v, tp):
            return v
        raise FieldError(
            f"cannot decode {show(v)} into unsupported field type {name}. Fix: use a Record, "
            "a builtin scalar, datetime, date, Decimal, UUID, an Enum, or list/dict of those"
        )

    return convert


def _union_converter(args: tuple[Any, ...], user: Mapping[Any, Callable[[Any], Any]] | None = None) -> Converter:
    optional = type(None) in args
    choices = [a for a in args if a is not type(None)]
    if len(choices) == 1:
        inner = converter(choices[0], user)
        if optional:

            def convert_optional(v: Any) -> Any:
                return None if v is None else inner(v)

            return convert_optional
        return inner
    convs = [converter(a, user) for a in choices]
    names = " | ".join(type_name(a) for a in args)

    def convert_union(v: Any) -> Any:
        if v is None and optional:
            return None
        for conv in convs:  # first type that accepts the value wins, in declaration order
            try:
                return conv(v)
            except FieldError:
                continue
        raise expected(names, v)

    return convert_union


def literal_converter(values: tuple[Any, ...]) -> Converter:
    def convert(v: Any) -> Any:
        if any(v == x and type(v) is type(x) for x in values):  # type check: True is not 1
            return v
        raise expected("one of " + ", ".join(map(repr, values)), v)

    return convert


def _container_converter(kind: type, item: Converter) -> Converter:
    name = kind.__name__

    def convert(v: Any) -> Any:
        if not isinstance(v, (list, tuple, set, frozenset)):
            raise expected(f"a {name}", v)
        if item is conv_any:
            return v if type(v) is kind else kind(v)
        try:
            return kind([item(x) for x in v])
        except FieldError:
            pass
        for i, x in enumerate(v):  # cold path: find which element failed, for the message
            try:
                item(x)
            except FieldError as exc:
                exc.path.append(f"[{i}]")
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    return convert


def _fixed_tuple_converter(items: tuple[Converter, ...]) -> Converter:
    def convert(v: Any) -> Any:
        if not isinstance(v, (list, tuple)) or len(v) != len(items):
            raise expected(f"an array of {len(items)} items", v)
        out = []
        for i, (conv, x) in enumerate(zip(items, v)):
            try:
                out.append(conv(x))
            except FieldError as exc:
                exc.path.append(f"[{i}]")
                raise
        return tuple(out)

    return convert


def _dict_converter(key: Converter, value: Converter) -> Converter:
    def convert(v: Any) -> Any:
        if not isinstance(v, Mapping):
            raise expected("an object", v)
        if key is _conv_str and value is conv_any:
            out = dict(v)
        else:
            out = {}
            for k, x in v.items():
                try:
                    out[key(k)] = value(x)
                except FieldError as exc:
                    exc.path.append(f"[{k!r}]")
                    raise
        return out

    return convert
