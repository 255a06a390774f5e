"""The execution queue the store hands occurrences to, and the delay index of queues that hold
entries until their due instant.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from schedule_sdk.ports.store import Occurrence, OccurrenceRef


class ExecutionQueue(ABC):
    """The execution substrate: holds timing for each due occurrence (docs/explanation/write-order.md).

    The write order is: open a store transaction, write the row, ``enqueue`` inside it, commit,
    then ``committed``. If ``enqueue`` raises, the transaction rolls back; if the commit fails
    after ``enqueue``, the caller calls ``withdraw`` (the compensating removal) and the
    reconciler heals anything left over.
    """

    name: str = "queue"
    #: False when the store itself is the queue (the ``sql`` substrate): no entry can be missing,
    #: so a worker starting skips the reconciler's scan of every open row.
    holds_entries: bool = True

    @abstractmethod
    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        """Hand these occurrences over, each to fire at or after its ``due_at`` (never before).
        Idempotent per ``Occurrence.key``.

        :raises QueueUnavailable: the substrate cannot take them; nothing was handed over.
        """

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        """Called after the transaction that enqueued ``occurrences`` committed (optional hook)."""
        return None

    @abstractmethod
    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        """Remove these entries if present (best effort, never raises for missing entries)."""

    @abstractmethod
    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        """Those of ``occurrences`` that have no entry in the substrate (for the reconciler)."""

    def stranded(self, older_than: float) -> list[OccurrenceRef]:
        """Occurrences whose entries have waited more than ``older_than`` seconds in a step some
        process should have finished (handed over in a transaction whose ``committed`` never came,
        or taken for firing and never claimed): that process may have died. The reconciler
        re-checks each against the store. Default: none (entries that cannot be stranded)."""
        return []

    def discard_stranded(self, occurrences: Sequence[OccurrenceRef], older_than: float) -> None:
        """Drop the stranded entries of these occurrences whose rows moved on, keeping any that
        was handed over again in the last ``older_than`` seconds (best effort, never raises)."""
        return None

    def incarnation(self) -> str | None:
        """Which server state holds the entries now: a value that changes when entries may have
        been lost wholesale (the substrate failed over to a replica that had not received the
        latest writes, restarted without them, or its data was deleted, as a Redis ``FLUSHDB``
        does). A worker's maintenance beat compares it with the one it saw last and, when it
        changed, reconciles at once. It must cost the same whatever the number of entries (it is
        read at every beat). Default: None (nothing can be lost that way, e.g. the store is the
        queue).

        :raises QueueUnavailable: the substrate did not answer.
        """
        return None

    def loss_reason(self, before: str, now: str) -> str:
        """Why the :meth:`incarnation` changed from ``before`` to ``now``, in words (for the log
        and the health check)."""
        return f"the {self.name} substrate's server changed (a failover or a restart)"

    def note_heal(self, note: HealNote) -> None:
        """Keep where the health check (and :meth:`heal_of`) reads it how the heal of a loss
        goes (best effort, never raises). Default: nothing kept."""
        return None

    def heal_of(self, incarnation: str) -> str | None:
        """What another worker noted of a heal of ``incarnation``: ``"done"`` (it handed over
        every entry missing after that loss: nothing is left to heal for it), ``"under way"``
        (it is healing now; look again at the next beat), or None (no heal of it is known: heal).
        Default: None.

        :raises QueueUnavailable: the substrate did not answer.
        """
        return None

    def risks(self) -> list[str]:
        """How the substrate's configuration could lose entries (one line each, e.g. an eviction
        policy that may evict them), for the health check and the log of a starting worker.
        Default: none.

        :raises QueueUnavailable: the substrate did not answer.
        """
        return []


@dataclass(frozen=True, slots=True)
class HealNote:
    """A heal of entries the substrate lost (:meth:`ExecutionQueue.note_heal`): found at
    ``lost_at`` (epoch seconds) for ``reason``; ``healed`` entries handed over again so far (all
    of them once ``done``), in ``took`` seconds; ``incarnation``: the one it heals (what
    :meth:`ExecutionQueue.incarnation` returned after the loss)."""

    lost_at: float
    reason: str
    healed: int = 0
    took: float = 0.0
    done: bool = False
    incarnation: str = ""


class CommitSignal(ABC):
    """A queue that tells runners in this process when a commit handed over an occurrence (the
    ``sql`` substrate's queue: its poller then re-plans at once instead of at its next read)."""

    @abstractmethod
    def subscribe(self, wake: Callable[[datetime | None], None]) -> Callable[[], None]:
        """Call ``wake(due_at)`` after each commit that handed occurrences over (``due_at``: the
        earliest of them; None when unknown), on the committing thread; return a function that
        unsubscribes. ``wake`` must not block."""


@dataclass(frozen=True, slots=True)
class ReleasedBatch:
    """Entries the delay index released together, as a consumer pops them
    (:meth:`DelayIndex.pop_released`): ``members`` are occurrence keys; a consumer holds the
    batch until ``due_ms`` (epoch ms; None: fire at once) before it claims them."""

    id: str
    members: list[str]
    due_ms: float | None


class WakeUps(ABC):
    """A subscription to a delay index's wake-ups (:meth:`DelayIndex.wakeups`)."""

    @abstractmethod
    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds (never much longer: a few ms at most) for a wake-up;
        True when one came (an entry earlier than the releaser's plan was activated, or
        :meth:`DelayIndex.nudge`). False may come early without one: a caller waiting for an
        instant waits again for the rest.

        :raises QueueUnavailable: the subscription is lost (close it and subscribe again).
        """

    @abstractmethod
    def close(self) -> None:
        """End the subscription (never raises)."""


class DelayIndex(ABC):
    """The delay index of a substrate that releases due entries by itself (the ``rq`` substrate:
    :class:`~schedule_sdk.substrates.rq.queue.RQExecutionQueue`): what its releaser (the pump),
    its consumer and its fire runtimes (``schedule_sdk/substrates/rq/``) call besides the
    :class:`ExecutionQueue` methods; they see the backend through this port only.

    An entry is an occurrence key (:attr:`Occurrence.key`) with a due instant in epoch
    milliseconds. An entry is *delayed* until released, then *released* (marked, handed to the
    consumers) until the fire path is ``done`` with it. One releaser at a time releases entries:
    the holder of the releaser lease (:meth:`lead`). Raises ``QueueUnavailable`` unless a method
    says it never raises.
    """

    #: The name workers check a released batch against (a batch of another queue is refused).
    queue_name: str

    @abstractmethod
    def activate(self, entries: Sequence[tuple[str, float]]) -> None:
        """Put ``(key, due ms)`` entries in the delay index (an entry already there moves to the
        new due instant; a releaser waiting past the earliest is woken through :meth:`wakeups`)."""

    @abstractmethod
    def release(self, until_ms: float, limit: int) -> tuple[list[str], float | None]:
        """Release up to ``limit`` entries due at or before ``until_ms`` (never one due later),
        earliest first, to the consumers, atomically; return them and the earliest due ms left
        (None: none left), recorded as the releaser's plan (so an activation earlier than it
        wakes the releaser). ``until_ms`` may be a few ms ahead of now: the released entries then
        carry their due instant (:attr:`ReleasedBatch.due_ms`), and consumers hold them until it
        before claiming."""

    @abstractmethod
    def plan(self) -> float | None:
        """The earliest due ms in the index (None: empty), recorded as the releaser's plan."""

    @abstractmethod
    def pop_released(self, limit: int, timeout: float, done: Sequence[str] = ()) -> list[ReleasedBatch]:
        """Take up to ``limit`` released batches off the consumers' queue, in release order,
        waiting up to ``timeout`` seconds for the first (``[]``: none came). A batch is taken
        once: no other consumer gets it. Batches that are not this queue's fires are refused
        (logged, dropped). The released marks of ``done`` (entries the fire path took, see
        :meth:`done`) are dropped on the way, in the same round trip as the pop when one came;
        when this raises, none of them counts as dropped."""

    @abstractmethod
    def done(self, members: Sequence[str]) -> None:
        """The fire path took these released entries (claimed them, or found them stale)."""

    @abstractmethod
    def touch(self, members: Sequence[str]) -> None:
        """Renew the released marks of entries a live worker holds but has not claimed yet, so
        they are not reported as stranded."""

    @abstractmethod
    def restore(self, members: Sequence[str]) -> None:
        """Put released entries back in the delay index, due now (a stopping worker's leftovers)."""

    @abstractmethod
    def forget(self, members: Sequence[str]) -> None:
        """Remove every trace of these entries (best effort, never raises)."""

    # -- the releaser: one at a time, woken when an earlier entry comes -------------------------

    @abstractmethod
    def lead(self, token: str, ttl: float) -> bool:
        """Take the releaser lease for ``token`` (``<worker id>/<32 hex digits>``) if nobody holds
        it, or renew it if ``token`` holds it, for ``ttl`` seconds; True while ``token`` holds it."""

    @abstractmethod
    def resign(self, token: str) -> None:
        """Give the lease up if ``token`` still holds it (else leave it alone)."""

    @abstractmethod
    def depose(self, worker_ids: Sequence[str]) -> bool:
        """Delete the lease if its token names one of these (dead) workers exactly; True if it did."""

    @abstractmethod
    def wakeups(self) -> WakeUps:
        """Subscribe to the wake-ups (a releaser subscribes while it holds the lease)."""

    @abstractmethod
    def nudge(self) -> None:
        """Wake every subscriber now (a stopping releaser; best effort, never raises)."""
