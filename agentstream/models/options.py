"""A Record class's keyword options, and the names Faust's metadata uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["RecordOptions", "FAUST_KEY", "FAUST_ONLY_OPTIONS", "REFUSED_CLASS_OPTIONS"]

FAUST_KEY = "__faust"
"""Faust's metadata key: ``{"__faust": {"ns": "module.Class"}}`` names the payload's model."""
FAUST_ONLY_OPTIONS = frozenset({"lazy_creation"})
"""Faust class options with nothing left to do here: ``lazy_creation`` defers Faust's class set-up
until ``make_final()``; a Record resolves forward references on first use anyway (``make_final``
exists and does nothing)."""
REFUSED_CLASS_OPTIONS = {
    "blessed_key": "Faust has no such class option (the metadata key is always '__faust')",
}
"""Class options refused when the class is defined (TypeError naming the option and why)."""


@dataclass(frozen=True)
class RecordOptions:
    """Class keyword options of a Record (``class X(Record, validation=True)``), Faust's names.

    ``serializer`` picks the codec, ``validation`` checks constructor types and field options,
    ``include_metadata`` (on by default, as in Faust) adds Faust's ``{"__faust": {"ns": namespace}}``
    blob when encoding, so untyped readers rebuild the record; decoding always accepts it and uses it
    to pick a registered subclass of the expected type (``polymorphic_fields`` / ``allow_blessed_key``
    are therefore always in effect for subclasses). ``isodates`` / ``decimals`` (on unless a class says
    ``False``, where Faust leaves the decoded text as it is) parse datetime / Decimal fields;
    ``coerce`` converts every field's value as Faust's field classes do (``int(v)``, ``str(v)``...),
    in the constructor and when decoding; ``coercions`` maps a type to the function that builds it;
    ``date_parser`` parses datetime fields.
    """

    serializer: str | None = None
    include_metadata: bool = True
    isodates: bool = True
    validation: bool = False
    namespace: str = ""
    decimals: bool = True
    coerce: bool = False
    coercions: Mapping[Any, Callable[[Any], Any]] = field(default_factory=dict)
    date_parser: Callable[[Any], datetime] | None = None
    polymorphic_fields: bool = False
    allow_blessed_key: bool = False
    explicit: frozenset[str] = frozenset()  # the options a class (or a parent) named: isodates=True asks to parse
