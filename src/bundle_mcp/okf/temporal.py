"""The two temporal profiles (docs/DESIGN.md §1): dates, instants, ``as_of`` and staleness.

The profile is chosen per request and never guessed from values. Instants compare exactly, offset
and fraction included: they are turned into integer nanoseconds since the epoch.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from ..errors import ERROR, Diagnostic, invalid_request

DATE_PROFILE = "date-3fcbb9f"
INSTANT_PROFILE = "instant-0b87c52"
PROFILES = (DATE_PROFILE, INSTANT_PROFILE)

_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_INSTANT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def parse_date(value: object) -> dt.date | None:
    """A strict ``YYYY-MM-DD`` calendar date, or ``None``."""
    if not isinstance(value, str):
        return None
    m = _DATE.fullmatch(value)
    if m is None:
        return None
    try:
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def parse_instant(value: object) -> int | None:
    """An RFC 3339 date-time with ``Z`` or ``±HH:MM`` (not ``-00:00``) as epoch nanoseconds."""
    if not isinstance(value, str):
        return None
    m = _INSTANT.fullmatch(value)
    if m is None:
        return None
    if m[9] == "-" and m[10] == "00" and m[11] == "00":
        return None
    try:
        hours, minutes = (int(m[10]), int(m[11])) if m[9] else (0, 0)
        if hours > 23 or minutes > 59:
            return None
        offset = dt.timedelta(hours=hours, minutes=minutes) * (-1 if m[9] == "-" else 1)
        moment = dt.datetime(
            int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]),
            tzinfo=dt.timezone(offset),
        )
    except ValueError:  # leap seconds and impossible dates land here
        return None
    seconds = (moment - _EPOCH) // dt.timedelta(seconds=1)
    fraction = int((m[7] or "").ljust(9, "0"))
    return seconds * 1_000_000_000 + fraction


def parse_value(value: object, profile: str) -> dt.date | int | None:
    """A temporal field's comparable value under ``profile``; ``None`` when unusable there."""
    return parse_date(value) if profile == DATE_PROFILE else parse_instant(value)


def parse_either(value: object) -> dt.date | int | None:
    """A calendar date or an RFC 3339 instant, whichever the value is; ``None`` for neither."""
    date = parse_date(value)
    return date if date is not None else parse_instant(value)


DAY_NS = 86_400 * 1_000_000_000


def day_span(day: dt.date) -> tuple[int, int]:
    """A date as the instants it covers: ``[start, end)`` of its UTC day, epoch nanoseconds."""
    start = (dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC) - _EPOCH) \
        // dt.timedelta(seconds=1) * 1_000_000_000
    return start, start + DAY_NS


def reached(moment: dt.date | int, limit: dt.date | int) -> bool | None:
    """Whether ``moment >= limit``, for two dates, two instants, or one of each.

    Two values of one kind compare exactly. A date against an instant is read conservatively:
    a date is its whole UTC day, so the answer is ``True`` or ``False`` only when it holds for
    every instant of that day, and ``None`` (cannot be decided at a date's precision) when the
    instant falls inside the day.
    """
    if isinstance(moment, dt.date) and isinstance(limit, dt.date):
        return moment >= limit
    if isinstance(moment, int) and isinstance(limit, int):
        return moment >= limit
    if isinstance(moment, dt.date):
        assert isinstance(limit, int)
        start, end = day_span(moment)
        return True if start >= limit else False if end <= limit else None
    assert isinstance(moment, int) and isinstance(limit, dt.date)
    start, end = day_span(limit)
    return True if moment >= end else False if moment < start else None


def days_until(moment: dt.date | int, limit: dt.date | int) -> int:
    """Whole days from ``moment`` to ``limit`` (negative once past), rounded down; a date
    counts from the start of its UTC day."""
    if isinstance(moment, dt.date) and isinstance(limit, dt.date):
        return (limit - moment).days
    start = day_span(moment)[0] if isinstance(moment, dt.date) else moment
    end = day_span(limit)[0] if isinstance(limit, dt.date) else limit
    return (end - start) // DAY_NS


@dataclass(frozen=True, slots=True)
class Reference:
    """The request's ``temporal_profile`` and ``as_of`` (raw for the echo, parsed to compare)."""

    profile: str
    as_of: str | None
    moment: dt.date | int | None

    def stale(self, stale_after: str | None) -> bool | None:
        """``as_of >= stale_after``; ``None`` without ``as_of`` or a usable ``stale_after``."""
        if self.moment is None or stale_after is None:
            return None
        limit = parse_value(stale_after, self.profile)
        if limit is None:
            return None
        return self.moment >= limit  # type: ignore[operator]


def reference_from(params: dict[str, Any]) -> Reference:
    """Read ``temporal_profile`` and ``as_of`` from validated arguments.

    The schema already checked the shape; the calendar (``2026-02-31``) is checked here.
    """
    profile = params.get("temporal_profile") or DATE_PROFILE
    raw = params.get("as_of")
    if raw is None:
        return Reference(profile, None, None)
    moment = parse_value(raw, profile)
    if moment is None:
        expected = "YYYY-MM-DD" if profile == DATE_PROFILE else "an RFC 3339 date-time with offset"
        raise invalid_request(
            f"as_of must be {expected} under {profile}",
            Diagnostic(code="invalid_input", severity=ERROR, field="$.as_of",
                       message=f"as_of is not a valid value for {profile}"),
        )
    return Reference(profile, raw, moment)
