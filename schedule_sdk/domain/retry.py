"""A job's retry policy: how many attempts, the wait between them (capped), and which errors are
retried.

The exception types of ``retry_on`` and ``give_up_on`` are stored with the job as qualified names
(``module.QualName``, e.g. ``builtins.ConnectionError``), so a worker that never imported the
code that scheduled the job still judges its errors the same way: an error matches a name when
that name is one of the qualified names of its type's MRO (so a name also matches subclasses).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self, cast

from schedule_sdk.domain.errors import InvalidRetry, ListenerFailed
from schedule_sdk.domain.text import shown

#: Most attempts a policy allows (the first included).
MAX_ATTEMPTS = 100
#: The longest wait between two attempts (7 days, in ms).
MAX_DELAY_MS = 7 * 86_400_000
#: Most exception names one of ``retry_on`` / ``give_up_on`` holds.
MAX_ERROR_NAMES = 50
_QUALIFIED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True, slots=True)
class Backoff:
    """Wait between attempts: ``fixed`` waits ``delay_ms``; ``exponential`` waits ``delay_ms * 2**(n-1)``
    before attempt ``n + 1``, never more than ``max_delay_ms`` (None: at most 7 days)."""

    type: Literal["fixed", "exponential"] = "fixed"
    delay_ms: int = 1000
    #: The cap on the wait between two attempts (ms); None: 7 days.
    max_delay_ms: int | None = None

    def __post_init__(self) -> None:
        if self.type not in ("fixed", "exponential"):
            raise InvalidRetry(f"backoff type must be 'fixed' or 'exponential', not {shown(self.type)}")
        if not _is_int(self.delay_ms) or not 0 <= self.delay_ms <= MAX_DELAY_MS:
            raise InvalidRetry(
                f"backoff delay_ms must be an int between 0 and 7 days, not {shown(self.delay_ms)}"
            )
        if self.max_delay_ms is not None and (
            not _is_int(self.max_delay_ms) or not 0 <= self.max_delay_ms <= MAX_DELAY_MS
        ):
            raise InvalidRetry(
                "backoff max_delay_ms must be None or an int between 0 and 7 days, "
                f"not {shown(self.max_delay_ms)}"
            )

    def delay_after(self, attempt: int) -> int:
        """Milliseconds to wait after failed attempt number ``attempt`` (1-based)."""
        cap = MAX_DELAY_MS if self.max_delay_ms is None else self.max_delay_ms
        if self.type == "fixed":
            return min(self.delay_ms, cap)
        return int(min(self.delay_ms * 2 ** min(attempt - 1, 64), cap))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "delay_ms": self.delay_ms}
        if self.max_delay_ms is not None:  # absent when unset: stored policies keep their text
            data["max_delay_ms"] = self.max_delay_ms
        return data


def error_name(kind: type[BaseException]) -> str:
    """The qualified name an exception type is stored and matched by: ``module.QualName``."""
    return f"{kind.__module__}.{kind.__qualname__}"


def error_names(names: Iterable[type[BaseException] | str], what: str) -> tuple[str, ...]:
    """``names`` (exception types, or their qualified names; a bare name is a builtin's) as the
    sorted qualified names a policy stores.

    :raises InvalidRetry: an entry is neither an exception type nor a dotted name.
    """
    if isinstance(names, (str, type)):
        names = (names,)
    try:
        entries = list(names)
    except TypeError:
        raise InvalidRetry(f"{what} must be exception types or their qualified names") from None
    found: set[str] = set()
    for entry in entries:
        if isinstance(entry, type) and issubclass(entry, BaseException):
            found.add(error_name(entry))
        elif isinstance(entry, str) and len(entry) <= 255 and _QUALIFIED.fullmatch(entry):
            found.add(entry if "." in entry else f"builtins.{entry}")
        else:
            raise InvalidRetry(
                f"{what} must hold exception types or qualified names like 'builtins.ConnectionError', "
                f"not {shown(entry)}"
            )
    if len(found) > MAX_ERROR_NAMES:
        raise InvalidRetry(f"{what} holds more than {MAX_ERROR_NAMES} exception types")
    return tuple(sorted(found))


def raised_errors(error: BaseException) -> list[BaseException]:
    """The errors a failed attempt raised: each listener's of a :class:`ListenerFailed`, else ``error``."""
    if isinstance(error, ListenerFailed) and error.errors:
        return list(error.errors)
    return [error]


def matches(error: BaseException, names: tuple[str, ...]) -> bool:
    """Whether ``error``'s type, or a base class of it, has one of the qualified ``names``."""
    return any(error_name(kind) in names for kind in type(error).__mro__)


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """``attempts`` counts every attempt, the first included (1 means no retry).

    ``retry_on``: when given, a failed attempt is retried only if one of its errors (each
    listener's) is of one of these types; ``give_up_on``: a failed attempt one of whose errors is
    of one of these types is never retried (it wins over ``retry_on``). Both take exception types
    or their qualified names and are stored as qualified names (see the module docstring)."""

    attempts: int = 1
    backoff: Backoff = field(default_factory=Backoff)
    #: Exception types or qualified names; held (and read back) as sorted qualified names.
    retry_on: tuple[type[BaseException] | str, ...] = ()
    give_up_on: tuple[type[BaseException] | str, ...] = ()

    def __post_init__(self) -> None:
        if not _is_int(self.attempts) or not 1 <= self.attempts <= MAX_ATTEMPTS:
            raise InvalidRetry(
                f"attempts must be an int between 1 and {MAX_ATTEMPTS}, not {shown(self.attempts)}"
            )
        if not isinstance(self.backoff, Backoff):
            raise InvalidRetry("backoff must be a Backoff")
        object.__setattr__(self, "retry_on", error_names(self.retry_on, "retry_on"))
        object.__setattr__(self, "give_up_on", error_names(self.give_up_on, "give_up_on"))

    def retries(self, error: BaseException) -> bool:
        """Whether an attempt that failed with ``error`` is retried (attempts left aside)."""
        errors = raised_errors(error)
        give_up, retry_on = self.names("give_up_on"), self.names("retry_on")
        if give_up and any(matches(e, give_up) for e in errors):
            return False
        return not retry_on or any(matches(e, retry_on) for e in errors)

    def names(self, which: Literal["retry_on", "give_up_on"]) -> tuple[str, ...]:
        """The qualified names held in ``which`` (every entry is one once the policy is built)."""
        return cast("tuple[str, ...]", getattr(self, which))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"attempts": self.attempts, "backoff": self.backoff.to_dict()}
        if self.retry_on:  # absent when unset: stored policies keep their text
            data["retry_on"] = list(self.retry_on)
        if self.give_up_on:
            data["give_up_on"] = list(self.give_up_on)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            attempts=data["attempts"],
            backoff=Backoff(**data["backoff"]),
            retry_on=tuple(data.get("retry_on", ())),
            give_up_on=tuple(data.get("give_up_on", ())),
        )


NO_RETRY = RetryPolicy()
