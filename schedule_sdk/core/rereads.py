"""``Rereads``: the fire path's reads of jobs claimed ahead of their due instant, made once they
are due, several jobs to one statement (:meth:`~schedule_sdk.ports.JobStore.still_claimed_many`).

A claim made ahead of a job's due instant may not have seen a cancel, a pause or a reschedule
committed before that instant, so the fire path reads the job's row again once it is due. Jobs
claimed together are often due together (a burst due at one instant): each of them read on its
own would queue one round trip per job on the claims' connections. Here the first fire to need
its read reads, in the same statement, every other job the dispatcher handed over
(:meth:`expect`) that is due by then; the fires of those jobs take that answer instead of a read
of their own.

The rule every answer keeps: the read that answers for a job started after the job's due instant
(:func:`~schedule_sdk.core.claim_timing.due_instant`) had passed on the store's clock as the fire's
hold reads it, so it saw every write committed before that instant. A job due later than the
instant a read starts is left out of it and read again later, by its own fire or by another read
it is due for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from schedule_sdk.core.claim_timing import claimed_ahead, due_instant
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import Clock, JobStore

logger = logging.getLogger(__name__)

#: A claim as a read answers for it: the job's id, claimer, occurrence and attempt.
_Key = tuple[str, str | None, int, int]


def _key(job: ScheduledJob) -> _Key:
    return (job.id, job.claimed_by, job.occurrence, job.attempt)


class Rereads:
    """The reads of claimed-ahead jobs once due, shared between the fire path's threads."""

    def __init__(self, store: JobStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._lock = threading.Condition()
        #: Claimed ahead, handed over, and not read yet (in the order handed over).
        self._expected: dict[_Key, ScheduledJob] = {}
        #: In a read that has not answered yet.
        self._reading: set[_Key] = set()
        #: Answered by a read made for another job's fire, not asked for by their own fire yet.
        self._answers: dict[_Key, bool] = {}

    def expect(self, jobs: Sequence[ScheduledJob]) -> None:
        """Jobs handed over to be fired (claimed by this process): those claimed ahead are read
        with the first read made once they are due."""
        ahead = [job for job in jobs if claimed_ahead(job, self._clock)]
        if ahead:
            with self._lock:
                for job in ahead:
                    self._expected[_key(job)] = job

    def forget(self, jobs: Sequence[ScheduledJob]) -> None:
        """Jobs that will not be fired here after all (released, or their fire crashed)."""
        with self._lock:
            for job in jobs:
                key = _key(job)
                self._expected.pop(key, None)
                self._answers.pop(key, None)

    def still_claimed(self, job: ScheduledJob, now: Callable[[], datetime]) -> bool:
        """Whether ``job`` (due by ``now()``, an instant known to have passed on the store's
        clock) is still as claimed, by a read started after its due instant: a read already
        made or under way for it, else one made now for it and every expected job due by then.
        False when the store does not answer (logged): the job fires again once its claim
        expires."""
        key = _key(job)
        with self._lock:
            while key in self._reading:  # a read that covers it is under way
                self._lock.wait()
            answer = self._answers.pop(key, None)
            if answer is not None:
                return answer
            self._expected.pop(key, None)
            started = now()  # the read starts after this instant: it covers jobs due by then
            batch = [job] + [other for other in self._expected.values() if due_instant(other) <= started]
            for other in batch[1:]:
                del self._expected[_key(other)]
            self._reading.update(_key(other) for other in batch)
        answers: Sequence[bool] = [False] * len(batch)
        try:
            answers = self._store.still_claimed_many(batch)
        except ScheduleError as error:
            logger.warning(
                "could not read %d claimed jobs again before their fire (%s); "
                "they fire once their claims expire",
                len(batch),
                error,
            )
        finally:
            with self._lock:
                for other, held in zip(batch[1:], answers[1:], strict=True):
                    self._answers[_key(other)] = held
                self._reading.difference_update(_key(other) for other in batch)
                self._lock.notify_all()
        return answers[0]
