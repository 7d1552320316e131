"""Typed records: the shape of the values (and keys) that flow through streams and tables.

A :class:`Record` subclass is turned into a :mod:`dataclasses` dataclass when it is defined, so
``orjson`` serialises instances natively (no per-field Python on the encode path).  Decoding goes
the other way through a list of per-field converters that is built once per class from its
annotations, so the hot path never introspects types.

.. code-block:: python

    class Point(Record):
        x: int
        y: int = 0

    Point.loads(b'{"x": 1}')          # Point(x=1, y=0)
    Point(x=1).dumps()                # b'{"x":1,"y":0}'
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, Literal, Self, Union, dataclass_transform
from uuid import UUID

import orjson

from .exceptions import SerializationError, ValidationError

__all__ = ["FieldError", "Record", "RecordOptions", "json_default", "json_dumps", "lookup_model", "registry", "type_decoder"]

Converter = Callable[[Any], Any]
"""Turns decoded JSON (or Python) data into a field's declared type, raising :class:`FieldError`."""

_MISSING: Any = dataclasses.MISSING
_ROOT = "__root__"
FAUST_KEY = "__faust"
"""Faust's metadata key: ``{"__faust": {"ns": "module.Class"}}`` names the payload's model."""
FAUST_ONLY_OPTIONS = frozenset({"coerce", "coercions", "decimals", "polymorphic_fields", "date_parser",
                                "allow_blessed_key", "blessed_key", "lazy_creation"})
registry: dict[str, type["Record"]] = {}
"""Every non-abstract Record subclass by namespace (``module.Qualname`` unless ``namespace=``)."""


class FieldError(ValueError):
    """Data does not fit a declared type.

    ``path`` collects the location innermost-first while the error propagates (cheap to extend);
    ``str()`` renders it outermost-first, e.g. ``customer.items[2].price: expected int, got 'x'``.
    It is a :class:`ValueError` so code using :func:`type_decoder` needs no agentstream import.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.path: list[str] = []
        super().__init__(problem)

    @property
    def location(self) -> str:
        """The path outermost-first: ``customer.items[2]``; empty when the value itself is wrong."""
        out = ""
        for part in reversed(self.path):
            out += part if part.startswith("[") or not out else "." + part
        return out

    def __str__(self) -> str:
        loc = self.location
        return f"{loc}: {self.problem}" if loc else self.problem


def _show(value: Any) -> str:
    """Short repr of offending data for error messages (records can be large)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "None"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


# --------------------------------------------------------------------------------------------
# Options and the Record base class
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordOptions:
    """Class keyword options of a Record (``class X(Record, validation=True)``).

    ``serializer`` picks the codec, ``validation`` checks constructor types, ``include_metadata``
    (on by default, as in Faust) adds Faust's ``{"__faust": {"ns": namespace}}`` blob when
    encoding, so untyped readers (tables and topics without a value type) rebuild the record;
    decoding always accepts it and uses it to pick a registered subclass; ``isodates`` is always
    on for datetime fields.
    """

    serializer: str | None = None
    include_metadata: bool = True
    isodates: bool = True
    validation: bool = False
    namespace: str = ""


class _FieldSpec(typing.NamedTuple):
    """Everything decoding needs about one field, precomputed per class."""

    name: str
    convert: Converter
    default: Any  # _MISSING when there is none
    factory: Callable[[], Any] | None


class FieldDescriptor:
    """``Model.field`` on the class: names a field for ``group_by`` and ``relative_to_field``."""

    __slots__ = ("field", "model", "default")

    def __init__(self, field: str, model: type, default: Any) -> None:
        self.field = field
        self.model = model
        self.default = default

    def getattr(self, obj: Any) -> Any:
        """The field's value on a record (or the key of a mapping)."""
        return obj[self.field] if isinstance(obj, dict) else getattr(obj, self.field)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        return self.getattr(obj)  # pragma: no cover - instances hold their values in __dict__

    def __repr__(self) -> str:
        return f"<FieldDescriptor {self.model.__name__}.{self.field}>"


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
class Record:
    """Base class for typed records; subclasses become dataclasses with generated methods.

    Fields come from class annotations (parents first, as with dataclasses).  ``loads`` /
    ``from_data`` coerce input by annotation and raise :class:`ValidationError` naming the field
    path; ``dumps`` produces compact JSON via orjson.
    """

    _options: ClassVar[RecordOptions] = RecordOptions()
    _decoder: ClassVar[Callable[[Any], Any] | None] = None
    _field_checks: ClassVar[tuple[tuple[str, Converter], ...] | None] = None
    _definition_locals: ClassVar[dict[str, Any]] = {}
    _has_post_init: ClassVar[bool] = False

    def __init_subclass__(
        cls,
        *,
        serializer: str | None = None,
        include_metadata: bool | None = None,
        isodates: bool | None = None,
        validation: bool | None = None,
        namespace: str | None = None,
        **kwargs: Any,
    ) -> None:
        abstract = bool(kwargs.pop("abstract", False))
        for name in FAUST_ONLY_OPTIONS & set(kwargs):  # accepted so Faust models import unchanged
            kwargs.pop(name)
        super().__init_subclass__(**kwargs)
        parent = cls._options
        cls._options = RecordOptions(
            serializer=serializer if serializer is not None else parent.serializer,
            include_metadata=parent.include_metadata if include_metadata is None else include_metadata,
            isodates=parent.isodates if isodates is None else isodates,
            validation=parent.validation if validation is None else validation,
            namespace=namespace or f"{cls.__module__}.{cls.__qualname__}",
        )
        cls._definition_locals = _caller_locals()
        for name in cls.__dict__.get("__annotations__", {}):
            if name not in cls.__dict__ and isinstance(getattr(cls, name, None), FieldDescriptor):
                setattr(cls, name, dataclasses.field())  # redeclared without a default: required
        dataclass(cls)  # modifies cls in place; eq+repr generated
        cls.__hash__ = _record_hash  # type: ignore[method-assign,assignment]  # by field values, as Faust's records
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            # Class access gives a descriptor (``Order.customer`` for group_by); instances keep
            # their values in __dict__, which wins over this non-data descriptor.
            setattr(cls, f.name, FieldDescriptor(f.name, cls, f.default))
        cls._has_post_init = hasattr(cls, "__post_init__")
        if not abstract:
            registry[cls._options.namespace] = cls  # for __faust.ns (polymorphic) decoding
        cls._decoder = None
        cls._field_checks = None
        if cls._options.validation:
            dc_init = cls.__dict__["__init__"]

            def __init__(self: Record, *args: Any, **kw: Any) -> None:
                dc_init(self, *args, **kw)
                type(self)._check_types(self)

            __init__.__qualname__ = f"{cls.__qualname__}.__init__"
            __init__.__doc__ = dc_init.__doc__
            setattr(cls, "__init__", __init__)
        try:
            cls._resolve()
        except NameError:
            pass  # forward reference to a class defined later: resolved on first decode

    # -- class-level precomputation -----------------------------------------------------------

    @classmethod
    def _resolve(cls) -> Callable[[Any], Any]:
        """Build (once) the decoder and validation checks from the resolved annotations."""
        decoder = cls.__dict__.get("_decoder")
        if decoder is not None:
            return typing.cast("Callable[[Any], Any]", decoder)
        hints = _type_hints(cls)
        specs: list[_FieldSpec] = []
        checks: list[tuple[str, Converter]] = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            tp = hints.get(f.name, Any)
            factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
            specs.append(_FieldSpec(f.name, _converter(tp), f.default, factory))
            check = _checker(tp)
            if check is not None:
                checks.append((f.name, check))
        cls._field_checks = tuple(checks)
        cls._decoder = _compile_decoder(cls, specs)
        return cls._decoder

    @classmethod
    def _get_decoder(cls) -> Callable[[Any], Any]:
        """The class's decoder, resolving deferred forward references on first use."""
        decoder = cls.__dict__.get("_decoder")
        if decoder is not None:
            return typing.cast("Callable[[Any], Any]", decoder)
        try:
            return cls._resolve()
        except NameError as exc:
            raise FieldError(f"cannot resolve the annotations of {cls.__name__}: {exc}") from exc

    @classmethod
    def _check_types(cls, obj: Record) -> None:
        """``validation=True``: reject constructor values whose type does not match the field."""
        checks = cls.__dict__.get("_field_checks")
        if checks is None:
            try:
                cls._get_decoder()
            except FieldError as exc:
                raise ValidationError(cls.__name__, _ROOT, exc.problem) from exc
            checks = cls._field_checks or ()
        values = obj.__dict__
        for name, check in checks:
            try:
                check(values[name])
            except FieldError as exc:
                exc.path.append(name)
                raise ValidationError(cls.__name__, exc.location, exc.problem) from None

    # -- decoding -------------------------------------------------------------------------------

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        """Build an instance from a dict (e.g. decoded JSON), coercing values by annotation.

        Unknown keys are ignored.  Raises :class:`ValidationError` naming the field path.
        """
        try:
            return typing.cast(Self, (cls.__dict__.get("_decoder") or cls._get_decoder())(data))
        except FieldError as exc:
            raise ValidationError(cls.__name__, exc.location or _ROOT, exc.problem) from None

    @classmethod
    def loads(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Decode JSON bytes into an instance (see :meth:`from_data`)."""
        try:
            decoded = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            problem = f"invalid JSON ({exc}); data starts {_show(data[:40])}"
            raise ValidationError(cls.__name__, _ROOT, problem) from exc
        try:
            return typing.cast(Self, (cls.__dict__.get("_decoder") or cls._get_decoder())(decoded))
        except FieldError as exc:
            raise ValidationError(cls.__name__, exc.location or _ROOT, exc.problem) from None

    # -- encoding -------------------------------------------------------------------------------

    def dumps(self) -> bytes:
        """Compact JSON bytes: datetimes as ISO 8601, Decimals as strings, enums as values."""
        return json_dumps(self)

    @classmethod
    def from_faust(cls, data: Mapping[str, Any]) -> "Record":
        """Decode a dict into the model its ``__faust.ns`` names, if that is ``cls`` or a subclass
        (Faust's polymorphic records); otherwise into ``cls``."""
        return (lookup_model(data, cls) or cls).from_data(data)

    def asdict(self) -> dict[str, Any]:
        """Field values as a dict; nested records (also inside lists/dicts) become dicts too."""
        return {name: _plain(value) for name, value in self.__dict__.items()}

    def to_representation(self) -> dict[str, Any]:
        """Faust name for :meth:`asdict`."""
        return self.asdict()


def _record_hash(self: Record) -> int:
    """Records hash by their field values (as Faust's do), so a Record can be a table or dict key;
    a record with a list field is unhashable, like a tuple holding a list."""
    return hash((type(self), tuple(self.__dict__.values())))


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.asdict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _caller_locals() -> dict[str, Any]:
    """Locals of the scope defining the class, so ``from __future__ import annotations`` works
    for records that reference other records defined in the same function (tests, notebooks)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name == "__init_subclass__":
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None or frame.f_locals is frame.f_globals:
        return {}
    return dict(frame.f_locals)


def _type_hints(cls: type[Record]) -> dict[str, Any]:
    localns = dict(cls._definition_locals)
    localns.setdefault(cls.__name__, cls)
    return typing.get_type_hints(cls, localns=localns)


_FAST_TYPES: dict[Converter, type] = {}  # filled below: converter -> exact type it passes as-is


def _nested_converter(tp: type[Record]) -> Converter:
    """Decode a nested record; looks the decoder up at call time so self-references work."""

    def convert(v: Any) -> Any:
        return (tp.__dict__.get("_decoder") or tp._get_decoder())(v)

    return convert


def _not_an_object(cls: type[Record], data: Any) -> Any:
    """Slow path of a decoder: accept instances and other Mappings, reject everything else."""
    if isinstance(data, cls):
        return data
    if isinstance(data, Mapping):
        return dict(data)
    raise FieldError(f"expected an object for {cls.__name__}, got {_show(data)}")


def _missing(name: str) -> FieldError:
    err = FieldError("required field is missing")
    err.path.append(name)
    return err


def _compile_decoder(cls: type[Record], specs: list[_FieldSpec]) -> Callable[[Any], Any]:
    """Generate a straight-line decoder for ``cls`` (as dataclasses generates ``__init__``).

    One function per class with the field names as constants and the common exact-type case
    checked inline: no loops, dict building or per-field calls for already-correct scalars.
    """
    ns: dict[str, Any] = {
        "cls": cls, "_new": object.__new__, "_MISSING": _MISSING, "FieldError": FieldError,
        "_missing": _missing, "_not_an_object": _not_an_object,
    }
    lines = [
        "def decode(data):",
        "    if type(data) is not dict:",
        "        data = _not_an_object(cls, data)",
        "        if type(data) is not dict:",  # an instance passed where data was expected
        "            return data",
    ]
    for i, spec in enumerate(specs):
        v, key = f"_v{i}", repr(spec.name)
        ns[f"_c{i}"] = spec.convert
        if spec.factory is None and spec.default is _MISSING:
            lines += [
                "    try:",
                f"        {v} = data[{key}]",
                "    except KeyError:",
                f"        raise _missing({key}) from None",
            ]
            indent = "    "
        else:
            ns[f"_d{i}"] = spec.default
            ns[f"_f{i}"] = spec.factory
            fallback = f"_f{i}()" if spec.factory is not None else f"_d{i}"
            lines += [
                f"    {v} = data.get({key}, _MISSING)",
                f"    if {v} is _MISSING:",
                f"        {v} = {fallback}",
                "    else:",
            ]
            indent = "        "
        if spec.convert is _conv_any:
            lines.append(f"{indent}pass")
            continue
        if spec.default is None and spec.factory is None:  # `x: T = None` accepts None (Faust's models do)
            lines.append(f"{indent}if {v} is not None:")
            indent += "    "
        fast = _FAST_TYPES.get(spec.convert)
        if fast is not None:
            ns[f"_t{i}"] = fast
            lines.append(f"{indent}if type({v}) is not _t{i}:")
            indent += "    "
        lines += [
            f"{indent}try:",
            f"{indent}    {v} = _c{i}({v})",
            f"{indent}except FieldError as exc:",
            f"{indent}    exc.path.append({key})",
            f"{indent}    raise",
        ]
    values = ", ".join(f"{s.name!r}: _v{i}" for i, s in enumerate(specs))
    lines += ["    obj = _new(cls)", f"    obj.__dict__ = {{{values}}}"]
    if cls._has_post_init:
        lines.append("    obj.__post_init__()")
    lines.append("    return obj")
    exec("\n".join(lines), ns)  # noqa: S102 - source built only from field names (identifiers)
    decode = typing.cast("Callable[[Any], Any]", ns["decode"])
    decode.__qualname__ = f"{cls.__qualname__}._decoder"
    return decode


# --------------------------------------------------------------------------------------------
# JSON encoding
# --------------------------------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    """Types orjson does not serialise natively."""
    if isinstance(obj, Decimal):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def lookup_model(data: Any, base: type | None = None) -> type[Record] | None:
    """The Record class named by a payload's ``__faust: {"ns": ...}`` blob, if registered (and a
    subclass of ``base`` when given)."""
    if type(data) is not dict:
        return None
    blob = data.get(FAUST_KEY)
    ns = blob.get("ns") if isinstance(blob, dict) else None
    model = registry.get(ns) if isinstance(ns, str) else None
    if model is None or (base is not None and not issubclass(model, base)):
        return None
    return model


def _metadata_default(obj: Any) -> Any:
    """``include_metadata=True``: records become their fields plus Faust's ``__faust`` blob."""
    if isinstance(obj, Record):
        out = dict(obj.__dict__)
        if obj._options.include_metadata:
            out[FAUST_KEY] = {"ns": obj._options.namespace}
        return out
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return _json_default(obj)


def json_default(obj: Any) -> Any:
    """orjson ``default=`` (with ``OPT_PASSTHROUGH_DATACLASS``) that encodes as :func:`json_dumps`
    does: tagged Records, Decimals as text, sets as lists; raises TypeError for anything else."""
    return _metadata_default(obj)


def json_dumps(obj: Any) -> bytes:
    """orjson with Record/Decimal/set support; raises :class:`SerializationError` on failure.

    Records (top level, nested, in lists and dicts) carry their ``__faust`` tag unless their
    class says ``include_metadata=False``; a top-level record without it takes orjson's native
    dataclass path (no Python per field).
    """
    if isinstance(obj, Record) and not obj._options.include_metadata:
        option = 0
    else:
        option = orjson.OPT_PASSTHROUGH_DATACLASS
    try:
        return orjson.dumps(obj, default=_metadata_default if option else _json_default, option=option)
    except orjson.JSONEncodeError:
        pass
    try:  # rare: dicts with int (etc.) keys; retried so the common case pays nothing
        return orjson.dumps(obj, default=_metadata_default if option else _json_default,
                            option=option | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        raise SerializationError(
            f"cannot encode {type(obj).__name__} as JSON: {exc}. "
            "Fix: use JSON-able field types (str, int, float, bool, datetime, Decimal, Record, ...)"
        ) from exc


# --------------------------------------------------------------------------------------------
# Converters (decoding) and checkers (validation=True)
# --------------------------------------------------------------------------------------------


def type_decoder(tp: Any) -> Converter:
    """Return a function coercing decoded JSON data to ``tp`` (the rules Records use).

    The function raises :class:`FieldError` (a ``ValueError``) whose message names the path.
    """
    return _converter(tp)


def _expected(what: str, value: Any) -> FieldError:
    return FieldError(f"expected {what}, got {_show(value)}")


def _conv_int(v: Any) -> Any:
    if type(v) is int:
        return v
    if type(v) is float and v.is_integer():
        return int(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    raise _expected("int", v)


def _conv_float(v: Any) -> Any:
    if type(v) is float:
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise _expected("float", v)


def _conv_str(v: Any) -> Any:
    if isinstance(v, str):
        return v
    raise _expected("str", v)


def _conv_bool(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    raise _expected("bool", v)


def _conv_any(v: Any) -> Any:
    return v


def _conv_none(v: Any) -> Any:
    if v is None:
        return v
    raise _expected("null", v)


def _conv_datetime(v: Any) -> Any:
    if isinstance(v, datetime):
        return v
    if isinstance(v, str):
        try:
            return datetime.fromisoformat(v)
        except ValueError:
            raise _expected("an ISO 8601 datetime", v) from None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return datetime.fromtimestamp(v, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise _expected("an epoch timestamp in range", v) from None
    raise _expected("datetime (ISO string or epoch seconds)", v)


def _conv_date(v: Any) -> Any:
    if isinstance(v, date) and not isinstance(v, datetime):
        return v
    if isinstance(v, str):
        try:
            return date.fromisoformat(v)
        except ValueError:
            raise _expected("an ISO 8601 date", v) from None
    raise _expected("date (ISO string)", v)


def _conv_decimal(v: Any) -> Any:
    if isinstance(v, Decimal):
        return v
    if isinstance(v, str):
        try:
            return Decimal(v)
        except InvalidOperation:
            raise _expected("a decimal number", v) from None
    if isinstance(v, int) and not isinstance(v, bool):
        return Decimal(v)
    if isinstance(v, float):
        return Decimal(repr(v))  # shortest round-trip text, not the binary expansion
    raise _expected("Decimal (string or number)", v)


def _conv_uuid(v: Any) -> Any:
    if isinstance(v, UUID):
        return v
    if isinstance(v, str):
        try:
            return UUID(v)
        except ValueError:
            raise _expected("a UUID", v) from None
    raise _expected("UUID (string)", v)


_SCALARS: dict[Any, Converter] = {
    int: _conv_int,
    float: _conv_float,
    str: _conv_str,
    bool: _conv_bool,
    datetime: _conv_datetime,
    date: _conv_date,
    Decimal: _conv_decimal,
    UUID: _conv_uuid,
    type(None): _conv_none,
    None: _conv_none,
    Any: _conv_any,
    object: _conv_any,
}

_FAST_TYPES.update({_conv_int: int, _conv_float: float, _conv_str: str, _conv_bool: bool})

_LIST_ORIGINS: dict[Any, type] = {
    list: list,
    cabc.Sequence: list,
    cabc.MutableSequence: list,
    set: set,
    frozenset: frozenset,
    cabc.Set: frozenset,
    cabc.MutableSet: set,
}
_DICT_ORIGINS: set[Any] = {dict, cabc.Mapping, cabc.MutableMapping}


def _dict_key_converter(tp: Any) -> Converter:
    """JSON object keys are always strings, so numeric keys are parsed from text."""
    if tp is int:

        def key_int(k: Any) -> Any:
            if isinstance(k, str):
                try:
                    return int(k)
                except ValueError:
                    raise _expected("an int key", k) from None
            return _conv_int(k)

        return key_int
    return _converter(tp)


def _converter(tp: Any) -> Converter:  # noqa: C901 - one dispatch table, kept in one place
    scalar = _SCALARS.get(tp) if _hashable(tp) else None
    if scalar is not None:
        return scalar
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)

    if isinstance(tp, type) and origin is None:
        if issubclass(tp, Record):
            return _nested_converter(tp)
        if issubclass(tp, enum.Enum):
            return _enum_converter(tp)
        if tp in _LIST_ORIGINS or tp is tuple:
            return _container_converter(_LIST_ORIGINS.get(tp, tuple), _conv_any)
        if tp in _DICT_ORIGINS:
            return _dict_converter(_conv_any, _conv_any)
        return _unsupported_converter(tp)

    if origin is Union or origin is types.UnionType:
        return _union_converter(args)
    if origin is Literal:
        return _literal_converter(args)
    if origin is typing.Annotated:
        return _converter(args[0])
    if origin in _LIST_ORIGINS:
        return _container_converter(_LIST_ORIGINS[origin], _converter(args[0]) if args else _conv_any)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _container_converter(tuple, _converter(args[0]))
        if args == ((),):
            return _fixed_tuple_converter(())
        return _fixed_tuple_converter(tuple(_converter(a) for a in args))
    if origin in _DICT_ORIGINS:
        key = _dict_key_converter(args[0]) if args else _conv_any
        value = _converter(args[1]) if len(args) > 1 else _conv_any
        return _dict_converter(key, value)
    if isinstance(tp, typing.TypeVar) or isinstance(tp, typing.ForwardRef):
        return _conv_any
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
            raise FieldError(f"expected one of {tp.__name__} ({allowed}), got {_show(v)}") from None

    return convert


def _unsupported_converter(tp: Any) -> Converter:
    name = _type_name(tp)

    def convert(v: Any) -> Any:
        if isinstance(tp, type) and isinstance(v, tp):
            return v
        raise FieldError(
            f"cannot decode {_show(v)} into unsupported field type {name}. Fix: use a Record, "
            "a builtin scalar, datetime, date, Decimal, UUID, an Enum, or list/dict of those"
        )

    return convert


def _union_converter(args: tuple[Any, ...]) -> Converter:
    optional = type(None) in args
    choices = [a for a in args if a is not type(None)]
    if len(choices) == 1:
        inner = _converter(choices[0])
        if optional:

            def convert_optional(v: Any) -> Any:
                return None if v is None else inner(v)

            return convert_optional
        return inner
    convs = [_converter(a) for a in choices]
    names = " | ".join(_type_name(a) for a in args)

    def convert_union(v: Any) -> Any:
        if v is None and optional:
            return None
        for conv in convs:  # first type that accepts the value wins, in declaration order
            try:
                return conv(v)
            except FieldError:
                continue
        raise _expected(names, v)

    return convert_union


def _literal_converter(values: tuple[Any, ...]) -> Converter:
    def convert(v: Any) -> Any:
        if any(v == x and type(v) is type(x) for x in values):  # type check: True is not 1
            return v
        raise _expected("one of " + ", ".join(map(repr, values)), v)

    return convert


def _container_converter(kind: type, item: Converter) -> Converter:
    name = kind.__name__

    def convert(v: Any) -> Any:
        if not isinstance(v, (list, tuple, set, frozenset)):
            raise _expected(f"a {name}", v)
        if item is _conv_any:
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
            raise _expected(f"an array of {len(items)} items", v)
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
            raise _expected("an object", v)
        if key is _conv_str and value is _conv_any:
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


def _checker(tp: Any) -> Converter | None:  # noqa: C901
    """Strict type check for ``validation=True`` constructors; ``None`` means anything goes."""
    if tp is Any or tp is object:
        return None
    if tp is None or tp is type(None):
        return _conv_none
    if tp is bool:
        return _conv_bool
    if tp is int:

        def check_int(v: Any) -> Any:
            if not isinstance(v, int) or isinstance(v, bool):
                raise _expected("int", v)

        return check_int
    if tp is float:
        return _conv_float
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        checks = [_checker(a) for a in args]
        if any(c is None for c in checks):
            return None
        names = " | ".join(_type_name(a) for a in args)

        def check_union(v: Any) -> Any:
            for check in checks:
                try:
                    check(v)  # type: ignore[misc]
                    return
                except FieldError:
                    continue
            raise _expected(names, v)

        return check_union
    if origin is Literal:
        return _literal_converter(args)
    if origin is typing.Annotated:
        return _checker(args[0])
    if origin in _LIST_ORIGINS or origin is tuple:
        container: type = origin
        variadic = origin is not tuple or (len(args) == 2 and args[1] is Ellipsis)
        item = _checker(args[0]) if args and variadic else None

        def check_items(v: Any) -> Any:
            if not isinstance(v, container):
                raise _expected(_type_name(tp), v)
            if item is not None:
                for i, x in enumerate(typing.cast("cabc.Iterable[Any]", v)):
                    try:
                        item(x)
                    except FieldError as exc:
                        exc.path.append(f"[{i}]")
                        raise

        return check_items
    if origin in _DICT_ORIGINS:
        value_check = _checker(args[1]) if len(args) > 1 else None

        def check_dict(v: Any) -> Any:
            if not isinstance(v, Mapping):
                raise _expected(_type_name(tp), v)
            if value_check is not None:
                for k, x in v.items():
                    try:
                        value_check(x)
                    except FieldError as exc:
                        exc.path.append(f"[{k!r}]")
                        raise

        return check_dict
    if isinstance(tp, type):

        def check_instance(v: Any) -> Any:
            if not isinstance(v, tp):
                raise _expected(tp.__name__, v)

        return check_instance
    return None
