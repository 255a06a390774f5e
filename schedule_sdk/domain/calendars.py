"""Calendars: the dates on which a repeating job does not fire, as a storable value.

A :class:`Calendar` excludes dates three ways, any of them together: a set of dates, a weekly
rule (weekdays, 0 Monday to 6 Sunday) and the public holidays of a country (and subdivision) as
the ``holidays`` package knows them (:class:`HolidaySpec`; the package is imported only when a
holiday is looked up: install ``schedule-sdk[holidays]`` in every process that schedules or fires
such a job). A calendar is a value, not a Python object with behaviour of its own, so it is stored
as JSON in the job's row and means the same in every process; a ``holidays`` object is turned into
its spec by :meth:`Calendar.from_holidays`.

A date is judged in the job's zone (the cron's own zone, else the job's): an occurrence is
excluded when its local date is. The rules of what an excluded occurrence does live in
:mod:`schedule_sdk.domain.misfire` (it is claimed, not fired, and reported missed with the reason
``excluded``).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Self

from schedule_sdk.domain.errors import InvalidCalendar
from schedule_sdk.domain.text import shown

#: Most dates one calendar lists (a calendar is stored in the job's row).
MAX_CALENDAR_DATES = 5_000
#: Years a calendar may be searched ahead for an occurrence it does not exclude: a schedule with
#: none in this many years is refused when it is scheduled.
SEARCH_YEARS = 5
_WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@dataclass(frozen=True, kw_only=True, slots=True)
class HolidaySpec:
    """The public holidays of ``country`` (an ISO 3166 code the ``holidays`` package supports,
    e.g. ``"DE"``) and optionally one ``subdivision`` of it (e.g. ``"BY"``)."""

    country: str
    subdivision: str | None = None

    def __post_init__(self) -> None:
        for name in ("country", "subdivision"):
            value = getattr(self, name)
            if value is None and name == "subdivision":
                continue
            if not isinstance(value, str) or not value.isascii() or not value.isalnum() or len(value) > 10:
                raise InvalidCalendar(f"holiday {name} must be a short code such as 'DE', not {shown(value)}")

    def check(self) -> None:
        """:class:`InvalidCalendar` unless the ``holidays`` package is installed and knows this
        country and subdivision."""
        _holiday_dates(self.country, self.subdivision, date.today().year)

    def excludes(self, day: date) -> bool:
        return day in _holiday_dates(self.country, self.subdivision, day.year)

    def to_dict(self) -> dict[str, Any]:
        return {"country": self.country, "subdivision": self.subdivision}


@functools.lru_cache(maxsize=256)
def _holiday_dates(country: str, subdivision: str | None, year: int) -> frozenset[date]:
    """The holidays of one year, from the ``holidays`` package (imported here, on first use)."""
    try:
        import holidays
    except ImportError as exc:
        raise InvalidCalendar(
            "a holiday calendar needs the 'holidays' package: pip install 'schedule-sdk[holidays]'"
        ) from exc
    try:
        found = holidays.country_holidays(country, subdiv=subdivision, years=year)
    except NotImplementedError as exc:  # the package's error for an unknown country or subdivision
        raise InvalidCalendar(
            f"the holidays package knows no calendar {shown(country)}/{shown(subdivision)}"
        ) from exc
    return frozenset(found.keys())


def _weekday(value: object) -> int:
    if isinstance(value, str) and value.lower()[:3] in _WEEKDAY_NAMES:
        return _WEEKDAY_NAMES.index(value.lower()[:3])
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 6:
        return value
    raise InvalidCalendar(
        f"a weekday is 0 (Monday) to 6 (Sunday) or a name such as 'sat', not {shown(value)}"
    )


def _date(value: object) -> date:
    if isinstance(value, datetime) or not isinstance(value, date):
        raise InvalidCalendar(f"an excluded date must be a datetime.date, not {type(value).__name__}")
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Calendar:
    """Dates on which a repeating job does not fire, judged in the job's zone.

    ``Calendar(dates=[date(2027, 12, 24)], weekdays=["sat", "sun"],
    holidays=HolidaySpec(country="DE", subdivision="BY"))`` excludes Christmas Eve 2027, every
    weekend and the public holidays of Bavaria. Weekdays are given as 0 (Monday) to 6 (Sunday) or
    as names (``"mon"``..``"sun"``) and kept as numbers.
    """

    #: Excluded dates (kept as a frozenset).
    dates: Collection[date] = frozenset()
    #: Excluded weekdays, 0 (Monday) to 6 (Sunday) or names (kept as a frozenset of numbers).
    weekdays: Collection[int | str] = frozenset()
    holidays: HolidaySpec | None = None

    def __post_init__(self) -> None:
        dates: Iterable[object] = self.dates
        weekdays: Iterable[object] = self.weekdays
        if isinstance(dates, str | bytes) or not isinstance(dates, Iterable):
            raise InvalidCalendar("dates must be a collection of datetime.date")
        if isinstance(weekdays, str | bytes) or not isinstance(weekdays, Iterable):
            raise InvalidCalendar("weekdays must be a collection of weekdays")
        object.__setattr__(self, "dates", frozenset(_date(d) for d in dates))
        object.__setattr__(self, "weekdays", frozenset(_weekday(w) for w in weekdays))
        if len(self.dates) > MAX_CALENDAR_DATES:
            raise InvalidCalendar(f"a calendar lists at most {MAX_CALENDAR_DATES} dates")
        if len(self.weekdays) == 7:
            raise InvalidCalendar("a calendar that excludes every weekday excludes every date")
        if self.holidays is not None and not isinstance(self.holidays, HolidaySpec):
            raise InvalidCalendar("holidays must be a HolidaySpec (see Calendar.from_holidays)")
        if not (self.dates or self.weekdays or self.holidays):
            raise InvalidCalendar("a calendar must exclude something: dates, weekdays or holidays")

    @classmethod
    def from_holidays(
        cls, calendar: object, *, dates: Iterable[date] = (), weekdays: Iterable[int | str] = ()
    ) -> Self:
        """A calendar excluding the holidays of a ``holidays`` package calendar (e.g.
        ``holidays.country_holidays("DE", subdiv="BY")``): its country and subdivision are kept,
        and the holidays are looked up again for each year (the object itself is not stored)."""
        country = getattr(calendar, "country", None)
        if not isinstance(country, str):
            raise InvalidCalendar("from_holidays takes a calendar of the holidays package (with a country)")
        subdivision = getattr(calendar, "subdiv", None)
        return cls(
            dates=frozenset(dates),
            weekdays=frozenset(weekdays),
            holidays=HolidaySpec(country=country, subdivision=subdivision),
        )

    def check(self) -> None:
        """The checks made when a job is scheduled with this calendar: a holiday spec's country
        must be known to the installed ``holidays`` package (:class:`InvalidCalendar`)."""
        if self.holidays is not None:
            self.holidays.check()

    def excludes(self, day: date) -> bool:
        """Whether no occurrence fires on the local date ``day``.

        :raises InvalidCalendar: a holiday calendar cannot be read (the ``holidays`` package is
            not installed in this process).
        """
        return (
            day.weekday() in self.weekdays
            or day in self.dates
            or (self.holidays is not None and self.holidays.excludes(day))
        )

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON form (dates as ISO 8601, sorted)."""
        return {
            "dates": sorted(d.isoformat() for d in self.dates),
            "weekdays": sorted(_weekday(w) for w in self.weekdays),
            "holidays": None if self.holidays is None else self.holidays.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The calendar of :meth:`to_dict`'s form; :class:`InvalidCalendar` for anything else."""
        try:
            spec = data.get("holidays")
            return cls(
                dates=frozenset(date.fromisoformat(d) for d in data.get("dates", ())),
                weekdays=frozenset(data.get("weekdays", ())),
                holidays=None if spec is None else HolidaySpec(**spec),
            )
        except (TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, InvalidCalendar):
                raise
            raise InvalidCalendar(f"not a calendar: {exc}"[:300]) from exc
