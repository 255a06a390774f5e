"""Time zones, cron and interval arithmetic; every result is an aware UTC instant.

Cron follows Debian cron (3.0pl1, Vixie cron with Debian's DST handling). The expression is parsed
here (:func:`parse_cron`: Vixie syntax only, every field expanded to its set of values); croniter
is then only asked for *naive* wall-clock matches of that expanded form, written as plain lists of
numbers with the day-of-month/day-of-week combination decided here. Each wall time is then mapped
to its UTC instant(s), as the daemon's minute loop would run it:

* the wall time exists once: that instant;
* it falls in a spring-forward gap shorter than 3 hours: a fixed-time entry fires once at the
  transition instant (the first instant after the gap); a wildcard entry skips it, unless the gap
  is shorter than 5 minutes (the daemon then runs every entry for each skipped minute);
* it falls in a gap of 3 hours or more (a clock reset, such as a zone crossing the date line):
  nothing fires for it;
* it is ambiguous (fall-back overlap): a fixed-time entry fires at the first pass (fold=0) only,
  unless the clock went back more than 3 hours (a reset: both passes); a wildcard entry fires in
  both passes.

Several wall times that map to one instant are one fire. Instants are only ever compared in UTC:
aware datetimes in one zone ignore ``fold`` when compared.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC as _UTC
from datetime import datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo, available_timezones

from croniter import CroniterError, croniter

from schedule_sdk.domain.errors import (
    InvalidCron,
    InvalidDatetime,
    InvalidInterval,
    InvalidTimezone,
    NaiveDatetime,
    ScheduleValidationError,
)
from schedule_sdk.domain.text import shown

UTC: tzinfo = _UTC  # the same object as datetime.timezone.utc

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_HOUR = timedelta(hours=1)
#: Widest offset change looked for around an instant (a zone crossing the date line: 24 hours).
_SHIFT_WINDOW_HOURS = 26
#: Longest wall-clock gap searched between two matches. An expression that matches at all
#: matches again within 40 years (the rarest is a 29 February on a given weekday, ANDed:
#: ``0 0 29 2 */7``), so a longer search never gives up on an expression that still has
#: occurrences ahead: a fired job always finds its next one.
_SEARCH_YEARS = 50
#: Naive wall-clock matches examined per call before giving up (a few hours' worth is normal).
_MAX_CANDIDATES = 10_000
#: The most fire times one preview lists.
MAX_FIRE_TIMES = 1000
#: The longest cron expression accepted, in characters. A cron line that lists every value of
#: every field is under 400; a longer one is refused before it is parsed.
MAX_CRON_LENGTH = 1024
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
#: A clock change this large is a reset to Debian cron: no catch-up, no "already ran" memory.
#: (Its minute loop resets when the wall clock moved forward by more than 180 minutes in one
#: minute, i.e. a gap of 3 hours or more, or backward by 180 minutes or more in one minute,
#: i.e. an overlap of more than 3 hours.)
_CLOCK_RESET = timedelta(hours=3)
#: A gap shorter than this (the wall clock moved at most 5 minutes in one minute) is caught up
#: minute by minute, wildcard entries included.
_MINUTE_BY_MINUTE_CATCH_UP = timedelta(minutes=5)
#: Keys a TZ path may hold that are not IANA zones (``localtime`` depends on the host).
_NOT_IANA = frozenset({"localtime", "posixrules"})


# --- zones and datetimes ---------------------------------------------------------------------


def zone(name: str) -> ZoneInfo:
    """Return the IANA zone ``name`` (cached), or raise :class:`InvalidTimezone`.

    Names must be spelled exactly as in the tz database: ``'UTC'`` is valid, ``'utc'`` is not
    (on a case-insensitive file system ZoneInfo would accept it; we refuse it everywhere).
    """
    if not isinstance(name, str) or name not in _known_zone_names():
        raise InvalidTimezone(_not_a_zone(name))
    return _load_zone(name)


def _not_a_zone(name: object) -> str:
    """The refusal of ``name``, with the closest zone name when one is close ("did you mean")."""
    text = f"not a valid IANA timezone: {shown(name)}"
    if not isinstance(name, str) or not name or len(name) > 64:
        return text
    names = _known_zone_names()
    by_case = {known.casefold(): known for known in names}
    close = [name.casefold()] if name.casefold() in by_case else []
    close = close or difflib.get_close_matches(name.casefold(), list(by_case), n=1, cutoff=0.75)
    return f"{text} (did you mean {by_case[close[0]]!r}?)" if close else text


@lru_cache(maxsize=1)
def _known_zone_names() -> frozenset[str]:
    return frozenset(available_timezones()) - _NOT_IANA


@lru_cache(maxsize=1024)
def _load_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise InvalidTimezone(_not_a_zone(name)) from exc


def ensure_aware(value: datetime, field: str = "run_at") -> datetime:
    """Return ``value`` as an aware UTC datetime; raise :class:`NaiveDatetime` if it is naive
    or not a datetime at all, :class:`InvalidDatetime` if converting it to UTC overflows (year 1
    at +14:00, 9999-12-31 at -05:00)."""
    if not isinstance(value, datetime):
        raise NaiveDatetime(f"{field} must be a timezone-aware datetime, got a {type(value).__name__}")
    if value.utcoffset() is None:
        raise NaiveDatetime(
            f"{field} must be a timezone-aware datetime, got the naive {value.isoformat()}: give it a zone, "
            "e.g. datetime(..., tzinfo=ZoneInfo('Europe/Berlin')) or datetime.now(UTC)"
        )
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise InvalidDatetime(f"{field} is out of range when converted to UTC: {value.isoformat()}") from exc


def stored_instant(value: datetime, field: str) -> datetime:
    """Return the aware ``value`` in UTC if a job may store it (from :data:`MIN_INSTANT` to
    :data:`MAX_INSTANT`): :class:`NaiveDatetime` if naive, :class:`InvalidDatetime` if out of
    that range or overflowing when converted. What ``run_at`` and ``ends_at`` go through."""
    return bounded_utc(ensure_aware(value, field), field, InvalidDatetime)


def local_time(instant: datetime, tz: tzinfo) -> datetime:
    """``instant`` in ``tz``; :class:`InvalidDatetime` if that overflows (a year-9999 instant
    east of UTC)."""
    try:
        return instant.astimezone(tz)
    except (OverflowError, ValueError) as exc:
        raise InvalidDatetime(f"{instant.isoformat()} is out of range in {tz}") from exc


#: The earliest instant a stored timestamp may hold: the Unix epoch. Earlier years are not needed
#: (a due time in the past fires at once) and years below 1000 do not format as ISO 8601.
MIN_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
#: The latest: a day before ``datetime.max``, so that converting an offset to UTC, rounding up to
#: the millisecond or adding a short delay to a stored instant never overflows.
MAX_INSTANT = datetime(9999, 12, 31, tzinfo=UTC)
#: Wall times after this one are neither searched nor converted: with any zone's offset (a
#: date-line crossing included) they could name an instant past MAX_INSTANT.
_LAST_WALL = datetime(9999, 12, 29)


def bounded_utc(
    value: datetime, field: str, error: type[ScheduleValidationError] = ScheduleValidationError
) -> datetime:
    """Return the aware ``value`` in UTC if it lies from :data:`MIN_INSTANT` to
    :data:`MAX_INSTANT`; else raise ``error`` (a converting offset that overflows included: an
    ``OverflowError`` never escapes)."""
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise error(f"{field} is out of range when converted to UTC: {value.isoformat()}") from exc
    if not MIN_INSTANT <= utc <= MAX_INSTANT:
        raise error(
            f"{field} must lie from {MIN_INSTANT.isoformat()} to {MAX_INSTANT.isoformat()}, "
            f"not {utc.isoformat()}"
        )
    return utc


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    return instant.astimezone(tz).utcoffset() or timedelta(0)


def _utc(naive: datetime) -> datetime:
    return naive.replace(tzinfo=UTC, fold=0)


# --- cron expressions ------------------------------------------------------------------------

#: (name, lowest, highest, names) of the five fields, in order; names map to lowest + index.
_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    ("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
#: One list item: ``*``, a value or a range ``a-b``, optionally followed by ``/step``.
_ITEM = re.compile(r"(?:(\*)|(\w+)(?:-(\w+))?)(?:/(\w+))?", re.ASCII)


@dataclass(frozen=True, slots=True)
class CronFields:
    """A cron expression expanded as Debian cron reads it (see :func:`parse_cron`)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    #: 0-6, Sunday is 0 (``7`` in the expression is Sunday too).
    weekdays: frozenset[int]
    #: The minute or the hour field begins with ``*`` (Debian's MIN_STAR / HR_STAR).
    wildcard: bool
    #: Neither day field begins with ``*``: a day matches either field (else it must match both).
    day_or: bool


def parse_cron(expression: str) -> CronFields:
    """Parse a 5-field cron expression (or an ``@hourly``-style macro) with Debian cron's rules.

    Each field is a comma list of ``*``, ``N`` or ``A-B``, the last two optionally stepped
    (``*/15``, ``1-20/5``); month and day-of-week also take three-letter English names in any
    case (``jan``, ``MON-fri``); day-of-week 0 and 7 are Sunday. Refused with
    :class:`InvalidCron`: anything else, including ``L``, ``W``, ``#``, ``?``, croniter's ``R``
    and ``H``, a seconds or year field, a value out of range, a step of 0, a step after a single
    value (``5/15``: Debian ignores such a step, other crons mean ``5-59/15``), and a wrap-around
    range such as ``22-2`` or ``fri-mon`` (Debian silently selects nothing for it).
    """
    if not isinstance(expression, str):
        raise InvalidCron(f"cron expression must be a string, got {shown(expression)}")
    if len(expression) > MAX_CRON_LENGTH:
        raise InvalidCron(
            f"cron expression is {len(expression)} characters long; at most {MAX_CRON_LENGTH} are accepted"
        )
    return _parse_cron_text(expression)


@lru_cache(maxsize=1024)
def _parse_cron_text(expression: str) -> CronFields:
    text = expression.strip()
    if text.startswith("@"):
        text = _MACROS.get(text.lower(), "")
    fields = text.split()
    if len(fields) != 5:
        raise InvalidCron(f"not a standard 5-field cron expression: {shown(expression)}")
    minutes, hours, days, months, weekdays = (
        _parse_field(value, spec, expression) for value, spec in zip(fields, _FIELDS, strict=True)
    )
    if 7 in weekdays:
        weekdays = (weekdays - {7}) | {0}
    return CronFields(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=weekdays,
        wildcard=fields[0].startswith("*") or fields[1].startswith("*"),
        day_or=not (fields[2].startswith("*") or fields[4].startswith("*")),
    )


def _parse_field(text: str, spec: tuple[str, int, int, tuple[str, ...]], expression: str) -> frozenset[int]:
    """The values of one field. Linear in the field's length: the text of an error is only made
    when one is raised (formatting the expression for every item made parsing quadratic)."""
    name, low, high, names = spec
    values: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise InvalidCron(f"invalid {name} field {shown(text)} in cron expression {shown(expression)}")
        star, first, last, step = match.groups()
        where = _Where(name, expression)
        if star:
            start, stop = low, high
        else:
            start = _field_value(first, low, high, names, where)
            stop = start if last is None else _field_value(last, low, high, names, where)
            if step is not None and last is None:
                raise InvalidCron(f"a step needs a range or '*' ({shown(item)} {where})")
            if stop < start:
                raise InvalidCron(f"wrap-around range {shown(item)} {where}: write it as two ranges")
        increment = 1 if step is None else _step(step, where)
        values.update(range(start, stop + 1, increment))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class _Where:
    """Where in an expression an item is, formatted only for an error message."""

    field: str
    expression: str

    def __str__(self) -> str:
        return f"in the {self.field} field of cron expression {shown(self.expression)}"


def _field_value(token: str, low: int, high: int, names: tuple[str, ...], where: _Where) -> int:
    if token.lower() in names:
        return low + names.index(token.lower())
    # at most 3 digits: no value or step of any field is longer (and int() of thousands of
    # digits is slow, past 4300 refused with a ValueError)
    if not token.isdigit() or len(token) > 3 or not low <= int(token) <= high:
        raise InvalidCron(f"{shown(token)} is not a value from {low} to {high} {where}")
    return int(token)


def _step(token: str, where: _Where) -> int:
    if not token.isdigit() or len(token) > 3 or int(token) == 0:
        raise InvalidCron(f"step {shown(token)} is not a positive whole number of at most 3 digits {where}")
    return int(token)


def validate_cron(expression: str) -> None:
    """Raise :class:`InvalidCron` unless ``expression`` parses (:func:`parse_cron`) and has an
    occurrence (one within the next 50 years: an expression with none never matches)."""
    cron = parse_cron(expression)
    start = datetime.now(UTC).replace(tzinfo=None)
    try:
        _croniter(cron, start).get_next(datetime)
    except CroniterError as exc:
        raise InvalidCron(
            f"cron expression never matches (nothing within {_SEARCH_YEARS} years): {shown(expression)}"
        ) from exc


def is_wildcard_cron(expression: str) -> bool:
    """True when the minute or the hour field begins with ``*`` (after macro expansion)."""
    return parse_cron(expression).wildcard


def _croniter(cron: CronFields, start: datetime) -> croniter:
    """croniter over naive wall times, from ``start``, for the expanded ``cron`` (a copy of a
    cached one: croniter parses its expression on construction, which costs more than a search)."""
    matches = copy.copy(_croniter_prototype(cron))
    matches.set_current(start, force=True)
    return matches


@lru_cache(maxsize=1024)
def _croniter_prototype(cron: CronFields) -> croniter:
    text = _croniter_text(cron)
    return croniter(text, _EPOCH, day_or=cron.day_or, max_years_between_matches=_SEARCH_YEARS)


@lru_cache(maxsize=1024)
def _croniter_text(cron: CronFields) -> str:
    """``cron`` as croniter reads it right: every field a plain list of numbers (``*`` when it
    holds every value, never a range or a step), with the day fields combined here: when they
    are ORed and either holds every day, every day matches."""

    def field(values: frozenset[int], low: int, high: int) -> str:
        full = values >= set(range(low, high + 1))
        return "*" if full else ",".join(str(v) for v in sorted(values))

    days, weekdays = field(cron.days, 1, 31), field(cron.weekdays, 0, 6)
    if cron.day_or and "*" in (days, weekdays):
        days = weekdays = "*"
    hours, minutes, months = field(cron.hours, 0, 23), field(cron.minutes, 0, 59), field(cron.months, 1, 12)
    return f"{minutes} {hours} {days} {months} {weekdays}"


#: Why a fire is not simply "the wall time the expression names" (see :attr:`FireTime.mark`).
FireMark = Literal["moved", "merged", "repeated"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FireTime:
    """One upcoming fire of a schedule (see :func:`cron_fire_times`)."""

    #: The fire instant, aware UTC.
    at: datetime
    #: The same instant in the schedule's zone (``fold=1`` in the second pass of a repeated hour).
    local: datetime
    #: The naive wall times the cron expression named that fire at this instant: one normally,
    #: several when a gap merged them; empty for an interval.
    scheduled: tuple[datetime, ...] = ()
    #: The nominal occurrence (aware UTC) when the fire is delayed after it by a spread (or a
    #: jitter already drawn): ``at`` is then when it fires, and what the events report as
    #: ``scheduled_for`` is this instant. None: the fire is at its nominal instant.
    nominal: datetime | None = None
    #: The occurrence falls on a date the job's calendar excludes: it will not fire (it is
    #: reported in a ``schedule.missed`` event with the reason ``excluded``).
    excluded: bool = False

    @property
    def mark(self) -> FireMark | None:
        """``"merged"``: several scheduled wall times fire at this one instant (a spring-forward
        gap); ``"moved"``: the scheduled wall time did not exist, it fires at the transition;
        ``"repeated"``: the second pass of a wall time the clock went back over; else None
        (judged at the nominal instant when the fire is spread)."""
        local = self.local if self.nominal is None else local_time(self.nominal, self.local.tzinfo or _UTC)
        if len(self.scheduled) > 1:
            return "merged"
        if self.scheduled and self.scheduled[0] != local.replace(tzinfo=None, fold=0):
            return "moved"
        return "repeated" if local.fold else None

    def delayed(self, to: datetime, *, excluded: bool = False) -> FireTime:
        """This nominal fire, firing at ``to`` instead (a spread or jitter; ``to`` equal to
        :attr:`at` leaves no ``nominal``), marked ``excluded`` or not."""
        if to == self.at:
            return dataclasses.replace(self, excluded=excluded)
        local = local_time(to, self.local.tzinfo or _UTC)
        return dataclasses.replace(self, at=to, local=local, nominal=self.at, excluded=excluded)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: ``at`` (UTC) and ``local`` as ISO 8601, ``mark``, ``scheduled`` wall times,
        ``nominal`` (ISO 8601 or None) and ``excluded``."""
        return {
            "at": self.at.isoformat(),
            "local": self.local.isoformat(),
            "mark": self.mark,
            "scheduled": [wall.isoformat() for wall in self.scheduled],
            "nominal": None if self.nominal is None else self.nominal.isoformat(),
            "excluded": self.excluded,
        }


def next_cron_time(expression: str, tz: str | ZoneInfo, after: datetime) -> datetime:
    """Return the first occurrence of ``expression`` strictly after ``after``, as aware UTC.

    The cron is evaluated in the wall-clock time of ``tz`` with the DST rules described in the
    module docstring. Raises :class:`InvalidCron` if nothing is found within the search bound.
    """
    for instant, _ in _cron_fires(expression, tz, after):
        return instant
    raise InvalidCron(f"no occurrence within {_SEARCH_YEARS} years for cron expression {shown(expression)}")


def cron_fire_times(expression: str, tz: str | ZoneInfo, after: datetime, n: int) -> list[FireTime]:
    """The first ``n`` (1 to 1000) fires of ``expression`` in ``tz`` strictly after ``after``, in
    order (fewer if the search bound ends first); each is what :func:`next_cron_time` would give
    in turn."""
    check_count(n)
    tz_info = tz if isinstance(tz, ZoneInfo) else zone(tz)
    found: list[FireTime] = []
    for instant, walls in _cron_fires(expression, tz_info, after):
        if len(found) == n:
            break
        found.append(FireTime(at=instant, local=local_time(instant, tz_info), scheduled=walls))
    return found


#: The longest window :func:`count_cron_fires` counts by arithmetic.
_COUNT_SPAN = timedelta(days=31)


def count_cron_fires(expression: str, tz: str | ZoneInfo, after: datetime, until: datetime) -> int | None:
    """How many times ``expression`` fires in ``tz`` strictly after ``after`` and at most at
    ``until``, counted from its fields day by day (no fire enumerated), when the zone's offset
    is the same all through the window (checked hour by hour) and the window is at most 31 days;
    None otherwise (a DST change inside it: enumerate with :func:`cron_instants`)."""
    if until <= after:
        return 0
    if until - after > _COUNT_SPAN:
        return None
    cron = parse_cron(expression)
    tz_info = tz if isinstance(tz, ZoneInfo) else zone(tz)
    offset = _offset(tz_info, after)
    probe = after
    while probe < until:
        probe = min(probe + _HOUR, until)
        if _offset(tz_info, probe) != offset:
            return None
    low = (after + offset).replace(tzinfo=None)  # strictly after this wall time
    high = (until + offset).replace(tzinfo=None)  # at or before this one
    minutes = sorted(cron.minutes)
    per_day = len(cron.hours) * len(minutes)
    count = 0
    day = low.date()
    while day <= high.date():
        weekday = (day.weekday() + 1) % 7
        in_month = day.month in cron.months
        by_day, by_weekday = day.day in cron.days, weekday in cron.weekdays
        if in_month and ((by_day or by_weekday) if cron.day_or else (by_day and by_weekday)):
            if low.date() < day < high.date():
                count += per_day
            else:
                start = datetime.combine(day, datetime.min.time())
                for hour in cron.hours:
                    for minute in minutes:
                        wall = start.replace(hour=hour, minute=minute)
                        if low < wall <= high:
                            count += 1
        day += timedelta(days=1)
    return count


def cron_instants(
    expression: str, tz: str | ZoneInfo, after: datetime, until: datetime, cap: int
) -> list[datetime]:
    """The fire instants of ``expression`` in ``tz`` strictly after ``after`` and at most
    ``until``, in order, at most ``cap`` of them (what a count over a window enumerates, without
    building a :class:`FireTime` per fire)."""
    found: list[datetime] = []
    start = after
    while len(found) < cap:  # one search gives out at most _MAX_CANDIDATES: go on from its last
        before = len(found)
        for instant, _walls in _cron_fires(expression, tz, start):
            if instant > until or len(found) == cap:
                return found
            found.append(instant)
        if len(found) == before:
            return found
        start = found[-1]
    return found


def _cron_fires(
    expression: str, tz: str | ZoneInfo, after: datetime
) -> Iterator[tuple[datetime, tuple[datetime, ...]]]:
    """Fire instants strictly after ``after``, in increasing order, each with the wall times that
    fire at it. Wall times come in wall order but their instants need not (a fall-back repeats
    wall times), so an instant is given out only once no later wall time can map before it."""
    cron = parse_cron(expression)
    tz_info = tz if isinstance(tz, ZoneInfo) else zone(tz)
    after_utc = ensure_aware(after, "after")
    pending: dict[datetime, tuple[datetime, list[datetime]]] = {}  # instant -> (last wall, walls)
    for wall in _wall_candidates(cron, _first_wall(tz_info, after_utc)):
        if wall > _LAST_WALL:  # its instant would be past MAX_INSTANT (or overflow)
            break
        while pending:
            first = min(pending)
            if wall <= pending[first][0]:
                break
            yield first, tuple(pending.pop(first)[1])
        for instant in _instants(wall, tz_info, cron.wildcard):
            if instant > after_utc:
                pending.setdefault(instant, (_last_wall(tz_info, instant), []))[1].append(wall)
    for instant in sorted(pending):
        yield instant, tuple(pending[instant][1])


def _first_wall(tz: ZoneInfo, after: datetime) -> datetime:
    """Earliest naive wall time that can map to an instant after ``after``.

    Normally that is wall(after); when the clock is about to go back, the repeated wall times
    (earlier than wall(after)) still lie ahead in real time, so start that much earlier.
    """
    after = min(after, MAX_INSTANT)  # no wall time past MAX_INSTANT is looked at
    hour = (after - _EPOCH) // _HOUR
    low = min(_offset_at_hour(tz, hour + k) for k in range(_SHIFT_WINDOW_HOURS + 2))
    return (after + low).replace(tzinfo=None, second=0, microsecond=0)


def _last_wall(tz: ZoneInfo, instant: datetime) -> datetime:
    """Latest naive wall time that can still map to ``instant`` or earlier."""
    hour = (instant - _EPOCH) // _HOUR
    high = max(_offset_at_hour(tz, hour - k) for k in range(_SHIFT_WINDOW_HOURS + 1))
    return (instant + max(high, _offset(tz, instant))).replace(tzinfo=None)


@lru_cache(maxsize=65_536)
def _offset_at_hour(tz: ZoneInfo, hour: int) -> timedelta:
    """The offset at the start of whole UTC hour number ``hour`` since 1970."""
    return _offset(tz, _EPOCH + hour * _HOUR)


def _wall_candidates(cron: CronFields, start: datetime) -> Iterator[datetime]:
    """Naive wall-clock matches at or after ``start`` (a whole minute); the search is bounded by
    a number of matches and by croniter's gap between matches."""
    matches = _croniter(cron, start - _SECOND)
    for _ in range(_MAX_CANDIDATES):
        try:
            yield matches.get_next(datetime)
        except (CroniterError, OverflowError, ValueError):  # none left, or past year 9999
            return


def _instants(wall: datetime, tz: ZoneInfo, wildcard: bool) -> list[datetime]:
    """The UTC instants at which the naive wall time ``wall`` fires in ``tz`` (module docstring)."""
    first_offset = wall.replace(tzinfo=tz, fold=0).utcoffset() or timedelta(0)
    second_offset = wall.replace(tzinfo=tz, fold=1).utcoffset() or timedelta(0)
    first, second = _utc(wall - first_offset), _utc(wall - second_offset)
    if first_offset == second_offset:  # exists exactly once
        return [first]
    if first_offset > second_offset:  # the clock went back: first pass, then second pass
        both = wildcard or first_offset - second_offset > _CLOCK_RESET
        return [first, second] if both else [first]
    # the clock went forward over it: here ``second`` < transition <= ``first``
    gap = second_offset - first_offset
    if gap >= _CLOCK_RESET or (wildcard and gap >= _MINUTE_BY_MINUTE_CATCH_UP):
        return []
    return [_transition(tz, second, first)]


def wall_instant(wall: datetime, tz: str | ZoneInfo) -> datetime:
    """The UTC instant that the naive wall time ``wall`` names in ``tz``, by the rule a fixed-time
    cron entry follows: a repeated wall time is its first pass; one that the clock skipped
    (spring forward) is the transition instant, the first instant after the gap.

    :raises InvalidTimezone: unknown zone.
    """
    zone_info = tz if isinstance(tz, ZoneInfo) else zone(tz)
    naive = wall.replace(tzinfo=None, fold=0)
    if not MIN_INSTANT.replace(tzinfo=None) < naive < _LAST_WALL:
        raise InvalidDatetime(f"the wall time {naive.isoformat()} is out of range")
    instants = _instants(naive, zone_info, wildcard=False)
    if instants:
        return instants[0]
    first_offset = naive.replace(tzinfo=zone_info, fold=0).utcoffset() or timedelta(0)
    second_offset = naive.replace(tzinfo=zone_info, fold=1).utcoffset() or timedelta(0)
    return _transition(zone_info, _utc(naive - second_offset), _utc(naive - first_offset))


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


def check_count(n: object) -> int:
    """Return ``n`` if it is an int from 1 to :data:`MAX_FIRE_TIMES` (how many fires to list)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_FIRE_TIMES:
        raise ScheduleValidationError(f"n must be an int from 1 to {MAX_FIRE_TIMES}, got {shown(n)}")
    return n


# --- intervals -------------------------------------------------------------------------------


def validate_interval(every_ms: object) -> int:
    """Return ``every_ms`` if it is an int (not a bool) from 1 ms to 10 years (3653 days)."""
    if isinstance(every_ms, bool) or not isinstance(every_ms, int):
        raise InvalidInterval(f"every_ms must be a whole number of milliseconds, got {shown(every_ms)}")
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
    try:
        return anchor_utc + timedelta(microseconds=steps * step_us)
    except OverflowError as exc:
        raise InvalidDatetime(f"the next fire after {after.isoformat()} is past year 9999") from exc


def interval_fire_times(
    anchor: datetime, every_ms: int, after: datetime, n: int, tz: str | ZoneInfo = "UTC"
) -> list[FireTime]:
    """The first ``n`` (1 to 1000) fixed-rate fires ``anchor + k * every_ms`` strictly after
    ``after`` (see :func:`next_interval_time`), shown in ``tz``."""
    check_count(n)
    tz_info = tz if isinstance(tz, ZoneInfo) else zone(tz)
    at, step = next_interval_time(anchor, every_ms, after), timedelta(milliseconds=every_ms)
    fires = [FireTime(at=at, local=local_time(at, tz_info))]
    while len(fires) < n and at <= MAX_INSTANT - step:
        at += step
        fires.append(FireTime(at=at, local=local_time(at, tz_info)))
    return fires
