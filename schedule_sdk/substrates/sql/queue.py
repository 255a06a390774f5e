"""The embedded ``sql`` substrate: the job store is the delay index.

``SQLExecutionQueue`` has nothing to hand over (the committed row *is* the queue entry); it only
wakes the local poller (:class:`~schedule_sdk.substrates.sql.poller.DuePoller`) when an earlier job is
scheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from schedule_sdk.ports import CommitSignal, ExecutionQueue, Occurrence

Wake = Callable[[datetime | None], None]


class SQLExecutionQueue(ExecutionQueue, CommitSignal):
    name = "sql"
    holds_entries = False

    def __init__(self) -> None:
        self._listeners: list[Wake] = []

    def subscribe(self, wake: Wake) -> Callable[[], None]:
        self._listeners.append(wake)
        return lambda: self._listeners.remove(wake)

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        return None

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        if occurrences:
            earliest = min(o.due_at for o in occurrences)
            for wake in list(self._listeners):
                wake(earliest)

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        return None

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        return []
