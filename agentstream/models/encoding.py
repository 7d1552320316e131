"""JSON encoding with orjson: records (tagged with Faust's ``__faust`` namespace unless their class
says ``include_metadata=False``), Decimals as text, sets as lists."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from decimal import Decimal
from typing import Any, ClassVar

import orjson

from ..exceptions import SerializationError
from .options import FAUST_KEY, RecordOptions

__all__ = ["JSONRecord", "json_default", "json_dumps", "set_serializer_codecs", "serializer_codec"]

_serializer_codecs: list[Callable[[type, str], Any]] = []


def set_serializer_codecs(lookup: Callable[[type, str], Any]) -> None:
    """Called once by :mod:`agentstream.codecs` (a layer above): ``lookup(model, name)`` gives the codec
    of a named serializer, for ``Record.dumps(serializer=...)`` / ``loads(..., serializer=...)``."""
    _serializer_codecs[:] = [lookup]


def serializer_codec(model: type, name: str) -> Any:
    """The codec (``dumps``/``loads``) of serializer ``name`` for ``model``."""
    if not _serializer_codecs:  # pragma: no cover - agentstream's package import registers it
        raise SerializationError(f"serializer {name!r} needs agentstream.codecs: import agentstream first")
    return _serializer_codecs[0](model, name)


class JSONRecord:
    """What the encoder knows of a record: a dataclass whose options say whether to tag it.
    :class:`~agentstream.models.Record` derives from it, so this module needs no Record import."""

    _options: ClassVar[RecordOptions] = RecordOptions()
    _wire_out: ClassVar[tuple[tuple[str, str], ...] | None] = None
    """(field, output key) pairs when a field is renamed or excluded (Faust's output_name/exclude)."""
    _dump_native: ClassVar[bool] = False
    """True when orjson may encode the record natively (no tag, no renamed field: see models.wire)."""
    _faust_tag: ClassVar[dict[str, str] | None] = None
    """``{"ns": namespace}`` when the class says ``include_metadata`` (read-only: shared by every record)."""


def _json_default(obj: Any) -> Any:
    """Types orjson does not serialise natively."""
    if isinstance(obj, Decimal):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _metadata_default(obj: Any) -> Any:
    """``include_metadata=True``: records become their fields plus Faust's ``__faust`` blob."""
    if isinstance(obj, JSONRecord):
        wire = obj._wire_out
        if wire is None:
            out = dict(obj.__dict__)
        else:
            values = obj.__dict__
            out = {key: values[name] for name, key in wire}
        tag = obj._faust_tag
        if tag is not None:
            out[FAUST_KEY] = tag
        return out
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return _json_default(obj)


def json_default(obj: Any) -> Any:
    """orjson ``default=`` (with ``OPT_PASSTHROUGH_DATACLASS``) that encodes as :func:`json_dumps`
    does: tagged Records, Decimals as text, sets as lists; raises TypeError for anything else."""
    return _metadata_default(obj)


_NATIVE = orjson.OPT_UTC_Z  # UTC datetimes end in "Z", as Faust's JSON codec writes them
_TAGGED = orjson.OPT_UTC_Z | orjson.OPT_PASSTHROUGH_DATACLASS


def json_dumps(obj: Any) -> bytes:
    """orjson with Record/Decimal/set support; raises :class:`SerializationError` on failure.

    Records (top level, nested, in lists and dicts) carry their ``__faust`` tag unless their
    class says ``include_metadata=False``, and their fields under their output names, excluded
    fields left out; a top-level record with no tag and no renamed field takes orjson's native
    dataclass path (no Python per field). UTC datetimes are written ``...Z`` (Faust's bytes).
    """
    if isinstance(obj, JSONRecord) and obj._dump_native:
        option, default = _NATIVE, _json_default
    else:
        option, default = _TAGGED, _metadata_default
    try:
        return orjson.dumps(obj, default=default, option=option)
    except orjson.JSONEncodeError:
        pass
    try:  # rare: dicts with int (etc.) keys; retried so the common case pays nothing
        return orjson.dumps(obj, default=default, option=option | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        raise SerializationError(
            f"cannot encode {type(obj).__name__} as JSON: {exc}. "
            "Fix: use JSON-able field types (str, int, float, bool, datetime, Decimal, Record, ...)"
        ) from exc
