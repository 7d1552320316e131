"""A Record class's keyword options, and the names Faust's metadata uses."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RecordOptions", "FAUST_KEY", "FAUST_ONLY_OPTIONS"]

FAUST_KEY = "__faust"
"""Faust's metadata key: ``{"__faust": {"ns": "module.Class"}}`` names the payload's model."""
FAUST_ONLY_OPTIONS = frozenset(
    {
        "coerce",
        "coercions",
        "decimals",
        "polymorphic_fields",
        "date_parser",
        "allow_blessed_key",
        "blessed_key",
        "lazy_creation",
    }
)


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
