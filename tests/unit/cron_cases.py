"""Random (expression, zone, start) cases near real UTC-offset changes, judged by the Debian cron
model in :mod:`tests.unit.cron_model` (the quick slice runs in test_cron_model.py; the full run is
``python scripts/cron_model_check.py``).

Each case starts within two days of a transition (half of them within three hours) and compares
the first fires after the start over the following three days: the library's (``next_cron_time``
step by step, and ``cron_fire_times``) with those of a model daemon booted four hours before the
start (longer than any repeated stretch it must remember). Expressions favour the hard parts:
hours and minutes around the transition, single-value ranges, steps on ranges, lists, names,
day-of-week 7, and day-of-month/day-of-week pairs with and without a leading ``*``.
"""

from __future__ import annotations

import io
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from schedule_sdk.domain.errors import InvalidCron
from schedule_sdk.domain.timing import cron_fire_times, next_cron_time
from tests.unit.cron_model import MONTHS, WEEKDAYS, Entry, daemon_fires

#: Both hemispheres, half-hour and 45-minute zones, negative DST, midnight transitions,
#: 30-minute DST (Lord Howe), 2-hour DST (Troll), date-line jumps (Apia 2011, Kiritimati 1994,
#: Kwajalein 1993) and 3-hour changes (Casey).
ZONES = (
    "America/New_York",
    "America/Los_Angeles",
    "Europe/Berlin",
    "Europe/London",
    "Europe/Dublin",
    "Europe/Moscow",
    "America/Sao_Paulo",
    "America/Santiago",
    "America/Asuncion",
    "America/Havana",
    "America/St_Johns",
    "America/Nuuk",
    "America/Caracas",
    "Pacific/Auckland",
    "Pacific/Chatham",
    "Pacific/Apia",
    "Pacific/Kiritimati",
    "Pacific/Kwajalein",
    "Pacific/Norfolk",
    "Australia/Lord_Howe",
    "Australia/Adelaide",
    "Australia/Sydney",
    "Antarctica/Casey",
    "Antarctica/Troll",
    "Antarctica/Macquarie",
    "Asia/Tehran",
    "Asia/Kathmandu",
    "Asia/Pyongyang",
    "Asia/Gaza",
    "Africa/Casablanca",
    "Africa/Cairo",
    "Test/Thresholds",
)
FIRST_YEAR, LAST_YEAR = 1985, 2035
#: Offsets (minutes) of the synthetic zone "Test/Thresholds", one day apart from 2030-01-01
#: at varied times of day: forward and back by 4 and 5 minutes (the daemon's catch-up-everything
#: limit), by 179 and 180 minutes forward and 180 and 181 minutes back (its clock-reset limit).
SYNTHETIC_OFFSETS = (0, 4, 0, 5, 0, 179, 0, 180, 0, 181, 0, -180, 0, 60, 0)
#: Fires compared per case, and how far after the start they are looked for.
FIRES = 4
HORIZON = timedelta(days=3)
BOOT_BEFORE = timedelta(hours=4)


@dataclass(frozen=True)
class Transition:
    instant: datetime  # aware UTC, a whole minute
    before: datetime  # the wall time just before (naive)
    after: datetime  # the wall time at the instant (naive)


@cache
def zone(name: str) -> ZoneInfo:
    """An IANA zone, or the synthetic "Test/Thresholds"."""
    if name != "Test/Thresholds":
        return ZoneInfo(name)
    start = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp())
    times = [
        start + day * 86_400 + (day * 3_637) % 86_400 // 60 * 60 for day in range(1, len(SYNTHETIC_OFFSETS))
    ]
    return ZoneInfo.from_file(io.BytesIO(tzif(times, [m * 60 for m in SYNTHETIC_OFFSETS])), key=name)


def tzif(times: list[int], offsets: list[int]) -> bytes:
    """A version 1 TZif file: ``offsets[0]`` (seconds east of UTC) until ``times[0]``, then
    ``offsets[i + 1]`` from ``times[i]`` (Unix seconds)."""
    header = b"TZif" + b"\0" * 16 + struct.pack(">6l", 0, 0, 0, len(times), len(offsets), 4)
    body = struct.pack(f">{len(times)}l", *times) + bytes(range(1, len(offsets)))
    types = b"".join(struct.pack(">lBB", offset, 0, 0) for offset in offsets)
    return header + body + types + b"TST\0"


@cache
def transitions(name: str) -> tuple[Transition, ...]:
    """The zone's offset changes from FIRST_YEAR to LAST_YEAR (whole minutes only), found by
    comparing offsets day by day and bisecting to the minute."""
    tz = zone(name)

    def offset(minute: int) -> timedelta:
        value = datetime.fromtimestamp(minute * 60, tz).utcoffset()
        assert value is not None
        return value

    start = int(datetime(FIRST_YEAR, 1, 1, tzinfo=UTC).timestamp()) // 60
    stop = int(datetime(LAST_YEAR + 1, 1, 1, tzinfo=UTC).timestamp()) // 60
    found: list[Transition] = []
    for day in range(start, stop, 1440):
        low, high = day, day + 1440
        if offset(low) == offset(high):
            continue
        while high - low > 1:  # offset(low) != offset(high); find the first minute of the new one
            middle = (low + high) // 2
            low, high = (middle, high) if offset(middle) == offset(low) else (low, middle)
        old, new = offset(low), offset(high)
        if old % timedelta(minutes=1) or new % timedelta(minutes=1):
            continue
        instant = datetime.fromtimestamp(high * 60, UTC)
        found.append(
            Transition(
                instant,
                (instant + old - timedelta(minutes=1)).replace(tzinfo=None),
                (instant + new).replace(tzinfo=None),
            )
        )
    return tuple(found)


# --- expressions ---------------------------------------------------------------------------------


def _pick_range(rng: random.Random, low: int, high: int, near: list[int], name: Callable[[int], str]) -> str:
    """One list item: a value, a single-value range, a range, each possibly stepped, or a star."""
    value = rng.choice(near) if near and rng.random() < 0.7 else rng.randint(low, high)
    kind = rng.random()
    if kind < 0.3:
        return name(value)
    if kind < 0.45:
        return f"{name(value)}-{name(value)}" + (f"/{rng.randint(1, 5)}" if rng.random() < 0.4 else "")
    if kind < 0.8:
        first = max(low, value - rng.randint(0, 3))
        last = min(high, value + rng.randint(0, 4))
        step = f"/{rng.randint(1, 4)}" if rng.random() < 0.4 else ""
        return f"{name(first)}-{name(last)}{step}"
    return "*" if rng.random() < 0.5 else f"*/{rng.randint(1, max(2, (high - low) // 2))}"


def _field(
    rng: random.Random, low: int, high: int, near: list[int], star: float, name: Callable[[int], str] = str
) -> str:
    if rng.random() < star:
        return "*" if rng.random() < 0.7 else f"*/{rng.randint(1, max(2, (high - low + 1) // 2))}"
    items = [
        _pick_range(rng, low, high, near, name) for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 3))
    ]
    return ",".join(items)


def random_expression(rng: random.Random, near: Transition) -> str:
    """A 5-field expression biased to match around ``near``'s wall times."""
    walls = (near.before, near.after, near.after - timedelta(hours=1), near.before + timedelta(minutes=1))
    minutes = sorted({w.minute for w in walls} | {0, 30})
    hours = sorted({w.hour for w in walls})
    days = sorted({w.day for w in walls})
    weekdays = sorted({w.isoweekday() % 7 for w in walls} | {7 for w in walls if w.isoweekday() == 7})
    month = near.before.month

    def month_name(value: int) -> str:
        return MONTHS[value - 1].capitalize() if rng.random() < 0.3 else str(value)

    def weekday_name(value: int) -> str:  # 7 (Sunday again) has no name of its own
        return WEEKDAYS[value].upper() if value < 7 and rng.random() < 0.3 else str(value)

    return " ".join(
        (
            _field(rng, 0, 59, minutes, 0.25),
            _field(rng, 0, 23, hours, 0.2),
            _field(rng, 1, 31, days, 0.6),
            _field(rng, 1, 12, [month], 0.75, month_name),
            _field(rng, 0, 7, weekdays, 0.6, weekday_name),
        )
    )


def random_case(rng: random.Random, zones: tuple[str, ...] = ZONES) -> tuple[str, str, datetime]:
    name = rng.choice(zones)
    near = rng.choice(transitions(name))
    spread = timedelta(hours=3) if rng.random() < 0.5 else timedelta(days=2)
    reach = spread // timedelta(minutes=1)
    start = near.instant + timedelta(minutes=rng.randint(-reach, reach))
    if rng.random() < 0.2:
        start += timedelta(seconds=rng.randint(1, 59))
    return random_expression(rng, near), name, start


# --- comparison ----------------------------------------------------------------------------------


def model_fires(expression: str, name: str, start: datetime) -> list[datetime]:
    minute = int(start.timestamp()) // 60
    boot = minute - BOOT_BEFORE // timedelta(minutes=1)
    stop = int((start + HORIZON).timestamp()) // 60
    return daemon_fires(Entry.parse(expression), zone(name), boot, start, FIRES, stop)


def library_fires(expression: str, name: str, start: datetime) -> tuple[list[datetime], list[datetime]]:
    """The library's first fires within the horizon: step by step, and from the preview."""
    end = start + HORIZON
    stepped: list[datetime] = []
    moment = start
    while len(stepped) < FIRES:
        moment = next_cron_time(expression, zone(name), moment)
        if moment > end:
            break
        stepped.append(moment)
    previewed = [f.at for f in cron_fire_times(expression, zone(name), start, FIRES) if f.at <= end]
    return stepped, previewed


def disagreement(expression: str, name: str, start: datetime) -> str | None:
    """None when the library agrees with the model on this case, else a description."""
    expected = model_fires(expression, name, start)
    try:
        stepped, previewed = library_fires(expression, name, start)
    except InvalidCron as error:  # never matches within five years of now: the model must agree
        return None if not expected else f"refused ({error}) but the model fires at {expected[0]}"
    if stepped == expected and previewed == expected:
        return None
    shown = (_show(expected, name), _show(stepped, name), _show(previewed, name))
    return "model {} next_cron_time {} preview {}".format(*shown)


def _show(instants: list[datetime], name: str) -> list[str]:
    return [i.astimezone(zone(name)).isoformat(timespec="minutes") for i in instants]


def check(count: int, seed: int, zones: tuple[str, ...] = ZONES) -> tuple[int, list[str]]:
    """Run ``count`` random cases; return (cases run, disagreement descriptions)."""
    rng = random.Random(seed)
    found: list[str] = []
    for _ in range(count):
        expression, name, start = random_case(rng, zones)
        problem = disagreement(expression, name, start)
        if problem is not None:
            found.append(f"{expression!r} {name} after {start.isoformat()}: {problem}")
    return count, found
