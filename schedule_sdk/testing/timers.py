"""``MemoryTimerStore``: the timer store (:class:`~schedule_sdk.ports.TimerStore`) in a dict,
sharing the transactions of a :class:`~schedule_sdk.adapters.memory.MemoryJobStore`.

Writes made in a job store transaction are applied when it commits and dropped when it rolls back,
so a timer and the job that fires it commit together, as on the SQL stores. Reads outside a
transaction see committed timers only. It passes the timer store contract suite
(:mod:`schedule_sdk.testing.contracts.timer_store`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from schedule_sdk.adapters.memory import MemoryJobStore, MemoryTransaction
from schedule_sdk.domain.jobs import JobQuery
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.timers import TimerEntry, TimerState
from schedule_sdk.ports import JobTransaction, TimerStore

Key = tuple[str, str]
_MS = 1000


def _copy(entry: TimerEntry) -> TimerEntry:
    """``entry`` as the SQL store keeps it: aware UTC, milliseconds."""

    def ms(value: datetime | None) -> datetime | None:
        if value is None:
            return None
        value = value.astimezone(UTC)
        return value.replace(microsecond=value.microsecond // _MS * _MS)

    return TimerEntry(
        tenant_id=entry.tenant_id,
        service_call_id=entry.service_call_id,
        correlation_id=entry.correlation_id,
        due_at=ms(entry.due_at) or entry.due_at,
        registered_at=ms(entry.registered_at) or entry.registered_at,
        reached_at=ms(entry.reached_at),
        state=entry.state,
    )


class MemoryTimerStore(TimerStore):
    """Timers in a dict, written inside ``jobs``' transactions (thread-safe)."""

    def __init__(self, jobs: MemoryJobStore) -> None:
        self.jobs = jobs
        self._rows: dict[Key, TimerEntry] = {}
        self._lock = threading.Lock()

    # -- transactions ------------------------------------------------------------------------

    def _staged(self, tx: JobTransaction) -> dict[Key, TimerEntry]:
        if not isinstance(tx, MemoryTransaction):
            raise TypeError("MemoryTimerStore needs a MemoryJobStore transaction")
        if self not in tx.staged:
            changes: dict[Key, TimerEntry] = {}
            tx.staged[self] = changes
            tx.on_commit.append(lambda: self._apply(changes))
        staged: dict[Key, TimerEntry] = tx.staged[self]
        return staged

    def _apply(self, changes: dict[Key, TimerEntry]) -> None:
        with self._lock:
            self._rows.update(changes)

    def _committed(self) -> dict[Key, TimerEntry]:
        with self._lock:
            return dict(self._rows)

    def _current(self, tx: JobTransaction, key: Key) -> TimerEntry | None:
        return self._staged(tx).get(key) or self._committed().get(key)

    # -- the port ----------------------------------------------------------------------------

    def get(
        self, tenant_id: str, service_call_id: str, tx: JobTransaction | None = None
    ) -> TimerEntry | None:
        key = (tenant_id, service_call_id)
        return self._committed().get(key) if tx is None else self._current(tx, key)

    def get_many(self, tx: JobTransaction, keys: Sequence[Key]) -> dict[Key, TimerEntry]:
        found = {key: self._current(tx, key) for key in keys}
        return {key: entry for key, entry in found.items() if entry is not None}

    def insert_many(self, tx: JobTransaction, entries: Sequence[TimerEntry]) -> set[Key]:
        inserted: set[Key] = set()
        for entry in entries:
            key = (entry.tenant_id, entry.service_call_id)
            if self._current(tx, key) is None:
                self._staged(tx)[key] = _copy(entry)
                inserted.add(key)
        return inserted

    def move(self, tx: JobTransaction, tenant_id: str, service_call_id: str, due_at: datetime) -> bool:
        return self._change(tx, (tenant_id, service_call_id), if_due=None, due_at=due_at)

    def mark_reached(self, tx: JobTransaction, entry: TimerEntry, reached_at: datetime) -> bool:
        key = (entry.tenant_id, entry.service_call_id)
        return self._change(
            tx, key, if_due=_copy(entry).due_at, state=TimerState.REACHED, reached_at=reached_at
        )

    def _change(self, tx: JobTransaction, key: Key, *, if_due: datetime | None, **values: Any) -> bool:
        current = self._current(tx, key)
        if current is None or current.state is not TimerState.SCHEDULED:
            return False
        if if_due is not None and current.due_at != if_due:
            return False
        self._staged(tx)[key] = _copy(dataclasses.replace(current, **values))
        return True

    def find_due(self, tenant_id: str, now: datetime, limit: int = 100) -> list[TimerEntry]:
        due = [
            e
            for e in self._committed().values()
            if e.tenant_id == tenant_id and e.state is TimerState.SCHEDULED and e.due_at <= now
        ]
        return sorted(due, key=lambda e: e.due_at)[:limit]

    def by_correlation(self, tenant_id: str, correlation_id: str) -> list[TimerEntry]:
        found = [
            e
            for e in self._committed().values()
            if e.tenant_id == tenant_id and e.correlation_id == correlation_id
        ]
        return sorted(found, key=lambda e: (e.due_at, e.service_call_id))

    def unarmed(self, topic: str, limit: int) -> list[TimerEntry]:
        armed: set[Key] = set()
        after: str | None = None
        open_ = frozenset({JobStatus.PENDING, JobStatus.ACTIVE})
        while page := self.jobs.list_jobs(JobQuery(topic=topic, statuses=open_, limit=500, after_id=after)):
            after = page[-1].id
            for job in page:
                if job.metadata.tenant_id is not None and job.metadata.owner_id is not None:
                    armed.add((job.metadata.tenant_id, job.metadata.owner_id))
        left = [
            e for key, e in self._committed().items() if e.state is TimerState.SCHEDULED and key not in armed
        ]
        return sorted(left, key=lambda e: e.due_at)[:limit]
