"""The :class:`Record` base class: subclasses become dataclasses whose decoder, checks and JSON
encoding are prepared once per class (:mod:`.decoders`, :mod:`.validation`, :mod:`.encoding`);
see :mod:`agentstream.models` for an example."""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self, dataclass_transform

import orjson

from ..exceptions import ValidationError
from .converters import Converter, register_nested
from .decoders import FieldSpec, compile_decoder
from .encoding import JSONRecord, json_dumps, serializer_codec
from .errors import FieldError, show
from .fields import (
    BooleanField,
    BytesField,
    CharField,
    DatetimeField,
    DecimalField,
    Field,
    FloatField,
    IntegerField,
    NumberField,
    StringField,
    field_for_type,
)
from .options import FAUST_KEY, FAUST_ONLY_OPTIONS, REFUSED_CLASS_OPTIONS, RecordOptions
from .validation import checker
from .wire import field_coercer, field_converter, parse_asked, set_native_dumps, set_wire_names

__all__ = ["FieldDescriptor", "Record", "registry", "lookup_model", "type_hints"]

_ROOT = "__root__"
registry: dict[str, type[Record]] = {}
"""Every non-abstract Record subclass by namespace (``module.Qualname`` unless ``namespace=``)."""


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


@dataclass_transform(
    field_specifiers=(
        dataclasses.field,
        dataclasses.Field,
        Field,
        BooleanField,
        NumberField,
        IntegerField,
        FloatField,
        DecimalField,
        CharField,
        StringField,
        BytesField,
        DatetimeField,
    )
)
class Record(JSONRecord):
    """Base class for typed records; subclasses become dataclasses with generated methods.

    Fields come from class annotations (parents first, as with dataclasses).  ``loads`` /
    ``from_data`` coerce input by annotation and raise :class:`ValidationError` naming the field
    path; ``dumps`` produces compact JSON via orjson.
    """

    _options: ClassVar[RecordOptions] = RecordOptions()
    _decoder: ClassVar[Callable[[Any], Any] | None] = None
    _field_checks: ClassVar[tuple[FieldRule, ...] | None] = None
    _definition_locals: ClassVar[dict[str, Any]] = {}
    _has_post_init: ClassVar[bool] = False
    _coercers: ClassVar[tuple[tuple[str, Converter], ...] | None] = None
    _codec_name: ClassVar[str | None] = None  # the class's serializer when it is not JSON (dumps/loads)
    _implicit_none: ClassVar[frozenset[str]] = frozenset()  # Optional[X] fields given default None

    def __init_subclass__(
        cls,
        *,
        serializer: str | None = None,
        include_metadata: bool | None = None,
        isodates: bool | None = None,
        validation: bool | None = None,
        namespace: str | None = None,
        decimals: bool | None = None,
        coerce: bool | None = None,
        coercions: Mapping[Any, Callable[[Any], Any]] | None = None,
        date_parser: Callable[[Any], Any] | None = None,
        polymorphic_fields: bool | None = None,
        allow_blessed_key: bool | None = None,
        **kwargs: Any,
    ) -> None:
        abstract = bool(kwargs.pop("abstract", False))
        for name in FAUST_ONLY_OPTIONS & set(kwargs):  # nothing to do here (see FAUST_ONLY_OPTIONS)
            kwargs.pop(name)
        for name, why in REFUSED_CLASS_OPTIONS.items():
            if name in kwargs:
                raise TypeError(f"class {cls.__qualname__}(Record, {name}=...): not supported by agentstream: {why}")
        super().__init_subclass__(**kwargs)
        parent = cls._options
        cls._options = RecordOptions(
            serializer=serializer if serializer is not None else parent.serializer,
            include_metadata=parent.include_metadata if include_metadata is None else include_metadata,
            isodates=parent.isodates if isodates is None else isodates,
            validation=parent.validation if validation is None else validation,
            namespace=namespace or f"{cls.__module__}.{cls.__qualname__}",
            decimals=parent.decimals if decimals is None else decimals,
            # Faust's rule: naming `validation` at all (even False) turns coercion on
            coerce=True if validation is not None else parent.coerce if coerce is None else coerce,
            coercions={**parent.coercions, **(coercions or {})},
            date_parser=parent.date_parser if date_parser is None else date_parser,
            polymorphic_fields=parent.polymorphic_fields if polymorphic_fields is None else polymorphic_fields,
            allow_blessed_key=parent.allow_blessed_key if allow_blessed_key is None else allow_blessed_key,
            explicit=parent.explicit
            | {n for n, v in (("isodates", isodates), ("decimals", decimals), ("date_parser", date_parser)) if v},
        )
        cls._definition_locals = _caller_locals()
        cls._codec_name = cls._options.serializer if cls._options.serializer != "json" else None
        if cls._codec_name is not None:  # the plain dumps/loads stay free of the serializer checks
            if "dumps" not in cls.__dict__:
                cls.dumps = _codec_dumps  # type: ignore[method-assign]
            if "loads" not in cls.__dict__:
                cls.loads = classmethod(_codec_loads)  # type: ignore[method-assign,assignment,arg-type]
        for name in cls.__dict__.get("__annotations__", {}):
            if name not in cls.__dict__ and (
                isinstance(getattr(cls, name, None), (FieldDescriptor, Field)) or name in vars(Record)
            ):  # redeclared without a default, or named as a Record method (``validate: bool``): required
                setattr(cls, name, dataclasses.field())
        _optional_defaults(cls)
        dataclass(cls)  # modifies cls in place; eq+repr generated
        cls.__hash__ = _record_hash  # type: ignore[method-assign,assignment]  # by field values, as Faust's records
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            # Class access gives a descriptor (``Order.customer`` for group_by; a declared field
            # class, ``StringField(...)``, is its own); instances keep their values in __dict__,
            # which wins over these non-data descriptors.
            descriptor = f.bound(f.name, cls) if isinstance(f, Field) else FieldDescriptor(f.name, cls, f.default)
            setattr(cls, f.name, descriptor)
        cls._has_post_init = hasattr(cls, "__post_init__")
        if not abstract:
            registry[cls._options.namespace] = cls  # for __faust.ns (polymorphic) decoding
        cls._decoder = None
        cls._field_checks = None
        cls._coercers = None
        fields = {f.name: cls.__dict__.get(f.name) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        declared = [d for d in fields.values() if isinstance(d, Field)]
        set_wire_names(cls, fields)
        coerces = cls._options.coerce or any(d.coerce for d in declared)
        if cls._options.validation or coerces:
            _wrap_init(cls, coerces, cls._options.validation)
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
        hints = type_hints(cls)
        specs: list[FieldSpec] = []
        rules: list[FieldRule] = []
        coercers: list[tuple[str, Converter]] = []
        options = cls._options
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            tp = hints.get(f.name, Any)
            factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
            declared = getattr(cls, f.name, None)
            declared = declared if isinstance(declared, Field) else None
            key = declared.input_name if declared is not None else f.name
            required = f.default is dataclasses.MISSING and factory is None
            coerce = field_coercer(tp, declared, options, required)
            if coerce is not None:
                coercers.append((f.name, coerce))
            convert = coerce or field_converter(tp, declared, options)
            strict = coerce is not None or parse_asked(tp, declared, options)
            specs.append(FieldSpec(f.name, convert, f.default, factory, key, strict=strict))
            field = declared if declared is not None else _implicit_field(tp, f.name, cls)
            rules.append(FieldRule(f.name, checker(tp), field, f.default is None and factory is None))
        cls._field_checks = tuple(rules)
        cls._coercers = tuple(coercers)
        set_native_dumps(cls, [hints.get(f.name, Any) for f in dataclasses.fields(cls)])  # type: ignore[arg-type]
        optioned = tuple(r for r in rules if r.field is not None)
        after = _decode_check(cls.__name__, optioned) if cls._options.validation and optioned else None
        cls._decoder = compile_decoder(cls, specs, cls._has_post_init, after)
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
    def _coerce_values(cls, obj: Record) -> None:
        """``coerce=True``: convert the constructor's values as Faust's field classes do."""
        coercers = cls.__dict__.get("_coercers")
        if coercers is None:
            cls._rules()
            coercers = cls._coercers or ()
        values = obj.__dict__
        for name, coerce in coercers:
            try:
                values[name] = coerce(values[name])
            except FieldError as exc:
                raise ValidationError(cls.__name__, name, exc.problem) from None

    @classmethod
    def make_final(cls) -> None:
        """Faust's ``lazy_creation`` finisher: nothing to do (annotations resolve on first use)."""

    @classmethod
    def _check_types(cls, obj: Record) -> None:
        """``validation=True``: raise the first problem of the constructor's values."""
        errors = Record.validate(obj)  # not obj.validate: a field may be named "validate"
        if errors:
            raise errors[0]

    @classmethod
    def _rules(cls) -> tuple[FieldRule, ...]:
        rules = cls.__dict__.get("_field_checks")
        if rules is None:
            try:
                cls._get_decoder()
            except FieldError as exc:
                raise ValidationError(cls.__name__, _ROOT, exc.problem) from exc
            rules = cls._field_checks or ()
        return typing.cast("tuple[FieldRule, ...]", rules)

    # -- validation (Faust's Model.validate / is_valid / validate_or_raise) ---------------------

    def validate(self) -> list[ValidationError]:
        """Every problem of this record's values, in field order; empty when it is valid.

        A value must have its field's type (as ``validation=True`` checks it: no coercion) and
        meet its field's options (``StringField(max_length=5)``...); a plain ``str``/``bytes``
        field must not be blank and a ``Decimal`` must be finite, as in Faust. ``None`` is
        accepted for a field whose default is ``None``.
        """
        cls = type(self)
        errors: list[ValidationError] = []
        values = self.__dict__
        for name, check, field, none_ok in cls._rules():
            value = values.get(name)
            if value is None and none_ok:
                continue
            if check is not None:
                try:
                    check(value)
                except FieldError as exc:
                    exc.path.append(name)
                    errors.append(ValidationError(cls.__name__, exc.location, exc.problem))
                    continue
            if field is not None:
                errors.extend(_as_error(cls.__name__, name, p) for p in field.validate(value))
        return errors

    def is_valid(self) -> bool:
        """True when :meth:`validate` finds no problem."""
        return not self.validate()

    def validate_or_raise(self) -> None:
        """Raise the first problem :meth:`validate` finds (a :class:`ValidationError`)."""
        errors = self.validate()
        if errors:
            raise errors[0]

    @property
    def validation_errors(self) -> list[ValidationError]:
        """Faust's name for :meth:`validate`'s result."""
        return self.validate()

    def derive(self, *objects: Record, **fields: Any) -> Self:
        """A new record of this class: this one's values, updated from ``objects`` (in order) and
        then ``fields``, built through the constructor (so ``validation=True`` checks it); the
        original is unchanged. A value whose name is not a field raises TypeError, as in Faust."""
        data = dict(self.__dict__)
        for obj in objects:
            data.update(obj.__dict__)
        data.update(fields)
        return type(self)(**data)

    # -- decoding -------------------------------------------------------------------------------

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        """Build an instance from a dict (e.g. decoded JSON), coercing values by annotation.

        Unknown keys are ignored; data tagged with Faust's ``__faust: {"ns": ...}`` naming a
        registered subclass of ``cls`` builds that subclass, as in Faust. Raises
        :class:`ValidationError` naming the field path.
        """
        try:
            return typing.cast(Self, _decoder_for(cls, data)(data))
        except FieldError as exc:
            raise ValidationError(cls.__name__, exc.location or _ROOT, exc.problem) from None

    @classmethod
    def loads(
        cls,
        data: bytes | bytearray | memoryview | str,
        serializer: str | None = None,  # not keyword-only (Faust's are): CPython 3.11 parses those slower
        default_serializer: str | None = None,
    ) -> Self:
        """Decode JSON bytes into an instance (see :meth:`from_data`); the class's ``serializer`` option,
        else ``serializer`` (Faust's precedence), names another codec (``"binary"``, ``"json|binary"``...)."""
        if serializer is not None or default_serializer is not None:
            return cls._loads_with(data, serializer or default_serializer)
        try:
            decoded = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            problem = f"invalid JSON ({exc}); data starts {show(data[:40])}"
            raise ValidationError(cls.__name__, _ROOT, problem) from exc
        try:
            return typing.cast(Self, _decoder_for(cls, decoded)(decoded))
        except FieldError as exc:
            raise ValidationError(cls.__name__, exc.location or _ROOT, exc.problem) from None

    # -- encoding -------------------------------------------------------------------------------

    def dumps(self, serializer: str | None = None) -> bytes:
        """Compact JSON bytes (datetimes as ISO 8601, Decimals as strings, enums as values, Faust's
        bytes); ``serializer``, else the class's ``serializer`` option (Faust's precedence), names another codec."""
        if serializer is None:
            return json_dumps(self)
        return self._dumps_with(serializer)

    def _dumps_with(self, serializer: str | None) -> bytes:
        """``dumps`` naming a serializer, or for a class whose ``serializer`` option is not JSON."""
        name = serializer or self._codec_name
        if name is None or name == "json":
            return json_dumps(self)
        return typing.cast(bytes, serializer_codec(type(self), name).dumps(self))

    @classmethod
    def _loads_with(cls, data: bytes | bytearray | memoryview | str, serializer: str | None) -> Self:
        """``loads`` naming a serializer, or for a class whose ``serializer`` option is not JSON."""
        name = cls._codec_name or serializer
        if name is None or name == "json":
            return cls.loads(data)
        return typing.cast(Self, serializer_codec(cls, name).loads(data))

    @classmethod
    def from_faust(cls, data: Mapping[str, Any]) -> Record:
        """Decode a dict into the model its ``__faust.ns`` names, if that is ``cls`` or a subclass
        (Faust's polymorphic records); otherwise into ``cls``."""
        return (lookup_model(data, cls) or cls).from_data(data)

    def asdict(self) -> dict[str, Any]:
        """Field values as a dict under their output names, ``exclude``d fields left out (as Faust's);
        nested records (also inside lists/dicts) become dicts too."""
        values = self.__dict__
        wire = type(self)._wire_out
        if wire is None:
            return {name: _plain(value) for name, value in values.items()}
        return {out: _plain(values[name]) for name, out in wire}

    def to_representation(self) -> dict[str, Any]:
        """Faust name for :meth:`asdict` (Faust's also adds the ``__faust`` blob; :meth:`dumps` does)."""
        return self.asdict()


def _codec_dumps(self: Record, serializer: str | None = None) -> bytes:
    """``dumps`` of a class whose ``serializer`` option is not JSON (Faust: the argument first)."""
    return self._dumps_with(serializer)


def _codec_loads(
    cls: type[Record],
    data: bytes | bytearray | memoryview | str,
    serializer: str | None = None,
    default_serializer: str | None = None,
) -> Record:
    """``loads`` of a class whose ``serializer`` option is not JSON (Faust: the class's option first)."""
    return cls._loads_with(data, serializer or default_serializer)


def _wrap_init(cls: type[Record], coerce: bool, validate: bool) -> None:
    """The dataclass ``__init__``, then Faust's coercion (``coerce=True``) and ``validate_or_raise()``
    (``validation=True``): classes without these options keep the generated ``__init__`` as it is."""
    dc_init = cls.__dict__["__init__"]

    if coerce and validate:

        def __init__(self: Record, *args: Any, **kw: Any) -> None:
            dc_init(self, *args, **kw)
            type(self)._coerce_values(self)
            type(self)._check_types(self)

    elif coerce:

        def __init__(self: Record, *args: Any, **kw: Any) -> None:
            dc_init(self, *args, **kw)
            type(self)._coerce_values(self)

    else:

        def __init__(self: Record, *args: Any, **kw: Any) -> None:
            dc_init(self, *args, **kw)
            type(self)._check_types(self)  # Faust's validate_or_raise(): the first problem

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__doc__ = dc_init.__doc__
    cls.__init__ = __init__  # type: ignore[method-assign,assignment]


_OPTIONAL_TEXT = re.compile(r"^\s*(typing\.)?Optional\[|\|\s*None\s*$|^\s*None\s*\|")


def _is_optional(annotation: Any, cls: type) -> bool:
    """Whether an annotation is ``Optional[X]`` / ``X | None`` (a string one evaluated in the class's
    scope; one naming a class not defined yet is read as text)."""
    if isinstance(annotation, str):
        module = sys.modules.get(cls.__module__)
        scope = dict(vars(module)) if module is not None else {}
        try:
            annotation = eval(annotation, scope, dict(getattr(cls, "_definition_locals", {})))
        except Exception:
            return bool(_OPTIONAL_TEXT.search(annotation))
        if isinstance(annotation, str):  # quoted under `from __future__ import annotations`
            return _is_optional(annotation, cls)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    return False


def _optional_defaults(cls: type[Record]) -> None:
    """Faust gives a field annotated ``Optional[X]`` without a default the default None (in the
    constructor and when decoding). Such a field takes ``default=None`` here too; where a required
    field follows it (which Faust allows, its signature puts optional fields last) it becomes
    keyword-only, so the dataclass keeps the order of the fields."""
    own = cls.__dict__.get("__annotations__", {})
    implicit = set(getattr(cls, "_implicit_none", ()))
    for name, annotation in own.items():
        if name not in cls.__dict__ and _is_optional(annotation, cls):
            implicit.add(name)
            setattr(cls, name, dataclasses.field(default=None))
        elif name in cls.__dict__:
            implicit.discard(name)  # given its own default (or field) here
    cls._implicit_none = frozenset(implicit)
    if not implicit:
        return
    inherited: dict[str, dataclasses.Field[Any]] = dict(getattr(cls, "__dataclass_fields__", {}))
    order = [*inherited, *(n for n in own if n not in inherited)]

    def required(name: str) -> bool:
        value = cls.__dict__.get(name, inherited.get(name))
        if isinstance(value, dataclasses.Field):
            if value.kw_only is True:
                return False
            return value.default is dataclasses.MISSING and value.default_factory is dataclasses.MISSING
        return name in own and name not in cls.__dict__

    for i, name in enumerate(order):
        if name in implicit and any(required(later) for later in order[i + 1 :]):
            if name not in own:  # a parent's: redeclared here (the dataclass keeps its position)
                own = cls.__dict__.get("__annotations__")
                if own is None:
                    own = {}
                    cls.__annotations__ = own
                own[name] = inherited[name].type
            setattr(cls, name, dataclasses.field(default=None, kw_only=True))


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


def type_hints(cls: type[Record]) -> dict[str, Any]:
    """The class's resolved annotations, forward references to records of its defining scope included."""
    localns = dict(cls._definition_locals)
    localns.setdefault(cls.__name__, cls)
    return typing.get_type_hints(cls, localns=localns)


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


class FieldRule(typing.NamedTuple):
    """What :meth:`Record.validate` checks of one field, precomputed per class."""

    name: str
    check: Converter | None  # the strict type check; None: any value
    field: Field[Any] | None  # the declared (or implicit) field class with its options
    none_ok: bool  # the default is None, so None is accepted


def _implicit_field(tp: Any, name: str, model: type) -> Field[Any] | None:
    """Faust's field for a plain annotation, when its class checks anything (str, bytes, Decimal)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        tp = args[0]  # Optional[X]: X's field
    field_class, _ = field_for_type(tp)
    if field_class.validate is Field.validate:
        return None
    return field_class().bound(name, model)


def _as_error(model: str, name: str, problem: ValidationError | str) -> ValidationError:
    return problem if isinstance(problem, ValidationError) else ValidationError(model, name, problem)


def _decode_check(model: str, rules: tuple[FieldRule, ...]) -> Callable[[Any], None]:
    """``validation=True``: decoded records meet their fields' options too (Faust validates in
    ``__init__``, which its decoding calls); the first problem is raised as a FieldError."""

    def check(obj: Any) -> None:
        values = obj.__dict__
        for name, _check, field, none_ok in rules:
            value = values.get(name)
            if value is None and none_ok:
                continue
            for problem in field.validate(value):  # type: ignore[union-attr]
                err = FieldError(problem.reason if isinstance(problem, ValidationError) else problem)
                err.path.append(name)
                raise err

    return check


def _decoder_for(cls: type[Record], data: Any) -> Callable[[Any], Any]:
    """The decoder of ``cls``, or of the registered subclass that ``data``'s ``__faust`` tag names."""
    if type(data) is dict:
        blob = data.get(FAUST_KEY)
        if type(blob) is dict and blob.get("ns") != cls._options.namespace:
            cls = lookup_model(data, cls) or cls
    return cls.__dict__.get("_decoder") or cls._get_decoder()


def _nested_converter(tp: type[Record]) -> Converter:
    """Decode a nested record; looks the decoder up at call time so self-references work.

    A payload tagged with Faust's ``__faust: {"ns": ...}`` naming a registered subclass of the
    field's type decodes as that subclass (a ``Dog`` in an ``animal: Animal`` field stays a Dog).
    """
    own = tp._options.namespace

    def convert(v: Any) -> Any:
        if type(v) is dict:
            blob = v.get(FAUST_KEY)
            if blob is not None and type(blob) is dict and blob.get("ns") != own:
                return _decoder_for(tp, v)(v)
        return (tp.__dict__.get("_decoder") or tp._get_decoder())(v)

    return convert


register_nested(Record, _nested_converter)
