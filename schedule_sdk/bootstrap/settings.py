"""Every setting, its environment variable and its default, in one frozen object.

Values come from (highest first): the mapping given to :meth:`Settings.load` (for example the
container's ``config.from_dict``), then environment variables, then the defaults below.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, TypeVar

from schedule_sdk.core.retention import parse_duration
from schedule_sdk.domain.errors import InvalidSetting, ScheduleValidationError
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.redis_url import sentinel_target
from schedule_sdk.domain.text import shown
from schedule_sdk.domain.time_limits import TimeLimits


def env_var(name: str) -> dict[str, str]:
    """A settings field's metadata naming the environment variable that sets it."""
    return {"env": name}


S = TypeVar("S")


def load_settings(
    cls: type[S],
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    what: str = "setting",
) -> S:
    """An instance of the settings dataclass ``cls``: each field from ``overrides`` (by field name),
    else from the environment variable in its ``env`` metadata, else its default."""
    environ = os.environ if environ is None else environ
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(overrides) - set(fields)
    if unknown:
        raise InvalidSetting(f"unknown {what}(s): {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    for name, f in fields.items():
        if name in overrides:
            values[name] = _coerce(f, overrides[name])
        elif f.metadata.get("env") in environ:
            values[name] = _coerce(f, environ[f.metadata["env"]])
    return cls(**values)


def default_worker_id() -> str:
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{new_id()[-8:]}"


#: The settings that take one of a few names, and those names.
_CHOICES: dict[str, tuple[str, ...]] = {
    "metrics": ("none", "memory", "prometheus"),
    "tracing": ("auto", "otel", "none"),
    "events": ("local", "redis"),
    "database_pooler": ("none", "transaction"),
}


def check_pooling(
    pooler: str, database_url: str, listen_url: str | None, url_name: str = "database_url"
) -> None:
    """Refuse a ``database_pooler`` / ``database_listen_url`` pair that cannot work
    (``InvalidSetting``): a transaction pooler in front of a database that is not PostgreSQL, a
    pooler of no known kind, or a listen URL that is not PostgreSQL's."""
    if pooler not in _CHOICES["database_pooler"]:
        raise InvalidSetting(
            f"database_pooler must be {_one_of(_CHOICES['database_pooler'])}, not {shown(pooler)}"
        )
    if pooler == "transaction" and not database_url.startswith("postgresql"):
        raise InvalidSetting(f"database_pooler=transaction needs a PostgreSQL {url_name}")
    if listen_url is not None and not listen_url.startswith("postgresql"):
        raise InvalidSetting("database_listen_url must be a PostgreSQL URL (postgresql+psycopg://...)")


def _one_of(names: tuple[str, ...]) -> str:
    quoted = [f"'{name}'" for name in names]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


@dataclass(frozen=True, kw_only=True)
class Settings:
    #: SQLAlchemy URL of the job store: ``sqlite:///path.db`` or ``postgresql+psycopg://user@host/db``.
    database_url: str = field(default="sqlite:///schedule_sdk.db", metadata=env_var("SCHEDULE_DATABASE_URL"))
    #: What sits between the SDK and PostgreSQL: ``none`` (a direct connection, or a pooler in
    #: session mode) or ``transaction`` (a pooler in transaction mode, e.g. PgBouncer with
    #: ``pool_mode=transaction``): no server-side prepared statements, claims committed durably,
    #: and wake-ups by LISTEN only on ``database_listen_url`` (unset: by polling).
    database_pooler: Literal["none", "transaction"] = field(
        default="none", metadata=env_var("SCHEDULE_DATABASE_POOLER")
    )
    #: A direct PostgreSQL URL (not through a transaction pooler) used only for the worker's LISTEN
    #: wake-ups (one connection per worker). Unset: LISTEN on ``database_url``, or, with
    #: ``database_pooler=transaction``, no LISTEN (the poller re-reads every ``poll_interval``).
    database_listen_url: str | None = field(default=None, metadata=env_var("SCHEDULE_DATABASE_LISTEN_URL"))
    #: Redis URL; when set, the execution substrate defaults to ``rq``. One server
    #: (``redis://host:port/db``) or a service failed over by Redis Sentinel
    #: (``redis+sentinel://host:port,host:port/service/db``: the Sentinels, the monitored service's
    #: name, the db); the SDK then follows the primary through failovers.
    redis_url: str | None = field(default=None, metadata=env_var("SCHEDULE_REDIS_URL"))
    #: ``sql`` (the store is the delay index; no server needed) or ``rq`` (Redis + RQ). Default:
    #: ``rq`` when ``redis_url`` is set, else ``sql``.
    substrate: Literal["sql", "rq"] | None = field(default=None, metadata=env_var("SCHEDULE_SUBSTRATE"))
    #: Where events go: ``local`` (in-process listeners) or ``redis`` (pub/sub to every app instance).
    events: Literal["local", "redis"] = field(default="local", metadata=env_var("SCHEDULE_EVENTS"))
    #: Listener threads per worker: fires run concurrently up to this many.
    worker_concurrency: int = field(default=8, metadata=env_var("SCHEDULE_WORKER_CONCURRENCY"))
    #: How long a worker's claim on a firing job lasts without renewal (seconds); after a crash
    #: the job fires again once this has passed.
    lease_seconds: float = field(default=30.0, metadata=env_var("SCHEDULE_LEASE_SECONDS"))
    #: A worker whose heartbeat stops for this long (seconds) is declared dead by any live worker,
    #: which releases its claims at once (the lease stays as the fallback). Workers beat every
    #: ``min(lease_seconds / 3, dead_after / 4, 1)`` seconds. Keep it above the longest pause a
    #: live worker may take (GC, a stalled VM); beats are stamped by the store's clock, so the
    #: hosts' own clocks need not agree.
    dead_after: float = field(default=10.0, metadata=env_var("SCHEDULE_DEAD_AFTER"))
    #: A worker claims by the store's clock: it measures its own clock's offset from it at start
    #: and at each beat. While the offset (plus the measurement's error) is beyond this many
    #: seconds, or unknown, the worker claims nothing (and its ``rq`` pump does not lead).
    max_clock_offset: float = field(default=5.0, metadata=env_var("SCHEDULE_MAX_CLOCK_OFFSET"))
    #: Most due jobs claimed per query.
    claim_batch_size: int = field(default=500, metadata=env_var("SCHEDULE_CLAIM_BATCH_SIZE"))
    #: Most fires a worker holds claimed at once (claimed and not yet recorded).
    max_in_flight: int = field(default=2000, metadata=env_var("SCHEDULE_MAX_IN_FLIGHT"))
    #: The poller's safety net: it re-reads the next due time at least this often (seconds).
    poll_interval: float = field(default=1.0, metadata=env_var("SCHEDULE_POLL_INTERVAL"))
    #: How long ``stop()`` lets in-flight fires finish before releasing them (seconds).
    stop_timeout: float = field(default=5.0, metadata=env_var("SCHEDULE_STOP_TIMEOUT"))
    #: Largest payload accepted, in bytes of JSON.
    max_payload_bytes: int = field(default=65_536, metadata=env_var("SCHEDULE_MAX_PAYLOAD_BYTES"))
    #: Create or upgrade the schema when the store is first used.
    auto_migrate: bool = field(default=True, metadata=env_var("SCHEDULE_AUTO_MIGRATE"))
    #: Re-run the reconciler this often while the worker runs (seconds); 0 = only at start.
    #: Default: 300 on the ``rq`` substrate (a net: a flushed, emptied or failed-over Redis is found
    #: at the next maintenance beat and reconciled at once; an entry a dead process left
    #: mid-hand-off is handed over by the heartbeat after ``lease_seconds``), 0 on ``sql`` (the row
    #: is the queue entry).
    reconcile_interval: float | None = field(default=None, metadata=env_var("SCHEDULE_RECONCILE_INTERVAL"))
    #: This process's identity in claims and in the worker registry (default: host:pid:random);
    #: its PostgreSQL sessions are named ``schedule-sdk <worker id>``, which is how a peer that
    #: declares it dead finds the transactions it left open. Give each process its own.
    worker_id: str = field(default_factory=default_worker_id, metadata=env_var("SCHEDULE_WORKER_ID"))
    #: Modules the ``schedule-sdk worker`` command imports so their ``@on_event`` listeners register.
    listener_modules: tuple[str, ...] = field(default=(), metadata=env_var("SCHEDULE_LISTENER_MODULES"))
    #: The version of the schedules declared in code (``@cron``, ``@every``, ``@after``): give each
    #: deploy a higher one (a build number, a commit time) when old and new code run side by side;
    #: a sync leaves alone what a higher version stored. Equal versions: the last sync wins.
    declared_version: int = field(default=0, metadata=env_var("SCHEDULE_DECLARED_VERSION"))
    #: What a sync does with a code-owned schedule the code no longer declares: cancel its job
    #: (true) or keep it (false).
    declared_prune: bool = field(default=True, metadata=env_var("SCHEDULE_DECLARED_PRUNE"))
    #: A fire that no listener heard (no ``@on_event`` listener of its topic ran, see the
    #: ``unheard`` fire outcome) fails its attempt, retried as the job's retry policy says; by
    #: default it is recorded as ``unheard`` and the job moves on as after a success.
    unheard_fails: bool = field(default=False, metadata=env_var("SCHEDULE_UNHEARD_FAILS"))
    #: RQ queue name (``rq`` substrate).
    rq_queue: str = field(default="schedule_sdk", metadata=env_var("SCHEDULE_RQ_QUEUE"))
    #: Where job metrics go: ``none`` (not collected), ``memory`` (``InMemoryMetrics``, for tests)
    #: or ``prometheus`` (``PrometheusMetrics``; needs the ``prometheus`` extra). The worker
    #: command's ``--metrics-port`` selects ``prometheus``.
    metrics: Literal["none", "memory", "prometheus"] = field(
        default="none", metadata=env_var("SCHEDULE_METRICS")
    )
    #: Traces of fires: ``auto`` (OpenTelemetry when the ``otel`` extra is installed, else none),
    #: ``otel`` (an error without the extra) or ``none``. Spans are recorded only once the
    #: application configures an OpenTelemetry tracer provider.
    tracing: Literal["auto", "otel", "none"] = field(default="auto", metadata=env_var("SCHEDULE_TRACING"))
    #: Database connections per process (PostgreSQL).
    pool_size: int = field(default=10, metadata=env_var("SCHEDULE_POOL_SIZE"))
    #: Test each pooled connection before use (PostgreSQL): survives a database restart without a
    #: failed call, at the cost of one more round trip per operation.
    pool_pre_ping: bool = field(default=False, metadata=env_var("SCHEDULE_POOL_PRE_PING"))

    #: Delete finished jobs (completed, cancelled, failed) this long after they finished:
    #: ``30d``, ``12h``, ``90m``, ``45s`` or seconds. Unset (the default): keep them forever.
    #: Workers purge in small batches from their heartbeat, one process at a time.
    retention: str | None = field(default=None, metadata=env_var("SCHEDULE_RETENTION"))

    #: Per-topic time limits of the jobs without a ``time_limit`` of their own: how long the
    #: listeners of one fire may run. ``topic=duration`` pairs separated by commas
    #: (``reports.build=10m,mail.send=30s``; durations as ``retention``: ``45s``, ``10m``, ``2h`` or
    #: seconds), or a mapping topic → ``timedelta`` / duration. See the time limits how-to.
    time_limits: str | Mapping[str, Any] | None = field(
        default=None, metadata=env_var("SCHEDULE_TIME_LIMITS")
    )
    #: The time limit of every other job without one of its own (a duration); unset: none.
    default_time_limit: str | float | timedelta | None = field(
        default=None, metadata=env_var("SCHEDULE_DEFAULT_TIME_LIMIT")
    )

    #: Listener threads of one worker that may be stuck past a fire's time limit (a sync listener
    #: that never returned) before the worker stops taking new fires; unset: twice
    #: ``worker_concurrency``. The worker's other threads keep serving until then.
    max_stuck_listeners: int | None = field(default=None, metadata=env_var("SCHEDULE_MAX_STUCK_LISTENERS"))

    def __post_init__(self) -> None:
        self._check_texts()
        self._check_time_limits()
        if self.substrate is None:
            object.__setattr__(self, "substrate", "rq" if self.redis_url else "sql")
        if self.reconcile_interval is None:
            object.__setattr__(self, "reconcile_interval", 300.0 if self.substrate == "rq" else 0.0)
        if self.substrate not in ("sql", "rq"):
            raise InvalidSetting(f"substrate must be 'sql' or 'rq', not {shown(self.substrate)}")
        if self.substrate == "rq" and not self.redis_url:
            raise InvalidSetting("the rq substrate needs redis_url (SCHEDULE_REDIS_URL)")
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise InvalidSetting(f"{name} must be {_one_of(allowed)}, not {shown(getattr(self, name))}")
        self._check_pooling()
        for name in (
            "worker_concurrency",
            "claim_batch_size",
            "max_in_flight",
            "max_payload_bytes",
            "pool_size",
        ):
            if getattr(self, name) < 1:
                raise InvalidSetting(f"{name} must be at least 1")
        for name in ("lease_seconds", "poll_interval", "dead_after", "max_clock_offset"):
            if getattr(self, name) <= 0:
                raise InvalidSetting(f"{name} must be positive")

    def _check_pooling(self) -> None:
        check_pooling(self.database_pooler, self.database_url, self.database_listen_url)

    def _check_texts(self) -> None:
        """Refuse a retention period or a Redis URL of no known form (``InvalidSetting``)."""
        if self.retention is not None:
            parse_duration(self.retention)
        if self.redis_url:
            sentinel_target(self.redis_url)

    @property
    def retention_period(self) -> timedelta | None:
        """``retention`` as a timedelta (None: keep finished jobs)."""
        return None if self.retention is None else parse_duration(self.retention)

    def _check_time_limits(self) -> None:
        """:raises InvalidSetting: a time limit setting, or ``max_stuck_listeners``, is invalid."""
        self.time_limit_defaults.resolve(None, "")
        if self.max_stuck_listeners is not None and self.max_stuck_listeners < 1:
            raise InvalidSetting("max_stuck_listeners must be at least 1")

    @property
    def time_limit_defaults(self) -> TimeLimits:
        """``time_limits`` and ``default_time_limit`` as the worker applies them.

        :raises InvalidSetting: a topic or a duration is invalid (1 ms to 7 days).
        """
        try:
            by_topic = _topic_limits(self.time_limits)
            return TimeLimits(by_topic=by_topic, default=_limit(self.default_time_limit))
        except ScheduleValidationError as error:
            raise InvalidSetting(f"time limits: {error}") from error

    @property
    def execution_substrate(self) -> Literal["sql", "rq"]:
        return "rq" if self.substrate == "rq" else "sql"

    @classmethod
    def load(
        cls, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Settings from ``overrides``, then ``environ`` (default ``os.environ``), then defaults."""
        return load_settings(cls, overrides, environ)


def _limit(value: object) -> timedelta | None:
    """A time limit setting's value (a timedelta, a duration or seconds) as a timedelta."""
    if value is None or isinstance(value, timedelta):
        return value
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise InvalidSetting(f"not a duration: {shown(value)}")
    return parse_duration(value)


def _topic_limits(value: str | Mapping[str, Any] | None) -> dict[str, timedelta]:
    """``time_limits`` (``topic=duration`` pairs, or a mapping) as topic → limit."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        items = [(str(topic), limit) for topic, limit in value.items()]
    else:
        items = []
        for item in str(value).split(","):
            topic, equals, limit = item.partition("=")
            if not equals and item.strip():
                raise InvalidSetting(f"time_limits: {shown(item.strip())} is not topic=duration")
            if equals:
                items.append((topic.strip(), limit.strip()))
    pairs: dict[str, timedelta] = {}
    for topic, limit in items:
        checked = _limit(limit)
        if checked is None:
            raise InvalidSetting(f"time_limits: topic {shown(topic)} has no limit")
        pairs[topic] = checked
    return pairs


def _coerce(f: dataclasses.Field[Any], value: Any) -> Any:
    kind = str(f.type)
    try:
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
        if kind == "bool":
            return (
                value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")
            )
        if kind.startswith("tuple"):
            items = value.split(",") if isinstance(value, str) else value
            return tuple(str(i).strip() for i in items if str(i).strip())
    except (TypeError, ValueError) as error:
        raise InvalidSetting(f"setting {f.name}: {shown(value)} is not a valid {kind}") from error
    return value or None if kind.endswith("None") else value
