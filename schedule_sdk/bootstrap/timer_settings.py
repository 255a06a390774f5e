"""The timer service's settings: the ``TIMER_*`` names of docs/reference/settings.md plus the
broker's stream and subject names, each with its environment variable and default.

Values come from (highest first): the mapping given to :meth:`TimerSettings.load`, then the
environment, then the defaults below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from schedule_sdk.bootstrap.settings import check_pooling, env_var, load_settings
from schedule_sdk.domain.errors import InvalidSetting


@dataclass(frozen=True, kw_only=True)
class TimerSettings:
    #: Safety-net poll interval in milliseconds. The core also wakes exactly at each
    #: due time, so this only bounds how late a missed wake-up can make a timer.
    polling_interval_ms: int = field(default=5000, metadata=env_var("TIMER_POLLING_INTERVAL"))
    #: Most due timers claimed per poll.
    batch_size: int = field(default=100, metadata=env_var("TIMER_BATCH_SIZE"))
    #: The SQLite file (``./event_service.db``), or any SQLAlchemy URL (``postgresql+psycopg://…``).
    db_path: str = field(default="./event_service.db", metadata=env_var("TIMER_DB_PATH"))
    #: What sits between the timer and PostgreSQL, as the Schedule module's ``database_pooler``:
    #: ``none`` (a direct connection, or a pooler in session mode) or ``transaction`` (a pooler in
    #: transaction mode, e.g. PgBouncer with ``pool_mode=transaction``): no server-side prepared
    #: statements, and wake-ups by LISTEN only on ``database_listen_url`` (unset: by polling).
    database_pooler: Literal["none", "transaction"] = field(
        default="none", metadata=env_var("TIMER_DATABASE_POOLER")
    )
    #: A direct PostgreSQL URL (not through a transaction pooler) used only for the timer's LISTEN
    #: wake-ups (one connection). Unset: LISTEN on ``db_path``'s database, or, with
    #: ``database_pooler=transaction``, no LISTEN (the timer re-reads every ``polling_interval_ms``).
    database_listen_url: str | None = field(default=None, metadata=env_var("TIMER_DATABASE_LISTEN_URL"))
    #: ``nats://host:port`` for NATS JetStream; ``inprocess`` (or empty) for in-process adapters.
    broker_url: str = field(default="nats://localhost:4222", metadata=env_var("TIMER_BROKER_URL"))
    #: JetStream stream holding ScheduleTimer commands, and their subject.
    command_stream: str = field(default="TIMER_COMMANDS", metadata=env_var("TIMER_COMMAND_STREAM"))
    command_subject: str = field(default="timer.commands.schedule", metadata=env_var("TIMER_COMMAND_SUBJECT"))
    #: Durable consumer name of the timer service on the command stream.
    consumer: str = field(default="timer-service", metadata=env_var("TIMER_CONSUMER"))
    #: JetStream stream the DueTimeReached envelopes go to, and their subject.
    event_stream: str = field(default="TIMER_EVENTS", metadata=env_var("TIMER_EVENT_STREAM"))
    event_subject: str = field(
        default="timer.events.due-time-reached", metadata=env_var("TIMER_EVENT_SUBJECT")
    )
    #: Where refused commands are copied (with the error in headers); empty: nowhere.
    dead_letter_subject: str = field(default="", metadata=env_var("TIMER_DEAD_LETTER_SUBJECT"))
    #: Deliveries of one command before it is given up on (dead-lettered and terminated) while the
    #: store keeps failing; a malformed command is refused at its first delivery regardless.
    max_deliver: int = field(default=20, metadata=env_var("TIMER_MAX_DELIVER"))
    #: Seconds JetStream waits for a fetched command to be acked before delivering it again.
    ack_wait: float = field(default=30.0, metadata=env_var("TIMER_ACK_WAIT"))
    #: Create streams that do not exist yet (off: they must be provisioned beforehand).
    create_streams: bool = field(default=True, metadata=env_var("TIMER_CREATE_STREAMS"))
    #: Commands fetched and persisted per transaction.
    intake_batch: int = field(default=256, metadata=env_var("TIMER_INTAKE_BATCH"))
    #: Seconds to wait for JetStream to accept a publish.
    publish_timeout: float = field(default=5.0, metadata=env_var("TIMER_PUBLISH_TIMEOUT"))
    #: Create the foreign key to the host's service_calls table (when migration 0002 runs).
    service_calls_fk: bool = field(default=False, metadata=env_var("TIMER_SERVICE_CALLS_FK"))
    #: Fires retried this many times (``retry_delay_ms`` apart) while the broker is down, then healed.
    retry_attempts: int = field(default=100, metadata=env_var("TIMER_RETRY_ATTEMPTS"))
    retry_delay_ms: int = field(default=1000, metadata=env_var("TIMER_RETRY_DELAY_MS"))
    #: Seconds between heal passes (re-arming Scheduled timers left without a job); 0: only at start.
    heal_interval: float = field(default=60.0, metadata=env_var("TIMER_HEAL_INTERVAL"))
    #: A dead timer service's in-flight fires are retried after this many seconds.
    lease_seconds: float = field(default=30.0, metadata=env_var("TIMER_LEASE_SECONDS"))
    #: Threads publishing due timers concurrently.
    concurrency: int = field(default=8, metadata=env_var("TIMER_CONCURRENCY"))
    #: Serve Prometheus metrics on this port (0: off).
    metrics_port: int = field(default=0, metadata=env_var("TIMER_METRICS_PORT"))

    def __post_init__(self) -> None:
        for name in (
            "polling_interval_ms",
            "batch_size",
            "intake_batch",
            "retry_attempts",
            "concurrency",
            "max_deliver",
        ):
            if getattr(self, name) < 1:
                raise InvalidSetting(f"{name} must be at least 1")
        for name in ("publish_timeout", "lease_seconds", "ack_wait"):
            if getattr(self, name) <= 0:
                raise InvalidSetting(f"{name} must be positive")
        check_pooling(self.database_pooler, self.database_url, self.database_listen_url, url_name="db_path")

    @property
    def database_url(self) -> str:
        return self.db_path if "://" in self.db_path else f"sqlite:///{self.db_path}"

    @property
    def in_process(self) -> bool:
        return self.broker_url.strip().lower() in ("", "inprocess", "in-process", "memory")

    @classmethod
    def load(
        cls, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> TimerSettings:
        """Timer settings from ``overrides``, then ``environ`` (default ``os.environ``), then defaults."""
        return load_settings(cls, overrides, environ, what="timer setting")
