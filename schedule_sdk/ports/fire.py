"""The fire path: listener registry, event publishing, the runner and dispatcher a fire goes through."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from schedule_sdk.domain.events import (
    ScheduleArrivedEvent,
    ScheduleEvent,
    ScheduleFailedEvent,
    ScheduleMissedEvent,
)
from schedule_sdk.domain.history import FireRecord
from schedule_sdk.domain.jobs import ScheduledJob


class Listeners(ABC):
    """This process's ``@on_event`` listeners, as an event publisher reaches them
    (:class:`~schedule_sdk.ListenerRegistry` is the one implementation)."""

    @abstractmethod
    def deliver(self, event: ScheduleEvent) -> int:
        """Run every listener of ``event``'s names, each isolated from the others; an ``async def``
        listener runs to completion on the registry's listener loop while this thread waits.
        Returns how many listeners ran (0: nobody heard the event here).

        :raises ListenerFailed: after all listeners ran, if any of them raised.
        """

    @abstractmethod
    def count(self) -> int:
        """How many listeners are bound, over every event name (0: a worker would hear nothing)."""


class EventPublisher(ABC):
    """Delivers an arrived event to the listeners of both of its names."""

    @abstractmethod
    def publish(self, event: ScheduleArrivedEvent) -> int | None:
        """Emit ``schedule.arrived`` and ``schedule.<topic>.arrived`` with ``event``.

        Every listener runs even if an earlier one raised. Returns how many listeners heard it:
        0 makes the fire ``unheard`` in the fire history; None (a publisher that cannot tell)
        counts as heard.

        :raises ListenerFailed: at least one listener raised (the fire is then retried as a whole).
        """

    def publish_missed(self, event: ScheduleMissedEvent) -> None:
        """Emit ``schedule.missed`` and ``schedule.<topic>.missed`` with ``event`` (occurrences
        the job's misfire policy skipped or coalesced, or its overlap policy did not fire; see
        ``event.reason``). Optional: the default drops the event
        (the fire path logs it anyway). Listener failures may raise ``ListenerFailed``; the fire
        path logs them and does not retry."""
        return None

    def publish_failed(self, event: ScheduleFailedEvent) -> None:
        """Emit ``schedule.failed`` and ``schedule.<topic>.failed`` with ``event`` (a job gave
        up). The fire path calls it from a notice row's fire: a ``ListenerFailed`` (or any
        error) fails that fire, which its retry policy repeats (at-least-once).

        :raises NotImplementedError: the default: a publisher that cannot deliver it (the
            notice's fire fails and is retried, then recorded as failed).
        """
        raise NotImplementedError(f"{type(self).__name__} does not deliver schedule.failed events")

    def close(self) -> None:
        """Release connections and threads (optional hook)."""
        return None


class Runner(Protocol):
    """What an execution substrate runs inside a worker: the due poller
    (:class:`~schedule_sdk.substrates.sql.poller.DuePoller`) or the rq pump and consumer
    (:class:`~schedule_sdk.substrates.rq.runner.RQRunner`). Both calls return promptly."""

    def start(self) -> None:
        """Start driving fires (threads of its own)."""
        ...

    def stop(self) -> None:
        """Stop driving fires; in-flight fires are the dispatcher's to finish or release."""
        ...

    def peers_dead(self, worker_ids: Sequence[str]) -> None:
        """These workers were just declared dead: take over what only they were doing (the rq
        pump's lock). Must not raise for a backend error."""
        ...


@dataclass(frozen=True, slots=True)
class FireResult:
    """A finished fire: the job as claimed, the state to record, and the fire history entry
    written with it (None: nothing ran, e.g. a substrate that records no history)."""

    claimed: ScheduledJob
    outcome: ScheduledJob
    fire: FireRecord | None = None
    #: The history entry of the occurrences that came due while this fire ran and that the
    #: job's overlap policy did not fire (``skipped``), written with it; None: there were none.
    overlapped: FireRecord | None = None
    #: The run that fires this occurrence (a job with the overlap policy ``allow`` hands each
    #: occurrence to a one-shot row of its own, ``ScheduledJob.run_of``): inserted and handed
    #: to the queue with the outcome, only if the outcome is written (the row was still claimed
    #: by the firing worker for this occurrence); None: the listeners ran here.
    run: ScheduledJob | None = None
    #: The row changed before the job was due (cancelled, paused, rescheduled, released): no
    #: listener ran and nothing is recorded (``outcome`` is the job as claimed).
    withdrawn: bool = False


class FirePath(ABC):
    """The core's fire path (:class:`~schedule_sdk.core.firing.Firing`): what a substrate that
    fires claimed jobs itself (``inline``, the rq job function) calls."""

    @abstractmethod
    def run(self, job: ScheduledJob) -> FireResult:
        """Fire a job claimed by the caller (its listeners run); never raises for a listener's
        error (the result says retry or fail)."""

    @abstractmethod
    def record(self, results: Sequence[FireResult]) -> None:
        """Record these fires' outcomes in one transaction, in the write order (next occurrences,
        retries and runs are handed to the queue); rows no longer claimed by the firing worker
        are left alone (and their runs are not inserted).

        :raises StoreUnavailable, QueueUnavailable: nothing was recorded; the fires repeat once
            their claims expire.
        """

    def fire(self, job: ScheduledJob) -> FireResult:
        """:meth:`run` then :meth:`record` one claimed job."""
        result = self.run(job)
        self.record([result])
        return result


class Dispatcher(ABC):
    """Where a substrate's runner hands the jobs it claimed
    (:class:`~schedule_sdk.core.dispatch.FireDispatcher`): they run on the worker's listener pool
    and their outcomes are recorded in batches; the dispatcher holds each claim until its outcome
    is recorded, or releases it at stop."""

    #: The worker the runner claims for (``claimed_by``).
    worker_id: str
    #: Called (from any thread) whenever capacity frees up; a runner sets it to wake its loop.
    on_capacity: Callable[[], None]
    #: Called with the jobs a stopping dispatcher returned to pending, so a substrate whose entry
    #: was consumed (``rq``) can hand them over again; a runner sets it.
    on_release: Callable[[list[ScheduledJob]], None]

    @abstractmethod
    def capacity(self) -> int:
        """How many more claimed jobs it accepts now (0 or less: wait for ``on_capacity``)."""

    @abstractmethod
    def submit(self, jobs: Sequence[ScheduledJob]) -> None:
        """Fire these jobs (claimed by ``worker_id``) in the background."""
