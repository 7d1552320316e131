"""Pure window arithmetic with Kafka Streams semantics, plus the windowed-store key encoding.

Times are float epoch seconds at the API but computed in whole integer MILLISECONDS (Kafka's
timestamp resolution): ``0.3 / 0.1`` is 2.999... in floats, which would put records at a window
edge into the wrong window. Windows are ``[start, end)``, aligned to epoch 0, and (as in Kafka
Streams) never start before 0, so a negative timestamp has no window.

Lifecycle of a window, given the task's stream time (the largest timestamp seen):

* *closed* once ``stream_time >= end + grace``: records for it are late and dropped;
* *expired* once ``end + max(expires, grace) <= stream_time``: delete it from the store. The
  ``max`` keeps a window from being deleted while it could still accept a late record and be
  silently re-created from zero.
"""

from __future__ import annotations

import json
import struct

import orjson
from mypy_extensions import mypyc_attr

__all__ = [
    "HoppingWindow",
    "SlidingWindow",
    "TumblingWindow",
    "Window",
    "faust_window_key",
    "parse_faust_window_key",
    "parse_window_key",
    "window_key",
    "window_key_range",
]

WindowRange = tuple[float, float]


def _ms(seconds: float) -> int:
    # round, not floor: 1.001 * 1000 == 1000.9999999999999
    return round(seconds * 1000)


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class HoppingWindow:
    """Windows of ``size`` seconds starting every ``step`` seconds (``0 < step <= size``)."""

    def __init__(self, size: float, step: float, expires: float | None = None) -> None:
        size_ms, step_ms = _ms(size), _ms(step)
        if size_ms <= 0:
            raise ValueError(f"window size must be at least 1 ms, got {size!r}")
        if not 0 < step_ms <= size_ms:
            raise ValueError(f"window step must be in (0, size={size!r}], got {step!r}")
        expires_ms = size_ms if expires is None else _ms(expires)
        if expires_ms < 0:
            raise ValueError(f"window expires must be >= 0, got {expires!r}")
        self.size, self.step = size_ms / 1000, step_ms / 1000
        self.expires = expires_ms / 1000
        # Given: windows also close by the wall clock (Faust's table cleanup), not only by stream time.
        self.expires_given = expires is not None
        self._size, self._step, self._expires = size_ms, step_ms, expires_ms

    def _first_last(self, ts_ms: int) -> tuple[int, int]:
        """Earliest and latest window start containing ``ts_ms`` (first > last: none)."""
        step = self._step
        last = ts_ms - ts_ms % step
        # smallest multiple of step strictly greater than ts - size
        first = max(0, ((ts_ms - self._size) // step + 1) * step)
        return first, last

    def ranges(self, timestamp: float) -> list[WindowRange]:
        """Every window containing ``timestamp``, earliest start first."""
        first, last = self._first_last(_ms(timestamp))
        size = self._size
        return [(s / 1000, (s + size) / 1000) for s in range(first, last + 1, self._step)]

    def current(self, timestamp: float) -> WindowRange:
        """The latest-starting window containing ``timestamp`` (the one a "now" query means)."""
        first, last = self._first_last(_ms(timestamp))
        if first > last:
            raise ValueError(f"no window contains negative timestamp {timestamp!r}")
        return last / 1000, (last + self._size) / 1000

    def earliest(self, timestamp: float) -> WindowRange:
        """The earliest-starting window containing ``timestamp`` (the first to close)."""
        first, last = self._first_last(_ms(timestamp))
        if first > last:
            raise ValueError(f"no window contains negative timestamp {timestamp!r}")
        return first / 1000, (first + self._size) / 1000

    def delta(self, timestamp: float, d: float) -> WindowRange:
        """The current window of ``timestamp - d`` ("this window, one hour ago")."""
        return self.current(timestamp - d)

    @staticmethod
    def closed(window_end: float, stream_time: float, grace: float = 0.0) -> bool:
        """True once the window accepts no more records."""
        return _ms(stream_time) >= _ms(window_end) + _ms(grace)

    def stale(self, timestamp: float, stream_time: float, grace: float = 0.0) -> bool:
        """True when every window of ``timestamp`` is closed: drop the record as late."""
        ts_ms = _ms(timestamp)
        first, last = self._first_last(ts_ms)
        if first > last:
            return True
        # the latest-starting window is the last to close
        return _ms(stream_time) >= last + self._size + _ms(grace)

    def expired(self, window_end: float, stream_time: float, grace: float = 0.0) -> bool:
        """True once the window can be deleted from the store (tombstone to the changelog)."""
        return _ms(window_end) + max(self._expires, _ms(grace)) <= _ms(stream_time)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, step={self.step}, expires={self.expires})"


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class TumblingWindow(HoppingWindow):
    """Non-overlapping windows: each timestamp is in exactly one."""

    def __init__(self, size: float, expires: float | None = None) -> None:
        super().__init__(size, size, expires)

    def __repr__(self) -> str:
        return f"TumblingWindow(size={self.size}, expires={self.expires})"


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class SlidingWindow(HoppingWindow):
    """Faust's ``SlidingWindow(before, after, expires)``: each record has its own window
    ``[t - before, t + after)`` around its time ``t`` (a window per record, not per step).

    Closed once stream time passes ``t + after + grace``; expired (and deleted) ``expires``
    seconds after its end, as every window kind."""

    def __init__(self, before: float, after: float, expires: float) -> None:
        before_ms, after_ms, expires_ms = _ms(before), _ms(after), _ms(expires)
        if before_ms < 0 or after_ms < 0 or before_ms + after_ms <= 0:
            raise ValueError(
                f"sliding window needs before, after >= 0 and before + after >= 1 ms, "
                f"got before={before!r}, after={after!r}"
            )
        if expires_ms < 0:
            raise ValueError(f"window expires must be >= 0, got {expires!r}")
        self.before, self.after = before_ms / 1000, after_ms / 1000
        self._before, self._after = before_ms, after_ms
        size_ms = before_ms + after_ms
        self.size = self.step = size_ms / 1000
        self.expires = expires_ms / 1000
        self._size, self._step, self._expires = size_ms, size_ms, expires_ms

    def _first_last(self, ts_ms: int) -> tuple[int, int]:
        start = ts_ms - self._before
        return start, start

    def ranges(self, timestamp: float) -> list[WindowRange]:
        return [self.current(timestamp)]

    def current(self, timestamp: float) -> WindowRange:
        ts_ms = _ms(timestamp)
        return (ts_ms - self._before) / 1000, (ts_ms + self._after) / 1000

    def earliest(self, timestamp: float) -> WindowRange:
        return self.current(timestamp)

    def stale(self, timestamp: float, stream_time: float, grace: float = 0.0) -> bool:
        return _ms(stream_time) >= _ms(timestamp) + self._after + _ms(grace)

    def __repr__(self) -> str:
        return f"SlidingWindow(before={self.before}, after={self.after}, expires={self.expires})"


Window = HoppingWindow
"""The type to annotate with: every window kind is a HoppingWindow."""


# -- windowed-store keys -------------------------------------------------------------------------
#
# Layout: 4-byte big-endian len(key) | key | 8-byte big-endian (start_ms + 2**63).
# The length prefix first makes all windows of one key a contiguous run in RocksDB's byte order,
# sorted by start, whatever bytes the key holds (with a plain key+start layout, key b"a" and key
# b"a\x00..." would interleave). The 2**63 offset keeps order for negative starts too.

_LEN = struct.Struct(">I")
_START = struct.Struct(">Q")
_BIAS = 1 << 63


def window_key(key: bytes, start: float) -> bytes:
    """Store key for window ``start`` of ``key``."""
    return _LEN.pack(len(key)) + key + _START.pack(_ms(start) + _BIAS)


def parse_window_key(raw: bytes) -> tuple[bytes, float]:
    """Inverse of :func:`window_key`; ValueError for bytes it did not produce."""
    if len(raw) < 12:
        raise ValueError(f"not a window key (too short): {raw!r}")
    (n,) = _LEN.unpack_from(raw, 0)
    if len(raw) != 4 + n + 8:
        raise ValueError(f"not a window key (length {n} does not match): {raw!r}")
    (start,) = _START.unpack_from(raw, 4 + n)
    return raw[4 : 4 + n], (start - _BIAS) / 1000


def window_key_range(key: bytes, start_from: float | None = None, start_to: float | None = None) -> tuple[bytes, bytes]:
    """``(lo, hi)`` for ``store.items(lo, hi)``: windows of ``key`` with start in [from, to)."""
    prefix = _LEN.pack(len(key)) + key
    lo = prefix if start_from is None else prefix + _START.pack(_ms(start_from) + _BIAS)
    # every window key of this key is prefix + exactly 8 bytes, so 9 x 0xff is past them all
    hi = prefix + b"\xff" * 9 if start_to is None else prefix + _START.pack(_ms(start_to) + _BIAS)
    return lo, hi


# -- Faust's windowed-table keys (topic_naming='faust') -----------------------------------------
#
# Faust stores the tuple (key, (start, end)) through the table's key serializer (JSON), with
# end = start + size - 0.1, e.g. b'["hello",[1700000000.0,1700000059.9]]'. A store lookup needs
# byte-identical keys, so the floats are written exactly as Faust computes and dumps them.


def faust_window_key(key_json: bytes, start: float, size: float) -> bytes:
    """Faust's changelog key of window ``start`` of the key whose JSON is ``key_json``."""
    start_f = float(_ms(start) / 1000)
    return b"[" + key_json + b"," + json.dumps([start_f, start_f + size - 0.1], separators=(",", ":")).encode() + b"]"


def parse_faust_window_key(raw: bytes) -> tuple[bytes, float]:
    """``(key JSON, window start)`` of a Faust windowed key; ValueError for other bytes."""
    try:
        decoded = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not a Faust window key (not JSON): {raw[:60]!r}") from exc
    if (
        not isinstance(decoded, list)
        or len(decoded) != 2
        or not isinstance(decoded[1], list)
        or len(decoded[1]) != 2
        or not all(isinstance(x, (int, float)) for x in decoded[1])
    ):
        raise ValueError(f"not a Faust window key ([key, [start, end]]): {raw[:60]!r}")
    return json.dumps(decoded[0], separators=(",", ":")).encode(), float(decoded[1][0])
