"""``faust.models.fields``: Faust's field classes, agentstream's (:mod:`agentstream.models.fields`).

``name: str = StringField(max_length=20)`` declares a field with options; ``record.validate()`` /
``is_valid()`` check them, and a Record with ``validation=True`` checks them when built or decoded.
A custom field subclasses :class:`FieldDescriptor` and overrides ``validate(value)``, yielding
``self.validation_error(reason)`` per problem, as in Faust. One difference: a ``default`` makes the
field optional here (Faust also wants ``required=False``, and otherwise ignores the default).
"""

from __future__ import annotations

from agentstream.models.fields import (
    TYPE_TO_FIELD,
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

FieldDescriptor = Field

__all__ = [
    "TYPE_TO_FIELD",
    "FieldDescriptor",
    "BooleanField",
    "NumberField",
    "FloatField",
    "IntegerField",
    "DatetimeField",
    "DecimalField",
    "BytesField",
    "StringField",
    "CharField",
    "field_for_type",
]
