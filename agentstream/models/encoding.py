"""JSON encoding with orjson: records (tagged with Faust's ``__faust`` namespace unless their class
says ``include_metadata=False``), Decimals as text, sets as lists."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, ClassVar

import orjson

from ..exceptions import SerializationError
from .options import FAUST_KEY, RecordOptions

__all__ = ["JSONRecord", "json_default", "json_dumps"]


class JSONRecord:
    """What the encoder knows of a record: a dataclass whose options say whether to tag it.
    :class:`~agentstream.models.Record` derives from it, so this module needs no Record import."""

    _options: ClassVar[RecordOptions] = RecordOptions()


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
    if isinstance(obj, JSONRecord) and not obj._options.include_metadata:
        option = 0
    else:
        option = orjson.OPT_PASSTHROUGH_DATACLASS
    try:
        return orjson.dumps(obj, default=_metadata_default if option else _json_default, option=option)
    except orjson.JSONEncodeError:
        pass
    try:  # rare: dicts with int (etc.) keys; retried so the common case pays nothing
        return orjson.dumps(
            obj, default=_metadata_default if option else _json_default, option=option | orjson.OPT_NON_STR_KEYS
        )
    except orjson.JSONEncodeError as exc:
        raise SerializationError(
            f"cannot encode {type(obj).__name__} as JSON: {exc}. "
            "Fix: use JSON-able field types (str, int, float, bool, datetime, Decimal, Record, ...)"
        ) from exc
