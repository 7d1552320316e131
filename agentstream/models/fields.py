"""Declared fields with options (Faust's ``faust.models.fields``): ``name: str = StringField(max_length=20)``.

A field object *is* a :class:`dataclasses.Field` (the Record's dataclass takes its default from it) that
also knows the checks its options ask for: :meth:`Field.validate` yields one problem per broken rule.
``Record.validate()`` / ``is_valid()`` run them; a Record with ``validation=True`` runs them in its
constructor and when it is decoded, and raises the first. A field declared by a plain annotation gets
Faust's implicit field for its type (:func:`field_for_type`): text must not be blank, a Decimal must be
finite. Faust's known slips are done right here: ``min_value=0``/``max_value=0`` are enforced, a
``max_length`` message says "at most", and a Decimal's digits and places are counted as written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

from ..exceptions import ValidationError
from .converters import converter

__all__ = [
    "Field",
    "BooleanField",
    "NumberField",
    "IntegerField",
    "FloatField",
    "DecimalField",
    "CharField",
    "StringField",
    "BytesField",
    "DatetimeField",
    "TYPE_TO_FIELD",
    "field_for_type",
    "UNSUPPORTED_OPTIONS",
]

T = TypeVar("T")
_MISSING: Any = dataclasses.MISSING

UNSUPPORTED_OPTIONS = {
    "tag": "Faust's Secret/Sensitive/Personal tags are not supported (declare the plain type; "
    "exclude=True keeps a field off the wire)",
}
"""Faust field options agentstream cannot honour, and why: declaring one raises TypeError naming it."""

_WIRE_OPTIONS = ("input_name", "output_name", "exclude", "coerce", "date_parser")


class Field(dataclasses.Field, Generic[T]):  # type: ignore[type-arg]
    """A Record field with options; subclasses override :meth:`validate` (Faust's ``FieldDescriptor``).

    ``required=True`` (the default) with no ``default`` makes the field required; a ``default`` (or
    ``required=False``, default ``None``) makes it optional. Options a subclass does not know are kept
    in ``options``, as in Faust.
    """

    field: str
    model: type | None

    def __init__(
        self,
        *,
        default: Any = _MISSING,
        required: bool | None = None,
        **options: Any,
    ) -> None:
        for name, why in UNSUPPORTED_OPTIONS.items():
            if options.get(name) not in (None, False):
                raise TypeError(f"{type(self).__name__}({name}=...) is not supported by agentstream: {why}")
            options.pop(name, None)
        input_name, output_name, exclude, coerce, date_parser = (options.pop(n, None) for n in _WIRE_OPTIONS)
        self._input_name: str | None = input_name
        self._output_name: str | None = output_name
        self.exclude = bool(exclude)
        self.coerce: bool | None = coerce  # None: the Record class's ``coerce`` decides
        self.date_parser: Callable[[Any], datetime] | None = date_parser
        options.pop("type", None)  # Faust's internal arguments (field/type/model/parent) are derived here
        options.pop("parent", None)
        self.model = options.pop("model", None)
        self.field = options.pop("field", None) or ""
        if default is _MISSING and required is False:
            default = None
        template: Any  # field() is typed as returning the value it stands for
        if isinstance(default, (list, dict, set)):
            value = default
            template = dataclasses.field(default_factory=lambda: type(value)(value))
        else:
            template = dataclasses.field(default=default)
        for slot in dataclasses.Field.__slots__:  # a Field whose slots are those field() made
            setattr(self, slot, getattr(template, slot))
        self.required = default is _MISSING and template.default_factory is _MISSING
        self.options = options

    @property
    def input_name(self) -> str:
        """The key this field is read from (Faust's ``input_name``; the field's name by default)."""
        return self._input_name or self.field

    @property
    def output_name(self) -> str:
        """The key this field is written under (Faust's ``output_name``; ``input_name`` by default)."""
        return self._output_name or self.input_name

    def prepare_value(self, value: Any) -> Any:
        """Faust's coercion of ``value`` to this field's type (``coerce=True``); the base field keeps it.

        Raises TypeError or ValueError for a value that does not convert."""
        return value

    @property
    def default_value(self) -> Any:
        """The value an omitted field takes (``None`` for a required field, as Faust's ``default``)."""
        factory: Any = self.default_factory
        if factory is not _MISSING:
            return factory()
        return None if self.default is _MISSING else self.default

    def validate(self, value: Any) -> Iterator[ValidationError | str]:
        """The problems of ``value`` under this field's options (none by default): override it, yielding
        ``self.validation_error(reason)`` (or the reason text) per broken rule, as in Faust."""
        return iter(())

    def validation_error(self, reason: str) -> ValidationError:
        """The error naming this field and ``reason`` (Faust's ``FieldDescriptor.validation_error``)."""
        return ValidationError(self.model.__name__ if self.model is not None else "Record", self.field, reason)

    def getattr(self, obj: Any) -> Any:
        """The field's value on a record (``group_by(Model.field)``)."""
        return obj[self.field] if isinstance(obj, dict) else getattr(obj, self.field)

    def bound(self, name: str, model: type) -> Field[T]:
        """A copy that knows its name and Record class (each class gets its own, as in Faust)."""
        clone = type(self).__new__(type(self))
        for slot in dataclasses.Field.__slots__:
            setattr(clone, slot, getattr(self, slot))
        clone.__dict__.update(self.__dict__)
        clone.field, clone.model = name, model
        return clone

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        return self.getattr(obj)  # pragma: no cover - instances hold their values in __dict__

    def __repr__(self) -> str:
        owner = self.model.__name__ if self.model is not None else "?"
        default = "" if self.required else f" = {self.default_value!r}"
        return f"<{type(self).__name__}: {owner}.{self.field}{default}>"


class BooleanField(Field[bool]):
    """``True`` or ``False`` (Faust's ``BooleanField``)."""

    def prepare_value(self, value: Any) -> Any:
        return bool(value)


class NumberField(Field[T]):
    """A number with optional bounds: ``min_value`` <= value <= ``max_value`` (0 is a bound too)."""

    def __init__(self, *, max_value: Any = None, min_value: Any = None, **kwargs: Any) -> None:
        self.max_value = max_value
        self.min_value = min_value
        super().__init__(max_value=max_value, min_value=min_value, **kwargs)

    def validate(self, value: Any) -> Iterator[ValidationError | str]:
        if self.max_value is not None and value > self.max_value:
            yield f"cannot be more than {self.max_value}"
        if self.min_value is not None and value < self.min_value:
            yield f"must be at least {self.min_value}"


class IntegerField(NumberField[int]):
    """An ``int`` with optional bounds."""

    def prepare_value(self, value: Any) -> Any:
        return int(value)


class FloatField(NumberField[float]):
    """A ``float`` with optional bounds."""

    def prepare_value(self, value: Any) -> Any:
        return float(value)


class DecimalField(NumberField[Decimal]):
    """A finite ``Decimal`` with optional bounds, ``max_digits`` (digits before the point) and
    ``max_decimal_places`` (digits after it)."""

    def __init__(self, *, max_digits: int | None = None, max_decimal_places: int | None = None, **kwargs: Any) -> None:
        self.max_digits = max_digits
        self.max_decimal_places = max_decimal_places
        super().__init__(max_digits=max_digits, max_decimal_places=max_decimal_places, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        return Decimal(value)

    def validate(self, value: Any) -> Iterator[ValidationError | str]:
        if not isinstance(value, Decimal):
            return
        if not value.is_finite():
            yield f"illegal value in decimal: {value!r}"
            return  # Faust goes on and fails with a TypeError here
        yield from super().validate(value)
        sign, digits, exponent = value.as_tuple()
        assert isinstance(exponent, int)
        places = max(0, -exponent)
        if self.max_decimal_places is not None and places > self.max_decimal_places:
            yield f"must have at most {self.max_decimal_places} decimal places"
        whole = max(0, len(digits) + exponent)
        if self.max_digits is not None and whole > self.max_digits:
            yield f"must have at most {self.max_digits} digits before the decimal point"


class CharField(Field[T]):
    """Text (``str`` or ``bytes``): not blank unless ``allow_blank=True``, ``min_length``/``max_length``."""

    def __init__(
        self,
        *,
        max_length: int | None = None,
        min_length: int | None = None,
        trim_whitespace: bool = False,
        allow_blank: bool = False,
        **kwargs: Any,
    ) -> None:
        self.max_length = max_length
        self.min_length = min_length
        self.trim_whitespace = trim_whitespace
        self.allow_blank = allow_blank
        super().__init__(
            max_length=max_length,
            min_length=min_length,
            trim_whitespace=trim_whitespace,
            allow_blank=allow_blank,
            **kwargs,
        )

    def validate(self, value: Any) -> Iterator[ValidationError | str]:
        if not isinstance(value, (str, bytes)):
            return
        length = len(value.strip() if self.trim_whitespace else value)
        if not self.allow_blank and not length:
            yield "cannot be left blank"
        if self.min_length is not None and length < self.min_length:
            yield f"must have at least {self.min_length} {_chars(self.min_length)}"
        if self.max_length is not None and length > self.max_length:
            yield f"must have at most {self.max_length} {_chars(self.max_length)}"


_parse_datetime = converter(datetime)


def _chars(n: int) -> str:
    return "character" if n == 1 else "characters"


class StringField(CharField[str]):
    """A ``str`` field (see :class:`CharField`); coerced values are trimmed when ``trim_whitespace``."""

    def prepare_value(self, value: Any) -> Any:
        text = value if isinstance(value, str) else str(value)
        return text.strip() if self.trim_whitespace else text


class BytesField(CharField[bytes]):
    """A ``bytes`` field (see :class:`CharField`); ``encoding``/``errors`` are Faust's, kept in ``options``."""

    def __init__(self, *, encoding: str | None = None, errors: str | None = None, **kwargs: Any) -> None:
        self.encoding = encoding or "utf-8"
        self.errors = errors or "strict"
        super().__init__(encoding=self.encoding, errors=self.errors, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        raw = value if isinstance(value, bytes) else str(value).encode(self.encoding)
        return raw.strip() if self.trim_whitespace else raw


class DatetimeField(Field[datetime]):
    """A ``datetime`` field (decoded from ISO 8601 text or epoch seconds, or by its ``date_parser``)."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, datetime):
            return value
        return (self.date_parser or _parse_datetime)(value)


TYPE_TO_FIELD: dict[type, type[Field[Any]]] = {
    bool: BooleanField,
    int: IntegerField,
    float: FloatField,
    Decimal: DecimalField,
    str: StringField,
    bytes: BytesField,
    datetime: DatetimeField,
}


def field_for_type(typ: Any) -> tuple[type[Field[Any]], None]:
    """The field class Faust gives a plain annotation of ``typ`` (and Faust's tag, always None here)."""
    if isinstance(typ, type):
        for base, field_class in TYPE_TO_FIELD.items():
            if typ is base or issubclass(typ, base):
                return field_class, None
    return Field, None
