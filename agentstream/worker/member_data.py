"""The group protocol's user data, decoded with bounds: what members tell the leader when they join
(address, previous partition numbers, rack, state lags) and what the leader hands back (active,
standby and warm-up numbers, owners' addresses).

Anyone who can join the consumer group writes these bytes, so they are input: a malformed field
must never stop the leader's assignment (the next leader would meet the same data) nor a member's
``on_assignment``. Each decoder checks sizes, nesting, types and ranges, and raises
:class:`MemberDataError` naming the first problem; the assignor then treats the member as holding
nothing (no state-based preference) and logs it once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_USER_DATA_BYTES",
    "MemberDataError",
    "Subscription",
    "AssignmentData",
    "decode_subscription",
    "decode_assignment",
]

MAX_USER_DATA_BYTES = 1 << 20
"""Largest user data decoded (ours is a few KiB at 1,000 partitions)."""
MAX_PARTITION_NUMBER = 1 << 20
"""Partition numbers are below this (Kafka topics have far fewer partitions)."""
MAX_LAG = (1 << 63) - 1
MAX_DEPTH = 4
"""Deepest nesting of a well-formed document (an object of objects of lists, plus one)."""
MAX_TEXT = 1024
"""Longest host, rack or owner address."""


class MemberDataError(ValueError):
    """A group member's user data is not what an agentstream member sends."""


@dataclass(frozen=True)
class Subscription:
    """What one member reported when it joined."""

    host: str = ""
    prev: tuple[int, ...] = ()
    rack: str = ""
    lags: dict[int, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class AssignmentData:
    """What the leader handed this member."""

    active: tuple[int, ...] | None = None  # None: not given (the assigned partitions say it)
    standby: tuple[int, ...] = ()
    warmup: tuple[int, ...] = ()
    owners: dict[int, str] = field(default_factory=dict)


def _reject_constant(name: str) -> Any:
    raise MemberDataError(f"{name} is not a number")


def _depth_ok(raw: bytes) -> bool:
    """Whether brackets nest at most :data:`MAX_DEPTH` deep (checked before parsing: a deeply nested
    document would exhaust the parser's recursion). Brackets inside strings count too, which only
    errs on the strict side."""
    depth = 0
    for c in raw:
        if c in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif c in (0x5D, 0x7D):  # ] }
            depth -= 1
    return True


def _document(raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    if len(raw) > MAX_USER_DATA_BYTES:
        raise MemberDataError(f"{len(raw)} bytes, more than {MAX_USER_DATA_BYTES}")
    if not _depth_ok(raw):
        raise MemberDataError(f"nested more than {MAX_DEPTH} deep")
    try:
        doc = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise MemberDataError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise MemberDataError(f"a JSON {type(doc).__name__}, not an object")
    return doc


def _int(value: object, what: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise MemberDataError(f"{what}: {value!r:.80} is not an integer in 0..{high}")
    return value


def _numbers(doc: dict[str, Any], key: str) -> tuple[int, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise MemberDataError(f"{key!r}: {value!r:.80} is not a list")
    return tuple(sorted({_int(p, key, MAX_PARTITION_NUMBER - 1) for p in value}))


def _text(doc: dict[str, Any], key: str) -> str:
    value = doc.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise MemberDataError(f"{key!r}: {value!r:.80} is not a string of at most {MAX_TEXT} characters")
    return value


def _number_key(key: str, what: str) -> int:
    if not key.isdigit() or len(key) > 7:  # isdigit: no sign, no spaces, no "1_0"
        raise MemberDataError(f"{what}: key {key!r:.80} is not a partition number")
    return _int(int(key), what, MAX_PARTITION_NUMBER - 1)


def _mapping(doc: dict[str, Any], key: str, value_of: Callable[[object], Any]) -> dict[int, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MemberDataError(f"{key!r}: {value!r:.80} is not an object")
    return {_number_key(k, key): value_of(v) for k, v in value.items()}


def _lag(value: object) -> int | None:
    return None if value is None else _int(value, "lags", MAX_LAG)


def _owner(value: object) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise MemberDataError(f"owners: {value!r:.80} is not a string of at most {MAX_TEXT} characters")
    return value


def decode_subscription(raw: bytes) -> Subscription:
    """A member's join data (``{"host", "prev", "rack", "lags"}``; unknown keys are ignored)."""
    doc = _document(raw)
    return Subscription(
        host=_text(doc, "host"), prev=_numbers(doc, "prev"), rack=_text(doc, "rack"), lags=_mapping(doc, "lags", _lag)
    )


def decode_assignment(raw: bytes) -> AssignmentData:
    """The leader's data for this member (``{"active", "standby", "warmup", "owners"}``)."""
    doc = _document(raw)
    return AssignmentData(
        active=_numbers(doc, "active") if "active" in doc else None,
        standby=_numbers(doc, "standby"),
        warmup=_numbers(doc, "warmup"),
        owners=_mapping(doc, "owners", _owner),
    )
