"""Five-field cron expressions for ``@app.crontab`` (Faust's, which uses croniter).

A small parser instead of a dependency: croniter is large for what a timer needs and its
maintenance has been uncertain; the whole job here is "parse ``m h dom mon dow`` and find the
next matching minute", which fits in one readable module.

Supported: ``*``, numbers, ranges ``a-b``, steps ``*/n`` and ``a-b/n`` and ``a/n``, lists
``a,b``, month and weekday names (``jan``, ``mon``), weekday 7 as Sunday, and the aliases
``@yearly @annually @monthly @weekly @daily @midnight @hourly``. As in Vixie cron, when both
day-of-month and day-of-week are restricted a day matches if *either* does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

__all__ = ["CronSchedule", "CronError", "parse", "next_fire"]

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
# (name, low, high, names)
FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),
)

TZ = str | tzinfo | None


class CronError(ValueError):
    """A cron expression that cannot be parsed; the message names the field and the fix."""


class CronSchedule:
    """A parsed expression: the allowed values of each field."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        text = ALIASES.get(expression.strip().lower(), expression)
        parts = text.split()
        if len(parts) != 5:
            raise CronError(
                f"cron expression {expression!r} has {len(parts)} fields; use 5: "
                "'minute hour day-of-month month day-of-week', e.g. '*/5 * * * *'"
            )
        sets = [_field(p, *spec) for p, spec in zip(parts, FIELDS)]
        self.minutes, self.hours, self.days, self.months, dows = sets
        self.weekdays = {d % 7 for d in dows}  # 7 is Sunday too
        self.dom_any = parts[2].startswith("*")
        self.dow_any = parts[4].startswith("*")

    def _day_matches(self, dt: datetime) -> bool:
        dom = dt.day in self.days
        dow = (dt.isoweekday() % 7) in self.weekdays
        if self.dom_any and self.dow_any:
            return True
        if self.dom_any:
            return dow
        if self.dow_any:
            return dom
        return dom or dow

    def next_after(self, after: datetime) -> datetime:
        """The first matching minute strictly after ``after`` (in ``after``'s timezone)."""
        dt = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
        for _ in range(100_000):  # ~5 years of day/hour jumps; an impossible date (Feb 30) ends here
            if dt.month not in self.months:
                year, month = (dt.year + 1, 1) if dt.month == 12 else (dt.year, dt.month + 1)
                dt = dt.replace(year=year, month=month, day=1, hour=0, minute=0)
                continue
            if not self._day_matches(dt):
                dt = (dt + timedelta(days=1)).replace(hour=0, minute=0)
                continue
            if dt.hour not in self.hours:
                dt = (dt + timedelta(hours=1)).replace(minute=0)
                continue
            if dt.minute not in self.minutes:
                dt += timedelta(minutes=1)
                continue
            return dt
        raise CronError(f"cron expression {self.expression!r} never fires (e.g. '0 0 30 2 *')")

    def __repr__(self) -> str:
        return f"<CronSchedule {self.expression!r}>"


def _value(text: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    key = text.lower()
    if key in names:
        return names[key]
    try:
        v = int(text)
    except ValueError:
        raise CronError(
            f"cron {name} field: {text!r} is not a number" + (f" or one of {', '.join(names)}" if names else "")
        ) from None
    if not low <= v <= high:
        raise CronError(f"cron {name} field: {v} is outside {low}..{high}")
    return v


def _field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        rng, _, step_text = item.partition("/")
        step = 1
        if step_text:
            step = _value(step_text, name, 1, high - low + 1, {})
        if rng == "*":
            start, end = low, high
        elif "-" in rng:
            a, _, b = rng.partition("-")
            start, end = _value(a, name, low, high, names), _value(b, name, low, high, names)
            if start > end:
                raise CronError(f"cron {name} field: range {rng!r} goes backwards")
        else:
            start = _value(rng, name, low, high, names)
            end = high if step_text else start
        out.update(range(start, end + 1, step))
    return out


def _tz(tz: TZ) -> tzinfo:
    if tz is None:
        return UTC
    if isinstance(tz, str):
        return UTC if tz.upper() == "UTC" else ZoneInfo(tz)
    return tz


def parse(expression: str) -> CronSchedule:
    return CronSchedule(expression)


def next_fire(schedule: CronSchedule | str, now: datetime | None = None, tz: TZ = None) -> datetime:
    """The next fire time after ``now`` (default: the current time), evaluated in ``tz`` (default UTC).

    pytz zones are accepted too: their ``localize``/``normalize`` are used when present.
    """
    sched = schedule if isinstance(schedule, CronSchedule) else CronSchedule(schedule)
    zone = _tz(tz)
    current = now or datetime.now(UTC)
    if current.tzinfo is None:
        current = current.replace(tzinfo=UTC)
    localize = getattr(zone, "localize", None)
    if localize is not None:  # pytz: do wall-clock arithmetic naively, then localize
        local = current.astimezone(zone).replace(tzinfo=None)
        return localize(sched.next_after(local))  # type: ignore[no-any-return]
    return sched.next_after(current.astimezone(zone))


def seconds_until(schedule: CronSchedule, tz: TZ = None, now: datetime | None = None) -> float:
    """Seconds from ``now`` to the next fire time (what the crontab loop sleeps)."""
    current = now or datetime.now(UTC)
    if current.tzinfo is None:
        current = current.replace(tzinfo=UTC)
    return max(0.0, (next_fire(schedule, current, tz) - current).total_seconds())
