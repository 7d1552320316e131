"""Faust's field options that change what a Record reads and writes: ``input_name`` / ``output_name`` /
``exclude`` (the keys on the wire) and ``coerce`` / ``date_parser`` / ``coercions`` / ``isodates`` /
``decimals`` (how decoded values become field values), prepared once per class.

A class without these options keeps the plain paths: its decoder reads each field under its own name and
converts by annotation, and it encodes as orjson does natively (``_wire_out`` is None).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, Union
from uuid import UUID

from .converters import Converter, conv_any, converter
from .encoding import JSONRecord
from .errors import FieldError, show, type_name
from .fields import Field, field_for_type
from .options import RecordOptions

__all__ = ["set_wire_names", "set_native_dumps", "field_coercer", "field_converter", "parse_asked", "wire_fields"]

_wire_mapped = [False]  # becomes True once a class renames or excludes a field


def set_wire_names(cls: type[JSONRecord], fields: Mapping[str, Any]) -> None:
    """Record on ``cls`` the (field, output key) pairs it encodes, leaving ``exclude``d fields out (None
    when every field goes out under its own name), as Faust's generated ``asdict``."""
    wire = tuple(
        (name, d.output_name if isinstance(d, Field) else name)
        for name, d in fields.items()
        if not (isinstance(d, Field) and d.exclude)
    )
    mapped = len(wire) != len(fields) or any(name != out for name, out in wire)
    cls._wire_out = wire if mapped else None
    cls._faust_tag = {"ns": cls._options.namespace} if cls._options.include_metadata else None
    cls._dump_native = False  # decided once the annotations resolve (set_native_dumps)
    if mapped and not _wire_mapped[0]:
        _wire_mapped[0] = True
        _recheck_native(JSONRecord)


def wire_fields(cls: type[JSONRecord]) -> tuple[tuple[str, str], ...]:
    """(field, key on the wire) for each field a record of ``cls`` writes, in order (exclude``d ones left
    out): what a reader of the bytes (the exporter's columns) sees."""
    wire = cls._wire_out
    if wire is not None:
        return wire
    return tuple((f.name, f.name) for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def _recheck_native(base: type) -> None:
    """A class with renamed/excluded fields now exists: a record whose fields might hold one (Any, a
    record type) no longer takes orjson's native path, which would write every field of nested records."""
    sub: type
    for sub in base.__subclasses__():
        if sub.__dict__.get("_dump_native") and not sub.__dict__.get("_scalar_only"):
            sub._dump_native = False  # type: ignore[attr-defined]
        _recheck_native(sub)


def set_native_dumps(cls: type[JSONRecord], hints: Iterable[Any]) -> None:
    """Whether ``cls`` may be encoded by orjson's native dataclass path: no ``__faust`` blob, no renamed
    or excluded field, and no field that could hold a record with those (once any such class exists)."""
    if cls._options.include_metadata or cls._wire_out is not None:
        cls._dump_native = False
        return
    scalar_only = all(_scalar(tp) for tp in hints)
    cls._scalar_only = scalar_only  # type: ignore[attr-defined]
    cls._dump_native = scalar_only or not _wire_mapped[0]


_SCALARS = (int, float, str, bool, bytes, type(None), datetime, date, Decimal, UUID, enum.Enum)


def _scalar(tp: Any) -> bool:
    """True when a value of ``tp`` cannot contain a record."""
    if isinstance(tp, type) and typing.get_origin(tp) is None:
        return issubclass(tp, _SCALARS)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return True
    if origin is typing.Annotated:
        return _scalar(args[0])
    if origin in (Union, types.UnionType, list, tuple, set, frozenset, dict):
        return bool(args) and all(a is Ellipsis or _scalar(a) for a in args)
    return False


def _bare(tp: Any) -> Any:
    """``X`` for ``X`` and ``Optional[X]``; None for anything else."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else None
    return tp


def field_coercer(
    tp: Any, declared: Field[Any] | None, options: RecordOptions, required: bool = False
) -> Converter | None:
    """``coerce=True`` (the field's, else the class's): Faust's conversion of the field's class
    (``int(v)``, ``float(v)``, ``Decimal(v)``, ``str(v)``, ``bool(v)``, ``v.encode()``, ``date_parser(v)``);
    None when the field does not coerce (or its class converts nothing). None passes as None for an
    optional field; a required field converts it as Faust does (``str(None)`` is ``"None"``, ``int(None)``
    is refused)."""
    coerce = options.coerce if declared is None or declared.coerce is None else declared.coerce
    if not coerce:
        return None
    field = declared
    if field is None:
        field_class, _ = field_for_type(_bare(tp))
        field = field_class()
    if type(field).prepare_value is Field.prepare_value:
        return None
    parser = field.date_parser or options.date_parser
    if parser is not None and field.date_parser is None:
        field = field.bound(field.field, field.model or object)
        field.date_parser = parser
    prepare = field.prepare_value
    what = type_name(_bare(tp) or tp)

    def coerce_value(v: Any) -> Any:
        if v is None and not required:
            return None
        try:
            return prepare(v)
        except (TypeError, ValueError, InvalidOperation) as exc:
            raise FieldError(f"cannot coerce {show(v)} to {what}: {exc}") from None

    return coerce_value


def field_converter(tp: Any, declared: Field[Any] | None, options: RecordOptions) -> Converter:
    """How a decoded value becomes the field's value: by annotation (with the class's ``coercions``),
    except a datetime field under ``isodates=False`` / a Decimal field under ``decimals=False`` keeps the
    decoded value as Faust does, and a ``date_parser`` (the field's, else the class's) parses datetimes."""
    bare = _bare(tp)
    if bare is datetime:
        if not options.isodates:
            return conv_any
        parser = (declared.date_parser if declared is not None else None) or options.date_parser
        if parser is not None:
            return _parsed(parser)
    if bare is Decimal and not options.decimals:
        return conv_any
    return converter(tp, options.coercions)


def parse_asked(tp: Any, declared: Field[Any] | None, options: RecordOptions) -> bool:
    """Whether the class asked for the field's parsing as Faust does (``isodates=True`` or a ``date_parser``
    for a datetime, ``decimals=True`` for a Decimal): then text that does not parse refuses the record, as
    in Faust; agentstream's own parsing by default keeps such text instead."""
    bare = _bare(tp)
    if bare is datetime:
        given = declared is not None and declared.date_parser is not None
        return options.isodates and (given or bool({"isodates", "date_parser"} & options.explicit))
    if bare is Decimal:
        return options.decimals and "decimals" in options.explicit
    return False


def _parsed(parser: Any) -> Converter:
    def parse(v: Any) -> Any:
        if v is None or isinstance(v, datetime):
            return v
        try:
            return parser(v)
        except (TypeError, ValueError) as exc:
            raise FieldError(f"date_parser refused {show(v)}: {exc}") from None

    return parse
