"""An independent model of Debian cron (3.0pl1): its crontab field parser and its minute loop.

Written from the daemon's rules, not from schedule_sdk and not with croniter, so that it can judge
``schedule_sdk.domain.timing``. The daemon wakes once a minute and reads the wall clock as a count
of local minutes (real minute + the zone's UTC offset, which zoneinfo gives here). Against its
*virtual* minute (the last wall minute it handled) it classifies the change:

* +1: the ordinary minute; every entry matching the new wall minute runs;
* +2 to +5 (it woke late): every entry runs for each wall minute it missed, one by one;
* +6 to +180 (the clock went forward, e.g. DST): wildcard entries run for the current wall minute
  only; fixed-time entries run for every wall minute it skipped, the current one included;
* -179 to 0 (the clock went back): wildcard entries run for the current wall minute; fixed-time
  entries do not, and the virtual minute stays until the wall clock passes it again;
* anything else is a clock reset: the virtual minute jumps to the wall minute, and every entry
  matching it runs (no catch-up, no memory of what already ran).

An entry is *wildcard* when its minute or hour field begins with ``*``. A day matches when the
day-of-month and the day-of-week fields both match if either field begins with ``*``, and when
either matches otherwise. All runs that happen in one real minute are one fire, at that minute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")
EPOCH_DAY = date(1970, 1, 1)


class Refused(ValueError):
    """Debian cron would refuse the entry."""


def _number(token: str, low: int, names: tuple[str, ...]) -> int:
    """get_number(): a name (first match, case-insensitive) counts from ``low``; else digits."""
    for index, name in enumerate(names):
        if token.lower() == name:
            return low + index
    if token.isdigit():
        return int(token)
    raise Refused(token)


def _field(text: str, low: int, high: int, names: tuple[str, ...] = ()) -> set[int]:
    """get_list() over get_range(): ``*`` or ``a`` or ``a-b``, then an optional ``/step``.

    As in Debian, a step after a single value is ignored together with the rest of the field,
    and a range whose start is past its end selects nothing.
    """
    bits: set[int] = set()
    for item in text.split(","):
        found = re.match(r"(\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(/([0-9]+))?", item)
        if found is None:
            raise Refused(item)
        head, step_text = found.group(1), found.group(3)
        if head == "*":
            first, last = low, high
        elif "-" in head:
            a, b = head.split("-")
            first, last = _number(a, low, names), _number(b, low, names)
        else:
            value = _number(head, low, names)
            if not low <= value <= high:
                raise Refused(item)
            bits.add(value)
            if item != head:  # "5/15": the parser stops at '/' and skips the rest of the field
                return bits
            continue
        step = 1 if step_text is None else int(step_text)
        if step == 0:
            raise Refused(item)
        for value in range(first, last + 1, step):
            if not low <= value <= high:
                raise Refused(item)
            bits.add(value)
        if found.end() < len(item):  # anything else after the item: the rest of the field is skipped
            return bits
    return bits


@dataclass(frozen=True)
class Entry:
    """One crontab line's schedule, as load_entry() builds it."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0-7, both 0 and 7 set for Sunday
    min_star: bool
    hour_star: bool
    dom_star: bool
    dow_star: bool

    @classmethod
    def parse(cls, line: str) -> Entry:
        fields = line.split()
        if len(fields) != 5:
            raise Refused(line)
        weekdays = _field(fields[4], 0, 7, WEEKDAYS)
        if 0 in weekdays or 7 in weekdays:
            weekdays |= {0, 7}
        return cls(
            minutes=frozenset(_field(fields[0], 0, 59)),
            hours=frozenset(_field(fields[1], 0, 23)),
            days=frozenset(_field(fields[2], 1, 31)),
            months=frozenset(_field(fields[3], 1, 12, MONTHS)),
            weekdays=frozenset(weekdays),
            min_star=fields[0].startswith("*"),
            hour_star=fields[1].startswith("*"),
            dom_star=fields[2].startswith("*"),
            dow_star=fields[4].startswith("*"),
        )

    @property
    def wildcard(self) -> bool:
        return self.min_star or self.hour_star

    def matches(self, wall_minute: int) -> bool:
        """find_jobs(): does the entry match this wall-clock minute (minutes since 1970 in local time)?"""
        day_number, minute_of_day = divmod(wall_minute, 1440)
        hour, minute = divmod(minute_of_day, 60)
        if minute not in self.minutes or hour not in self.hours:
            return False
        month, day, weekday = _calendar(day_number)
        if month not in self.months:
            return False
        in_days, in_weekdays = day in self.days, weekday in self.weekdays
        if self.dom_star or self.dow_star:
            return in_days and in_weekdays
        return in_days or in_weekdays


@lru_cache(maxsize=100_000)
def _calendar(day_number: int) -> tuple[int, int, int]:
    day = EPOCH_DAY + timedelta(days=day_number)
    return day.month, day.day, (day_number + 4) % 7  # 1970-01-01 was a Thursday (4)


def wall_minute(tz: ZoneInfo, real_minute: int) -> int:
    """The daemon's clock: the local wall time of a real minute, in minutes since 1970."""
    hour = real_minute // 60
    offset = _offset_minutes(tz, hour * 60)
    if offset != _offset_minutes(tz, hour * 60 + 60):  # a change within this hour: look closer
        offset = _offset_minutes(tz, real_minute)
    return real_minute + offset


@lru_cache(maxsize=1_000_000)
def _offset_minutes(tz: ZoneInfo, real_minute: int) -> int:
    offset = datetime.fromtimestamp(real_minute * 60, tz).utcoffset()
    assert offset is not None and offset % timedelta(minutes=1) == timedelta(0)
    return offset // timedelta(minutes=1)


def daemon_fires(
    entry: Entry, tz: ZoneInfo, boot: int, after: datetime, count: int, stop: int
) -> list[datetime]:
    """The first ``count`` real minutes after ``after`` (and up to real minute ``stop``) in
    which the daemon, started at real minute ``boot``, runs ``entry``; as aware UTC datetimes."""
    virtual = wall_minute(tz, boot)
    fires: list[datetime] = []
    for real in range(boot + 1, stop + 1):
        running = wall_minute(tz, real)
        change = running - virtual
        if change == 1:
            virtual = running
            runs = entry.matches(running)
        elif 1 < change <= 5:
            runs = any(entry.matches(v) for v in range(virtual + 1, running + 1))
            virtual = running
        elif 5 < change <= 180:
            if entry.wildcard:
                runs = entry.matches(running)
            else:
                runs = any(entry.matches(v) for v in range(virtual + 1, running + 1))
            virtual = running
        elif -180 < change <= 0:
            runs = entry.wildcard and entry.matches(running)
        else:
            virtual = running
            runs = entry.matches(running)
        moment = datetime.fromtimestamp(real * 60, UTC)
        if runs and moment > after:
            fires.append(moment)
            if len(fires) == count:
                break
    return fires
