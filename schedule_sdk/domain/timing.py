"""Time zones, cron and interval arithmetic; every result is an aware UTC instant.

Cron is evaluated in the job's wall-clock time with the Debian/Vixie rules of
docs/explanation/time-and-dst.md. croniter is only asked for *naive* wall-clock matches (on
naive datetimes it ignores DST); this module maps each wall time to its UTC instant(s):

* the wall time exists once: that instant;
* it falls in a spring-forward gap: a fixed-time entry fires once at the transition instant
  (the first instant after the gap); a wildcard entry skips it;
* it is ambiguous (fall-back overlap): a fixed-time entry fires at the first pass (fold=0)
  only; a wildcard entry fires in both passes.

Instants are only ever compared in UTC: aware datetimes in one zone ignore ``fold`` when compared.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC as _UTC
from datetime import datetime, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

from croniter import CroniterError, croniter

from schedule_sdk.domain.errors import InvalidCron, InvalidInterval, InvalidTimezone, NaiveDatetime

UTC: tzinfo = _UTC  # the same object as datetime.timezone.utc

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_HOUR = timedelta(hours=1)
#: Widest offset change looked for around an instant (real DST shifts are at most 2 hours).
_SHIFT_WINDOW_HOURS = 6
_SEARCH_YEARS = 5
#: Naive wall-clock matches examined per call before giving up (a few hours' worth is normal).
_MAX_CANDIDATES = 10_000
_MAX_INTERVAL_MS = 3653 * 86_400_000  # 10 years, leap days included
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
#: croniter's random ``R`` and hashed ``H`` fields are not deterministic cron: refuse them.
_RANDOM_OR_HASHED = re.compile(r"(?<![a-z])[hr](?![a-z])")
#: Keys a TZ path may hold that are not IANA zones (``localtime`` depends on the host).
_NOT_IANA = frozenset({"localtime", "posixrules"})


# --- zones and datetimes ---------------------------------------------------------------------


def zone(name: str) -> ZoneInfo:
    """Return the IANA zone ``name`` (cached), or raise :class:`InvalidTimezone`.

    Names must be spelled exactly as in the tz database: ``'UTC'`` is valid, ``'utc'`` is not
    (on a case-insensitive file system ZoneInfo would accept it; we refuse it everywhere).
    """
    if not isinstance(name, str) or name not in _known_zone_names():
        raise InvalidTimezone(f"not a valid IANA timezone: {name!r}")
    return _load_zone(name)


@lru_cache(maxsize=1)
def _known_zone_names() -> frozenset[str]:
    return frozenset(available_timezones()) - _NOT_IANA


@lru_cache(maxsize=1024)
def _load_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise InvalidTimezone(f"not a valid IANA timezone: {name!r}") from exc


def ensure_aware(value: datetime, field: str = "run_at") -> datetime:
    """Return ``value`` as an aware UTC datetime; raise :class:`NaiveDatetime` if it is naive
    or not a datetime at all."""
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise NaiveDatetime(f"{field} must be a timezone-aware datetime, got {value!r}")
    return value.astimezone(UTC)


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    return instant.astimezone(tz).utcoffset() or timedelta(0)


def _utc(naive: datetime) -> datetime:
    return naive.replace(tzinfo=UTC, fold=0)


# --- cron expressions ------------------------------------------------------------------------


def validate_cron(expression: str) -> None:
    """Raise :class:`InvalidCron` unless ``expression`` is a 5-field cron expression (or an
    ``@hourly``-style macro) with at least one occurrence in the next five years."""
    normalized, _ = _parse_cron(expression)
    start = datetime.now(UTC).replace(tzinfo=None)
    try:
        croniter(normalized, start, max_years_between_matches=_SEARCH_YEARS).get_next(datetime)
    except CroniterError as exc:
        raise InvalidCron(
            f"cron expression never matches within {_SEARCH_YEARS} years: {expression!r}"
        ) from exc


def is_wildcard_cron(expression: str) -> bool:
    """True when the minute or the hour field begins with ``*`` (after macro expansion)."""
    return _parse_cron(expression)[1]


def _parse_cron(expression: object) -> tuple[str, bool]:
    """Return ``(normalized 5-field expression, is wildcard)`` or raise :class:`InvalidCron`."""
    if not isinstance(expression, str):
        raise InvalidCron(f"cron expression must be a string, got {expression!r}")
    return _parse_cron_text(expression)


@lru_cache(maxsize=1024)
def _parse_cron_text(expression: str) -> tuple[str, bool]:
    text = expression.strip()
    if text.startswith("@"):
        text = _MACROS.get(text.lower(), "")
    fields = text.split()
    if len(fields) != 5 or _RANDOM_OR_HASHED.search(text.lower()):
        raise InvalidCron(f"not a standard 5-field cron expression: {expression!r}")
    normalized = " ".join(fields)
    try:
        croniter(normalized, datetime(2000, 1, 1))
    except (CroniterError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise InvalidCron(f"invalid cron expression: {expression!r} ({exc})") from exc
    # croniter reads '?' as '*'; treat it the same way here.
    return normalized, fields[0][0] in "*?" or fields[1][0] in "*?"


def next_cron_time(expression: str, tz: str | ZoneInfo, after: datetime) -> datetime:
    """Return the first occurrence of ``expression`` strictly after ``after``, as aware UTC.

    The cron is evaluated in the wall-clock time of ``tz`` with the DST rules described in the
    module docstring. Raises :class:`InvalidCron` if nothing is found within the search bound.
    """
    normalized, wildcard = _parse_cron(expression)
    tz_info = tz if isinstance(tz, ZoneInfo) else zone(tz)
    after_utc = ensure_aware(after, "after")
    best: datetime | None = None
    stop: datetime | None = None
    for wall in _wall_candidates(normalized, _first_wall(tz_info, after_utc)):
        if best is not None and stop is not None and wall > stop:
            return best
        for instant in _instants(wall, tz_info, wildcard):
            if instant > after_utc and (best is None or instant < best):
                best = instant
        if best is not None and stop is None:
            stop = _last_wall(tz_info, best)
    if best is None:
        raise InvalidCron(f"no occurrence within {_SEARCH_YEARS} years for cron expression {expression!r}")
    return best


def _first_wall(tz: ZoneInfo, after: datetime) -> datetime:
    """Earliest naive wall time that can map to an instant after ``after``.

    Normally that is wall(after); when the clock is about to fall back, the repeated wall times
    (earlier than wall(after)) still lie ahead in real time, so start that much earlier.
    """
    low = min(_offset(tz, after + k * _HOUR) for k in range(_SHIFT_WINDOW_HOURS + 1))
    return (after + low).replace(tzinfo=None, second=0, microsecond=0)


def _last_wall(tz: ZoneInfo, best: datetime) -> datetime:
    """Latest naive wall time whose instants can still be earlier than ``best``."""
    high = max(_offset(tz, best - k * _HOUR) for k in range(_SHIFT_WINDOW_HOURS + 1))
    return (best + high).replace(tzinfo=None)


def _wall_candidates(expression: str, start: datetime) -> Iterator[datetime]:
    """Naive wall-clock matches at or after ``start`` (a whole minute); the search is bounded by
    a number of matches and by croniter's gap between matches."""
    matches = croniter(expression, start - _SECOND, max_years_between_matches=_SEARCH_YEARS)
    for _ in range(_MAX_CANDIDATES):
        try:
            yield matches.get_next(datetime)
        except CroniterError:
            return


def _instants(wall: datetime, tz: ZoneInfo, wildcard: bool) -> list[datetime]:
    """The UTC instants at which the naive wall time ``wall`` fires in ``tz``."""
    first_offset = wall.replace(tzinfo=tz, fold=0).utcoffset() or timedelta(0)
    second_offset = wall.replace(tzinfo=tz, fold=1).utcoffset() or timedelta(0)
    first, second = _utc(wall - first_offset), _utc(wall - second_offset)
    if first_offset == second_offset:  # exists exactly once
        return [first]
    if first_offset > second_offset:  # fall-back overlap: first pass, then second pass
        return [first, second] if wildcard else [first]
    # spring-forward gap: here ``second`` < transition <= ``first``
    return [] if wildcard else [_transition(tz, second, first)]


def _transition(tz: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The instant where the offset changes, in (before, after]; transitions fall on whole
    seconds, so binary-search whole seconds."""
    target = _offset(tz, after)
    low = (before - _EPOCH) // _SECOND  # offset here differs from target
    high = -((_EPOCH - after) // _SECOND)  # ceil: offset here is target
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(tz, _EPOCH + middle * _SECOND) == target:
            high = middle
        else:
            low = middle
    return _EPOCH + high * _SECOND


# --- intervals -------------------------------------------------------------------------------


def validate_interval(every_ms: object) -> int:
    """Return ``every_ms`` if it is an int (not a bool) from 1 ms to 10 years (3653 days)."""
    if isinstance(every_ms, bool) or not isinstance(every_ms, int):
        raise InvalidInterval(f"every_ms must be a whole number of milliseconds, got {every_ms!r}")
    if not 1 <= every_ms <= _MAX_INTERVAL_MS:
        raise InvalidInterval(f"every_ms must be between 1 and {_MAX_INTERVAL_MS}, got {every_ms}")
    return every_ms


def next_interval_time(anchor: datetime, every_ms: int, after: datetime) -> datetime:
    """Fixed rate: the first ``anchor + k * every_ms`` (integer k >= 0) strictly after ``after``,
    as aware UTC, computed in whole microseconds (no float drift)."""
    step_us = validate_interval(every_ms) * 1000
    anchor_utc = ensure_aware(anchor, "anchor")
    elapsed_us = (ensure_aware(after, "after") - anchor_utc) // timedelta(microseconds=1)
    steps = max(0, elapsed_us // step_us + 1)
    return anchor_utc + timedelta(microseconds=steps * step_us)
