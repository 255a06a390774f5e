"""Time limits: how long the listeners of one fire may run.

A job's own ``time_limit`` wins; else the limit its topic's default names (the
``time_limits`` setting, ``SCHEDULE_TIME_LIMITS``); else the global default
(``default_time_limit``, ``SCHEDULE_DEFAULT_TIME_LIMIT``); else the fire has no limit. The limit
is resolved by the worker when it fires, so a changed setting applies to the next fire of every
job that has no limit of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from schedule_sdk.domain.errors import InvalidTimeLimit
from schedule_sdk.domain.quoting import shown
from schedule_sdk.domain.topics import validate_topic

#: The shortest and the longest time limit.
MIN_TIME_LIMIT = timedelta(milliseconds=1)
MAX_TIME_LIMIT = timedelta(days=7)


def check_time_limit(value: object, what: str = "time_limit") -> timedelta | None:
    """``value`` if it is a valid time limit (a ``timedelta`` from 1 ms to 7 days, in whole
    milliseconds after rounding down) or None; else :class:`InvalidTimeLimit`."""
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise InvalidTimeLimit(f"{what} must be a timedelta or None, not {type(value).__name__}")
    if not MIN_TIME_LIMIT <= value <= MAX_TIME_LIMIT:
        raise InvalidTimeLimit(f"{what} must be from 1 ms to 7 days, not {value}")
    return timedelta(milliseconds=value // MIN_TIME_LIMIT)


def limit_ms(limit: timedelta) -> int:
    """A time limit in whole milliseconds (what is stored)."""
    return limit // MIN_TIME_LIMIT


@dataclass(frozen=True, kw_only=True, slots=True)
class TimeLimits:
    """The defaults that apply to jobs without a ``time_limit`` of their own."""

    #: Topic → the limit of that topic's jobs.
    by_topic: Mapping[str, timedelta] = field(default_factory=dict)
    #: The limit of every other job (None: none).
    default: timedelta | None = None

    def __post_init__(self) -> None:
        checked = {}
        for topic, limit in dict(self.by_topic).items():
            validate_topic(topic)
            checked[topic] = check_time_limit(limit, f"the time limit of topic {shown(topic)}")
        object.__setattr__(self, "by_topic", checked)
        object.__setattr__(self, "default", check_time_limit(self.default, "the default time limit"))

    def resolve(self, own: timedelta | None, topic: str) -> timedelta | None:
        """The limit of a fire: the job's ``own`` limit, else its topic's, else the default."""
        if own is not None:
            return own
        return self.by_topic.get(topic, self.default)


NO_LIMITS = TimeLimits()
