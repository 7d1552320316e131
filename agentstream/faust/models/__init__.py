"""``faust.models``: Record (Faust's Model), its options, the namespace registry and the field classes."""

from __future__ import annotations

from typing import Any

from agentstream.models import FieldError, Record, RecordOptions, lookup_model, registry

from .fields import FieldDescriptor, StringField

Model = Record
ModelOptions = RecordOptions

__all__ = ["Model", "Record", "ModelOptions", "FieldDescriptor", "StringField", "FieldError", "maybe_model", "registry"]


def maybe_model(arg: Any) -> Any:
    """``arg`` as the Record its ``__faust: {"ns": ...}`` names, if that model is registered; else ``arg``."""
    model = lookup_model(arg)
    return model.from_data(arg) if model is not None else arg
