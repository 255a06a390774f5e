"""The Timer's ports: where timers are kept and the bus commands and due messages travel on."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from schedule_sdk.domain.errors import ScheduleValidationError
from schedule_sdk.domain.timers import Envelope, ScheduleTimer, TimerEntry
from schedule_sdk.ports.store import JobTransaction


class TimerStore(ABC):
    """``timer_schedules``. Every method that serves a tenant takes ``tenant_id`` and filters by it;
    writes run inside the job store's transaction (``tx``), so a timer row and the job that fires
    it commit together.

    :raises StoreUnavailable: the database is unreachable or failed.
    """

    @abstractmethod
    def get(
        self, tenant_id: str, service_call_id: str, tx: JobTransaction | None = None
    ) -> TimerEntry | None:
        """The tenant's timer, or None (inside ``tx``: locked until it ends)."""

    @abstractmethod
    def get_many(
        self, tx: JobTransaction, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], TimerEntry]:
        """The timers of these ``(tenant_id, service_call_id)`` keys that exist, locked until ``tx`` ends."""

    @abstractmethod
    def insert_many(self, tx: JobTransaction, entries: Sequence[TimerEntry]) -> set[tuple[str, str]]:
        """Insert each entry unless its tenant already has a timer for its serviceCallId; return
        the keys inserted.

        :raises InvalidTimerCommand: the host's ``service_calls`` foreign key refused one of them.
        """

    @abstractmethod
    def move(self, tx: JobTransaction, tenant_id: str, service_call_id: str, due_at: datetime) -> bool:
        """Set the due time of the tenant's timer if it is still Scheduled; return whether it did."""

    @abstractmethod
    def mark_reached(self, tx: JobTransaction, entry: TimerEntry, reached_at: datetime) -> bool:
        """Mark the timer Reached if it is still Scheduled *and still due at* ``entry.due_at``
        (a move that landed meanwhile wins); return whether it did."""

    @abstractmethod
    def find_due(self, tenant_id: str, now: datetime, limit: int = 100) -> list[TimerEntry]:
        """The tenant's Scheduled timers due at or before ``now``, earliest first."""

    @abstractmethod
    def by_correlation(self, tenant_id: str, correlation_id: str) -> list[TimerEntry]:
        """The tenant's timers carrying ``correlation_id``, earliest due first."""

    @abstractmethod
    def unarmed(self, topic: str, limit: int) -> list[TimerEntry]:
        """Scheduled timers (any tenant: a maintenance query) with no pending or active job of
        ``topic`` for them: nothing would fire them. Used to heal."""


class MessageBus(ABC):
    """Where DueTimeReached envelopes go."""

    @abstractmethod
    def publish(self, envelope: Envelope) -> None:
        """Publish ``envelope``; return only once the broker has accepted it.

        :raises BrokerUnavailable: not accepted (the fire is retried).
        """

    def close(self) -> None:
        return None


class CommandSink(Protocol):
    """What a command source hands commands to (the :class:`~schedule_sdk.core.timers.TimerService`)."""

    def handle_each(self, commands: Sequence[ScheduleTimer]) -> Sequence[object]:
        """Persist ``commands`` before returning; one result per command: an outcome, or the
        :class:`ScheduleValidationError` that refused it.

        :raises StoreUnavailable: nothing was persisted (the source should redeliver).
        """
        ...

    def malformed(self, error: ScheduleValidationError, raw: bytes | str) -> None:
        """Record a message that is not a valid command."""
        ...


class CommandSource(ABC):
    """Where ScheduleTimer commands come from. A source acknowledges a command only after
    ``sink.handle_each`` persisted it; it terminates (never redelivers) a malformed one."""

    @abstractmethod
    def start(self, sink: CommandSink) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...
