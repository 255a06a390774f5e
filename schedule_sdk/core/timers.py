"""``TimerService``: ScheduleTimer commands in, DueTimeReached envelopes out, on the Schedule core.

A timer is a row of ``timer_schedules`` plus a one-shot ``schedule_jobs`` job (topic
``timer.due``, payload ``{tenantId, serviceCallId}``, metadata tenant_id = tenantId, owner_id =
serviceCallId) written in the same transaction. The core fires the job at its due time;
:meth:`TimerService.on_due` then reads the timer row, publishes the envelope, and only then marks
the row Reached (a crash in between gives a duplicate event, never a lost one). A failed publish
fails the fire, and the core retries it.

The invariant: every Scheduled timer has an open job due no later than the timer. Creating arms a
job; moving earlier arms another one; moving later keeps the old job, whose fire sees the timer is
not due yet and arms one at the new time. Extra jobs are harmless: a fire of a Reached timer does
nothing. :meth:`TimerService.heal` re-arms any Scheduled timer left without an open job (its job
exhausted its retries, or another worker fired it), at start and on an interval.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from schedule_sdk.core.write_order import HandOff, write_order
from schedule_sdk.domain.errors import ScheduleUnavailable, ScheduleValidationError
from schedule_sdk.domain.events import ScheduleArrivedEvent
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.jobs import JobMetadata, OneShotSpec, RetryPolicy, ScheduledJob
from schedule_sdk.domain.text import holds_storable_text
from schedule_sdk.domain.timers import (
    TIMER_TOPIC,
    Envelope,
    ScheduleTimer,
    TimerEntry,
    TimerOutcome,
    as_refusal,
    to_ms,
)
from schedule_sdk.ports import (
    Clock,
    ExecutionQueue,
    JobStore,
    JobTransaction,
    MessageBus,
    Metrics,
    Occurrence,
    TimerStore,
)

logger = logging.getLogger(__name__)

Result = TimerOutcome | ScheduleValidationError


class TimerService:
    def __init__(
        self,
        *,
        jobs: JobStore,
        queue: ExecutionQueue,
        timers: TimerStore,
        bus: MessageBus,
        clock: Clock,
        metrics: Metrics,
        retry: RetryPolicy,
    ) -> None:
        self._jobs = jobs
        self._queue = queue
        self._timers = timers
        self._bus = bus
        self._clock = clock
        self._metrics = metrics
        self._retry = retry

    # -- intake ------------------------------------------------------------------------------

    def handle(self, command: ScheduleTimer) -> TimerOutcome:
        """Persist one command (idempotent per ``(tenantId, serviceCallId)``).

        :raises InvalidTimerCommand: refused (e.g. by the host's service_calls foreign key).
        :raises StoreUnavailable: nothing was written.
        """
        self._metrics.increment("timer.commands.received")
        return self._persist([command])[0]

    def handle_each(self, commands: Sequence[ScheduleTimer]) -> list[Result]:
        """Persist many commands in one transaction; if that fails for any reason other than the
        store being unavailable (a refusal, or an exception nobody foresaw), apply them one by one,
        so that only the command at fault is refused. Returns an outcome or the refusal for each
        command, in order.

        :raises ScheduleUnavailable: the store failed (nothing of the failed transaction was written).
        """
        self._metrics.increment("timer.commands.received", len(commands))
        try:
            return list(self._persist(commands))
        except ScheduleUnavailable:
            raise
        except Exception as error:
            if len(commands) == 1:
                return [self._refuse(error)]
        results: list[Result] = []
        for command in commands:
            try:
                results.append(self._persist([command])[0])
            except ScheduleUnavailable:
                raise
            except Exception as error:
                results.append(self._refuse(error))
        return results

    def _refuse(self, error: Exception) -> ScheduleValidationError:
        refusal = as_refusal(error, "persisting the command")
        if refusal is not error:  # not a refusal: a defect somewhere; keep its traceback
            logger.error("persisting a ScheduleTimer command raised %r", error, exc_info=error)
        self.rejected(refusal)
        return refusal

    def malformed(self, error: ScheduleValidationError, raw: bytes | str) -> None:
        """Record a command that could not be parsed (it counts as received, and as rejected)."""
        self._metrics.increment("timer.commands.received")
        self.rejected(error, raw)

    def rejected(self, error: ScheduleValidationError, raw: bytes | str = b"") -> None:
        """Record a refused command (log + ``timer.commands.rejected``)."""
        self._metrics.increment("timer.commands.rejected")
        logger.warning("ScheduleTimer rejected (%s): %s %r", error.code, error, raw[:200])

    def _persist(self, commands: Sequence[ScheduleTimer]) -> list[TimerOutcome]:
        """New timers in bulk (one read of the batch's keys, one multi-row insert); commands for
        existing timers, and repeats of a key within the batch, one by one after them."""
        now = self._clock.now()
        firsts: dict[tuple[str, str], ScheduleTimer] = {}
        for command in commands:
            firsts.setdefault(_key(command), command)
        with self._write() as (tx, armed):
            existing = self._timers.get_many(tx, list(firsts))
            fresh = [self._new_entry(c, now) for key, c in firsts.items() if key not in existing]
            created = self._timers.insert_many(tx, fresh)
            self._arm(tx, [e for e in fresh if (e.tenant_id, e.service_call_id) in created], now, armed)
            outcomes: list[TimerOutcome] = []
            for command in commands:
                key = _key(command)
                if key in created:
                    created.discard(key)  # a repeat of this key later in the batch is applied normally
                    outcomes.append(TimerOutcome.CREATED)
                else:
                    outcomes.append(self._apply(tx, command, now, armed))
            return outcomes

    def _new_entry(self, cmd: ScheduleTimer, now: datetime) -> TimerEntry:
        return TimerEntry(
            tenant_id=cmd.tenant_id,
            service_call_id=cmd.service_call_id,
            correlation_id=cmd.correlation_id or new_id(),
            due_at=cmd.due_at,
            registered_at=to_ms(now),
        )

    def _apply(self, tx: JobTransaction, cmd: ScheduleTimer, now: datetime, armed: HandOff) -> TimerOutcome:
        entry = self._timers.get(cmd.tenant_id, cmd.service_call_id, tx)
        if entry is None:
            new = self._new_entry(cmd, now)
            if self._timers.insert_many(tx, [new]):
                self._arm(tx, [new], now, armed)
                return TimerOutcome.CREATED
            entry = self._timers.get(cmd.tenant_id, cmd.service_call_id, tx)  # a racing insert won
            assert entry is not None
        if entry.reached:
            return TimerOutcome.IGNORED
        if entry.due_at == cmd.due_at:
            return TimerOutcome.UNCHANGED
        self._timers.move(tx, cmd.tenant_id, cmd.service_call_id, cmd.due_at)
        if cmd.due_at < entry.due_at:
            self._arm(tx, [replace(entry, due_at=cmd.due_at)], now, armed)
        return TimerOutcome.MOVED

    # -- firing ------------------------------------------------------------------------------

    def on_due(self, event: ScheduleArrivedEvent) -> None:
        """The listener of ``schedule.timer.due.arrived``: publish, then mark Reached.

        :raises BrokerUnavailable: the publish failed; the core retries the fire.
        """
        started = time.perf_counter()  # schedule.jobs.fired/retried are counted by the core's fire path
        payload = event.user_payload or {}
        entry = self._timers.get(str(payload.get("tenantId")), str(payload.get("serviceCallId")))
        if entry is None or entry.reached:
            return  # a duplicate fire, or the service call (and its timer) was deleted
        now = self._clock.now()
        if entry.due_at > now:  # moved later after this job was armed
            with self._write() as (tx, armed):
                self._rearm(tx, entry, now, armed)
            return
        reached_at = to_ms(now)
        envelope = Envelope.due_time_reached(entry, reached_at)
        self._bus.publish(envelope)
        with self._write() as (tx, armed):
            if not self._timers.mark_reached(tx, entry, reached_at):
                self._rearm(tx, entry, now, armed)  # moved meanwhile: it fires at its new time too
        self._metrics.increment("timer.schedules.processed")
        self._metrics.observe("timer.polling.duration", time.perf_counter() - started)
        self._metrics.observe("timer.lateness", max(0.0, (now - entry.due_at).total_seconds()))

    def heal(self, batch: int = 1000) -> int:
        """Arm a job for every Scheduled timer that has none; return how many."""
        total = 0
        while entries := self._timers.unarmed(TIMER_TOPIC, batch):
            now = self._clock.now()
            with self._write() as (tx, armed):
                self._arm(tx, entries, now, armed)
            total += len(entries)
            if len(entries) < batch:
                break
        if total:
            logger.warning("re-armed %d Scheduled timers that had no job to fire them", total)
        return total

    # -- jobs --------------------------------------------------------------------------------

    def _write(self) -> contextlib.AbstractContextManager[tuple[JobTransaction, HandOff]]:
        """A job store transaction in the core's write order (:mod:`schedule_sdk.core.write_order`)."""
        return write_order(self._jobs, self._queue)

    def _rearm(self, tx: JobTransaction, seen: TimerEntry, now: datetime, armed: HandOff) -> None:
        current = self._timers.get(seen.tenant_id, seen.service_call_id, tx)
        if current is not None and not current.reached:
            self._arm(tx, [current], now, armed)

    def _arm(self, tx: JobTransaction, entries: Sequence[TimerEntry], now: datetime, armed: HandOff) -> None:
        """Insert a one-shot job firing each timer at its due time, and hand it to the queue."""
        jobs = [self._job(entry, now) for entry in entries]
        if not jobs:
            return
        tx.insert_many(jobs)
        armed.enqueue([Occurrence.of(job) for job in jobs])

    def _job(self, entry: TimerEntry, now: datetime) -> ScheduledJob:
        """The one-shot job that fires ``entry`` (at once if it is already due), validated as
        any job is."""
        spec = OneShotSpec(
            topic=TIMER_TOPIC,
            run_at=entry.due_at,
            timezone="UTC",
            payload={"tenantId": entry.tenant_id, "serviceCallId": entry.service_call_id},
            metadata=JobMetadata(
                tenant_id=entry.tenant_id, owner_id=entry.service_call_id, correlation_id=entry.correlation_id
            ),
            retry=self._retry,
        )
        return ScheduledJob.first_of(spec, new_id(), now, past_allowed=True)


def _key(command: ScheduleTimer) -> tuple[str, str]:
    return command.tenant_id, command.service_call_id


class TimerQueries:
    """The read model, always per tenant: "when will this timer fire, and did it?" and
    "all timers of this correlationId"."""

    def __init__(self, timers: TimerStore) -> None:
        self._timers = timers

    def get(self, tenant_id: str, service_call_id: str) -> TimerEntry | None:
        """The timer (``due_at``, ``state``, ``reached_at``), or None if this tenant has none (ids
        holding a NUL or a lone surrogate name no timer: answered without asking the store)."""
        if not (holds_storable_text(tenant_id) and holds_storable_text(service_call_id)):
            return None
        return self._timers.get(tenant_id, service_call_id)

    def by_correlation(self, tenant_id: str, correlation_id: str) -> list[TimerEntry]:
        if not (holds_storable_text(tenant_id) and holds_storable_text(correlation_id)):
            return []
        return self._timers.by_correlation(tenant_id, correlation_id)
