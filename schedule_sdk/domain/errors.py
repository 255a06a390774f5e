"""Every error the SDK raises, each with a stable ``code``.

Catch :class:`ScheduleError` for "anything from the scheduler", a builtin for a family
(``ValueError`` for bad input, ``LookupError`` for a missing job), or one exact class::

    ScheduleError
    ├── ScheduleValidationError (ValueError)      a refused call writes nothing
    │   ├── NaiveDatetime               SCHEDULE_NAIVE_DATETIME
    │   ├── InvalidDatetime             SCHEDULE_INVALID_DATETIME
    │   ├── RunAtInPast                 SCHEDULE_RUN_AT_IN_PAST
    │   ├── InvalidTimezone             SCHEDULE_INVALID_TIMEZONE
    │   ├── InvalidCron                 SCHEDULE_INVALID_CRON
    │   ├── InvalidInterval             SCHEDULE_INVALID_INTERVAL
    │   ├── InvalidTopic                SCHEDULE_INVALID_TOPIC
    │   ├── InvalidPayload              SCHEDULE_INVALID_PAYLOAD
    │   ├── InvalidMetadata             SCHEDULE_INVALID_METADATA
    │   ├── InvalidRetry                SCHEDULE_INVALID_RETRY
    │   ├── InvalidRepeat               SCHEDULE_INVALID_REPEAT
    │   ├── InvalidCursor               SCHEDULE_INVALID_CURSOR
    │   ├── InvalidStatus               SCHEDULE_INVALID_STATUS
    │   ├── InvalidSetting              SCHEDULE_INVALID_SETTING
    │   │   ├── StoreLacksCapability    SCHEDULE_STORE_LACKS_CAPABILITY
    │   │   └── ListenNotDelivered      SCHEDULE_LISTEN_NOT_DELIVERED
    │   ├── InvalidMisfire              SCHEDULE_INVALID_MISFIRE
    │   ├── InvalidOverlap              SCHEDULE_INVALID_OVERLAP
    │   ├── InvalidSpread               SCHEDULE_INVALID_SPREAD
    │   ├── InvalidCalendar             SCHEDULE_INVALID_CALENDAR
    │   ├── InvalidConcurrency          SCHEDULE_INVALID_CONCURRENCY
    │   ├── TransactionNotJoinable      SCHEDULE_TRANSACTION_NOT_JOINABLE
    │   ├── InvalidDeclaration          SCHEDULE_INVALID_DECLARATION
    │   │   └── DuplicateDeclaration    SCHEDULE_DUPLICATE_DECLARATION
    │   ├── InvalidTimerCommand         TIMER_INVALID_COMMAND
    │   └── InvalidTimeLimit            SCHEDULE_INVALID_TIME_LIMIT
    ├── ClientRequestIdInUse            SCHEDULE_CLIENT_REQUEST_ID_IN_USE
    ├── JobNotFound (LookupError)       SCHEDULE_NOT_FOUND
    ├── NotReschedulable                SCHEDULE_NOT_RESCHEDULABLE
    ├── JobFinished                     SCHEDULE_JOB_FINISHED
    ├── NotTriggerable                  SCHEDULE_NOT_TRIGGERABLE
    ├── InvalidTransition               SCHEDULE_INVALID_TRANSITION
    ├── JobOwnedByTimer                 SCHEDULE_JOB_OWNED_BY_TIMER
    ├── ListenerFailed                  SCHEDULE_LISTENER_FAILED
    ├── UnheardFire                     SCHEDULE_UNHEARD_FIRE
    ├── NotRequeueable                  SCHEDULE_NOT_REQUEUEABLE
    ├── ListenerTimedOut                SCHEDULE_LISTENER_TIMED_OUT
    └── ScheduleUnavailable (ConnectionError)
        ├── StoreUnavailable            SCHEDULE_STORE_UNAVAILABLE
        ├── QueueUnavailable            SCHEDULE_QUEUE_UNAVAILABLE
        └── BrokerUnavailable           SCHEDULE_BROKER_UNAVAILABLE

The message defaults to the class docstring; most subclasses add the offending value, quoted
as ``domain.text.shown`` quotes it (its repr, cut to a short prefix with a marker), and no message
is longer than :data:`MAX_MESSAGE` characters.
``http_status`` suggests a response status for apps that expose scheduling over HTTP
(validation 422, not found 404, conflicts 409, unavailable 503, anything else 500).
Driver exceptions (SQLAlchemy, redis, nats) never reach callers: adapters translate them
and chain the original as ``__cause__``.
"""

from __future__ import annotations

from typing import ClassVar

from schedule_sdk.domain.quoting import shown

#: The longest message an error carries: past it the message is cut, with a marker. The values
#: an error quotes are cut much shorter where they are quoted (``domain.text.shown``).
MAX_MESSAGE = 1000


class ScheduleError(Exception):
    """The scheduler refused or could not complete an operation."""

    code: ClassVar[str] = "SCHEDULE_ERROR"
    #: A suggested HTTP status for apps that expose scheduling over HTTP.
    http_status: ClassVar[int] = 500
    #: In a refused ``ScheduleService.schedule_many`` call: the position of the offending spec.
    index: int | None = None

    def __init__(self, message: str | None = None) -> None:
        text = message or (self.__doc__ or self.code).strip()
        if len(text) > MAX_MESSAGE:  # a value quoted whole (a driver's message, say): cut, and say so
            text = f"{text[:MAX_MESSAGE]}… ({len(text) - MAX_MESSAGE:,} more characters)"
        super().__init__(text)

    @property
    def message(self) -> str:
        return str(self.args[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ScheduleValidationError(ScheduleError, ValueError):
    """The request is invalid; nothing was written."""

    code = "SCHEDULE_INVALID_REQUEST"
    http_status = 422


class NaiveDatetime(ScheduleValidationError):
    """Datetimes must carry a timezone (an aware datetime); naive values are never guessed as UTC."""

    code = "SCHEDULE_NAIVE_DATETIME"


class InvalidDatetime(ScheduleValidationError):
    """The datetime is out of the supported range (1970-01-01 to 9999-12-31, UTC) or overflows
    when converted to UTC or to a time zone."""

    code = "SCHEDULE_INVALID_DATETIME"


class RunAtInPast(ScheduleValidationError):
    """run_at is in the past."""

    code = "SCHEDULE_RUN_AT_IN_PAST"


class InvalidTimezone(ScheduleValidationError):
    """The timezone is not a valid IANA zone name."""

    code = "SCHEDULE_INVALID_TIMEZONE"


class InvalidCron(ScheduleValidationError):
    """The cron expression is invalid or never matches."""

    code = "SCHEDULE_INVALID_CRON"


class InvalidInterval(ScheduleValidationError):
    """The interval must be a positive whole number of milliseconds."""

    code = "SCHEDULE_INVALID_INTERVAL"


class InvalidTopic(ScheduleValidationError):
    """The topic must be 1-200 characters of letters, digits and single '.', '_' or '-' separators."""

    code = "SCHEDULE_INVALID_TOPIC"


class InvalidPayload(ScheduleValidationError):
    """The payload must be JSON-serializable and within the size limit."""

    code = "SCHEDULE_INVALID_PAYLOAD"


class InvalidMetadata(ScheduleValidationError):
    """A metadata field is not a non-empty string of at most 255 characters."""

    code = "SCHEDULE_INVALID_METADATA"


class InvalidRetry(ScheduleValidationError):
    """The retry policy is invalid (attempts 1-100, backoff 'fixed' or 'exponential', delay_ms >= 0)."""

    code = "SCHEDULE_INVALID_RETRY"


class InvalidRepeat(ScheduleValidationError):
    """The repeat specification is invalid."""

    code = "SCHEDULE_INVALID_REPEAT"


class InvalidSpread(ScheduleValidationError):
    """A spread or jitter must be a timedelta from 1 ms to 7 days (and a spread key
    1-255 storable characters)."""

    code = "SCHEDULE_INVALID_SPREAD"


class InvalidCalendar(ScheduleValidationError):
    """The calendar is invalid: excluded dates, weekdays (0 Monday to 6 Sunday) or a holiday
    country the ``holidays`` package knows, and at least one occurrence outside it within the
    search bound."""

    code = "SCHEDULE_INVALID_CALENDAR"


class InvalidCursor(ScheduleValidationError):
    """The list cursor is malformed or the limit is out of range."""

    code = "SCHEDULE_INVALID_CURSOR"


class InvalidStatus(ScheduleValidationError):
    """A status filter names no job status."""

    code = "SCHEDULE_INVALID_STATUS"


class InvalidSetting(ScheduleValidationError):
    """A configuration value is invalid."""

    code = "SCHEDULE_INVALID_SETTING"


class StoreLacksCapability(InvalidSetting):
    """The configured job store lacks a capability the configuration needs (a worker needs a
    ``WorkerRegistry``, the ``retention`` setting needs ``Retention``); nothing was built."""

    code = "SCHEDULE_STORE_LACKS_CAPABILITY"

    def __init__(self, store: str, capability: str, needed_by: str) -> None:
        super().__init__(
            f"{needed_by} needs a job store that is a {capability}, and {store} is not one "
            f"(a store declares a capability by inheriting its port from schedule_sdk.ports)"
        )
        self.store = store
        self.capability = capability
        self.needed_by = needed_by


class ListenNotDelivered(InvalidSetting):
    """PostgreSQL's LISTEN does not work on the connection the worker's wake-ups use: a
    notification sent to it was not delivered (a transaction pooler such as PgBouncer in
    ``pool_mode=transaction`` sits in between); nothing was started."""

    code = "SCHEDULE_LISTEN_NOT_DELIVERED"


class InvalidMisfire(ScheduleValidationError):
    """The misfire policy is invalid (mode 'fire_once', 'skip' or 'fire_all'; grace_ms >= 0;
    max_catch_up 1-10000)."""

    code = "SCHEDULE_INVALID_MISFIRE"


class InvalidConcurrency(ScheduleValidationError):
    """The concurrency limit is invalid (a ConcurrencyLimit whose key is a name of 1-200 letters,
    digits and single '.', '_', '-' or ':' separators, and whose limit is an int 1-10000)."""

    code = "SCHEDULE_INVALID_CONCURRENCY"


class InvalidOverlap(ScheduleValidationError):
    """The overlap policy is invalid: None (the misfire policy decides), ``'skip'``,
    ``'buffer_one'`` or ``'allow'``, and only on a repeating job (a one-shot has nothing to
    overlap)."""

    code = "SCHEDULE_INVALID_OVERLAP"


class TransactionNotJoinable(ScheduleValidationError):
    """The ``connection=`` given cannot carry the job's write (not a SQLAlchemy Connection or
    Session, a different database than the SDK's tables, or a store without SQL transactions)."""

    code = "SCHEDULE_TRANSACTION_NOT_JOINABLE"


class InvalidDeclaration(ScheduleValidationError):
    """A schedule declared in code (``@cron``, ``@every``, ``@after``) is invalid; the message
    names the function. ``reason_code`` is the code of the underlying refusal (for example
    ``SCHEDULE_INVALID_CRON``), or this class's own code."""

    code = "SCHEDULE_INVALID_DECLARATION"

    def __init__(self, function: str, reason: str, reason_code: str | None = None) -> None:
        super().__init__(f"{function}: {reason}")
        #: The qualified name of the decorated function.
        self.function = function
        self.reason_code = reason_code or self.code


class DuplicateDeclaration(InvalidDeclaration):
    """Two schedules declared in code share one name (or one topic)."""

    code = "SCHEDULE_DUPLICATE_DECLARATION"


class InvalidTimerCommand(ScheduleValidationError):
    """The ScheduleTimer command is malformed."""

    code = "TIMER_INVALID_COMMAND"


class InvalidTimeLimit(ScheduleValidationError):
    """The time limit is invalid (a ``timedelta`` from 1 ms to 7 days, or None for none)."""

    code = "SCHEDULE_INVALID_TIME_LIMIT"


class ClientRequestIdInUse(ScheduleError):
    """The clientRequestId is already used by another job of the same tenant (in any status)."""

    code = "SCHEDULE_CLIENT_REQUEST_ID_IN_USE"
    http_status = 409

    def __init__(self, client_request_id: str, tenant_id: str | None = None) -> None:
        whose = "" if tenant_id is None else f" by tenant {shown(tenant_id)}"
        super().__init__(f"clientRequestId {shown(client_request_id)} is already in use{whose}")
        self.client_request_id = client_request_id
        #: The tenant whose id it is (None: the jobs without a tenant, or not known).
        self.tenant_id = tenant_id


class JobNotFound(ScheduleError, LookupError):
    """No scheduled job has this id."""

    code = "SCHEDULE_NOT_FOUND"
    http_status = 404

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no scheduled job with id {shown(job_id)}")
        self.job_id = job_id


class NotReschedulable(ScheduleError):
    """Only pending or active jobs can be rescheduled."""

    code = "SCHEDULE_NOT_RESCHEDULABLE"
    http_status = 409

    def __init__(self, job_id: str, status: str) -> None:
        super().__init__(f"job {shown(job_id)} is {status} and cannot be rescheduled")
        self.job_id = job_id
        self.status = status


class JobFinished(ScheduleError):
    """The job is completed, cancelled or failed: it can no longer be paused, resumed or triggered."""

    code = "SCHEDULE_JOB_FINISHED"
    http_status = 409

    def __init__(self, job_id: str, status: str) -> None:
        super().__init__(f"job {shown(job_id)} is {status}: a finished job cannot be steered")
        self.job_id = job_id
        self.status = status


class NotTriggerable(ScheduleError):
    """Only a pending job whose next fire is not yet due (and is not a retry) can be triggered."""

    code = "SCHEDULE_NOT_TRIGGERABLE"
    http_status = 409

    def __init__(self, job_id: str, reason: str) -> None:
        super().__init__(f"job {shown(job_id)} cannot be triggered: {reason}")
        self.job_id = job_id
        self.reason = reason


class InvalidTransition(ScheduleError):
    """A job cannot move between these statuses."""

    code = "SCHEDULE_INVALID_TRANSITION"
    http_status = 409


class JobOwnedByTimer(ScheduleError):
    """The job fires a timer (topic ``timer.due``): it is steered by the timer only, so that a
    timer never claims a job it does not have. Send the timer a new ScheduleTimer command."""

    code = "SCHEDULE_JOB_OWNED_BY_TIMER"
    http_status = 409

    def __init__(self, job_id: str, action: str) -> None:
        super().__init__(
            f"job {shown(job_id)} fires a timer and cannot be {action} directly: "
            "move the timer with a ScheduleTimer command instead"
        )
        self.job_id = job_id
        self.action = action


class ListenerFailed(ScheduleError):
    """At least one listener raised; the fire counts as a failed attempt."""

    code = "SCHEDULE_LISTENER_FAILED"

    def __init__(self, errors: list[BaseException]) -> None:
        first = errors[0] if errors else None
        summary = f"{type(first).__name__}: {first}" if first else "listener failed"
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{summary}{more}")
        self.errors = errors


class UnheardFire(ScheduleError):
    """No listener heard the fire. Recorded as the error of an ``unheard`` fire when the
    ``unheard_fails`` setting makes such a fire a failed attempt (retried by the job's policy)."""

    code = "SCHEDULE_UNHEARD_FIRE"

    def __init__(self, topic: str) -> None:
        super().__init__(f"no listener heard topic {shown(topic)}")
        self.topic = topic


class NotRequeueable(ScheduleError):
    """Only a finished job can be requeued: a failed, completed or cancelled one-shot, or a failed
    repeating job."""

    code = "SCHEDULE_NOT_REQUEUEABLE"
    http_status = 409

    def __init__(self, job_id: str, reason: str) -> None:
        super().__init__(f"job {shown(job_id)} cannot be requeued: {reason}")
        self.job_id = job_id
        self.reason = reason


class ListenerTimedOut(ScheduleError):
    """The fire's listeners ran past its time limit: the attempt is recorded with the outcome
    ``timeout`` and counts as failed (the job's retry policy applies). An ``async def`` listener
    was cancelled; a sync one could not be stopped and was left running, its late result ignored."""

    code = "SCHEDULE_LISTENER_TIMED_OUT"

    def __init__(self, limit_ms: int) -> None:
        super().__init__(f"listeners ran past the fire's time limit of {limit_ms} ms")
        self.limit_ms = limit_ms


class ScheduleUnavailable(ScheduleError, ConnectionError):
    """A backing service is unreachable; nothing was written."""

    code = "SCHEDULE_UNAVAILABLE"
    http_status = 503


class StoreUnavailable(ScheduleUnavailable):
    """The job store (database) is unreachable or failed."""

    code = "SCHEDULE_STORE_UNAVAILABLE"


class QueueUnavailable(ScheduleUnavailable):
    """The execution queue (Redis) is unreachable or failed."""

    code = "SCHEDULE_QUEUE_UNAVAILABLE"


class BrokerUnavailable(ScheduleUnavailable):
    """The message broker is unreachable or failed."""

    code = "SCHEDULE_BROKER_UNAVAILABLE"
