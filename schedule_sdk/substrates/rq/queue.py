"""``RQExecutionQueue``: the ``rq`` substrate's delay index in Redis, in the write order
(docs/explanation/write-order.md).

``enqueue`` (inside the SQL transaction) stages each occurrence in one atomic ``MULTI``; a Redis
error raises :class:`QueueUnavailable` so the row rolls back. ``committed`` (after the commit)
moves the staged entries into the delay index (exact millisecond scores) and wakes the pump if
an entry is earlier than its plan. An occurrence due later than ``stale_after`` goes straight
into the delay index (no transaction lasts that long, so it cannot be released before its row
is visible), which saves the second round trip for the common case. ``withdraw`` (the
compensating removal, and cancel) deletes every trace. An entry is released to RQ only after
its transaction committed, so a worker never looks for a row that is not visible yet.
``stranded`` reports the entries a process that died between two of these steps left behind
(staged, or released and taken out of RQ's queue, for longer than the lease); the reconciler
re-checks them against their rows.

The pump side (``release_due``) pops due entries and pushes RQ jobs for them in the same
``MULTI``: the only callable is the SDK's fire function, the arguments are the queue name and
occurrence keys (plain strings), the serializer is JSON, and a one-occurrence RQ job's id is the
occurrence key itself (a double release overwrites, never duplicates). The job's meta carries the
due instant of its entries (``due_ms``): the pump releases a few ms ahead, and consumers hold a
job until then.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.serializers import JSONSerializer

from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import DelayIndex, ExecutionQueue, Occurrence, OccurrenceRef, key_of
from schedule_sdk.substrates.rq import plumbing
from schedule_sdk.substrates.rq.plumbing import Keys, as_text, parse_key, unavailable_as

if TYPE_CHECKING:
    import redis

    from schedule_sdk.bootstrap.settings import Settings

logger = logging.getLogger(__name__)

SCRIPT_CHUNK = 500  # occurrences per Lua call (keeps ARGV small)
STRANDED_BATCH = 1000  # most stranded entries one look returns
#: A released entry counts as taken out of the RQ queue only if it was released this long before
#: the fire at the queue's head (covers the gap between the pump's clock read and RQ's stamp).
HEAD_MARGIN_MS = 1000.0


def _now_ms() -> float:
    return time.time() * 1000.0


def _ms(occurrence: Occurrence) -> float:
    return occurrence.due_at.timestamp() * 1000.0


class RQExecutionQueue(ExecutionQueue, DelayIndex):
    """The delay index and release path of the ``rq`` substrate (thread-safe): the
    :class:`ExecutionQueue` and :class:`DelayIndex` ports over Redis and RQ."""

    name = "rq"

    def __init__(
        self,
        *,
        redis_url: str,
        queue_name: str = "schedule_sdk",
        batch_size: int = 100,
        stale_after: float = 60.0,
        job_timeout: int = 180,
    ) -> None:
        self.redis_url = redis_url
        self.queue_name = queue_name
        self.keys = Keys(queue_name)
        self.batch_size = batch_size
        #: A staged or released entry older than this many seconds counts as missing (its process
        #: died between two steps); the reconciler then re-enqueues it from the row.
        self.stale_after = stale_after
        self.job_timeout = job_timeout
        self.connection: redis.Redis = plumbing.connect(redis_url)
        self.rq_queue = Queue(queue_name, connection=self.connection, serializer=JSONSerializer)
        self._activate = self.connection.register_script(plumbing.ACTIVATE)
        self._plan = self.connection.register_script(plumbing.PLAN)
        self._discard = self.connection.register_script(plumbing.DISCARD)
        self._missing = self.connection.register_script(plumbing.MISSING)
        self._release_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> RQExecutionQueue:
        assert settings.redis_url is not None
        return cls(
            redis_url=settings.redis_url,
            queue_name=settings.rq_queue,
            stale_after=max(60.0, 2 * settings.lease_seconds),
        )

    # -- the ExecutionQueue port ----------------------------------------------------------------

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        if not occurrences:
            return
        now = _now_ms()
        horizon = now + self.stale_after * 1000.0
        near: dict[str, float] = {}
        far: dict[str, float] = {}
        for occurrence in occurrences:
            due = _ms(occurrence)
            if due > horizon:
                far[occurrence.key] = due
            else:
                near[occurrence.key] = now
        with unavailable_as("could not enqueue in Redis"):
            pipe = self.connection.pipeline(transaction=True)
            if near:
                pipe.zadd(self.keys.staged, near)
            if far:  # due after any transaction has long ended: straight into the delay index
                pipe.zadd(self.keys.delay, far)
            pipe.execute()

    def _far(self, occurrence: Occurrence, now_ms: float) -> bool:
        return _ms(occurrence) > now_ms + self.stale_after * 1000.0

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        now = _now_ms()
        try:
            self.activate([(o.key, _ms(o)) for o in occurrences if not self._far(o, now)])
        except ScheduleError as error:  # the row is committed: the reconciler heals the entry
            logger.warning("could not activate %d entries (%s); reconciler heals", len(occurrences), error)

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        self.forget([o.key for o in occurrences])

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        """One script call per ``SCRIPT_CHUNK`` occurrences, answering with the positions of the
        missing ones only (the reconciler asks about every open row)."""
        fresh = repr(_now_ms() - self.stale_after * 1000.0)
        keys = [self.keys.delay, self.keys.staged, self.keys.released]
        found: list[Occurrence] = []
        with unavailable_as("could not read the delay index"):
            for start in range(0, len(occurrences), SCRIPT_CHUNK):
                chunk = occurrences[start : start + SCRIPT_CHUNK]
                positions = self._missing(keys=keys, args=[fresh, *(o.key for o in chunk)])
                found += [chunk[int(n) - 1] for n in positions]
        return found

    def stranded(self, older_than: float) -> list[OccurrenceRef]:
        """Entries staged more than ``older_than`` seconds ago (their ``committed`` never came), and
        entries released that long ago, taken out of the RQ queue, and still unclaimed (their
        consumer died, or a stock ``rq worker`` did). An entry still waiting in the RQ queue is not
        stranded, however old: it was released before the fire at the queue's head only if it was
        taken (the queue is first in, first out)."""
        cutoff = _now_ms() - older_than * 1000.0
        with unavailable_as("could not read the delay index"):
            pipe = self.connection.pipeline(transaction=False)
            pipe.zrangebyscore(self.keys.staged, "-inf", cutoff, start=0, num=STRANDED_BATCH)
            pipe.zrangebyscore(
                self.keys.released, "-inf", cutoff, start=0, num=STRANDED_BATCH, withscores=True
            )
            pipe.lindex(self.rq_queue.key, 0)
            staged, released, head = pipe.execute()
            if released and head is not None:
                since = self._released_at(as_text(head))
                taken_before = -1.0 if since is None else since - HEAD_MARGIN_MS
                released = [(m, s) for m, s in released if s < taken_before]
        keys = {as_text(m) for m in staged} | {as_text(m) for m, _ in released}
        return [parts for key in sorted(keys) if (parts := parse_key(key)) is not None]

    def _released_at(self, job_id: str) -> float | None:
        """When the RQ job ``job_id`` was pushed (epoch ms), or None if it is gone already."""
        try:
            job = Job.fetch(job_id, connection=self.connection, serializer=JSONSerializer)
        except NoSuchJobError:
            return None
        at = job.enqueued_at
        return None if at is None else at.timestamp() * 1000.0

    def discard_stranded(self, occurrences: Sequence[OccurrenceRef], older_than: float) -> None:
        keys = [key_of(ref) for ref in occurrences]
        cutoff = repr(_now_ms() - older_than * 1000.0)
        try:
            for start in range(0, len(keys), SCRIPT_CHUNK):
                chunk = keys[start : start + SCRIPT_CHUNK]
                self._discard(keys=[self.keys.staged, self.keys.released], args=[cutoff, *chunk])
        except Exception as error:
            logger.warning("could not drop %d stranded entries: %s", len(keys), error)

    # -- the DelayIndex port (the pump and the fire runtimes) ------------------------------------

    def activate(self, entries: Sequence[tuple[str, float]]) -> None:
        """Put ``(key, due ms)`` entries in the delay index (waking the pump if earlier)."""
        keys = [self.keys.staged, self.keys.delay, self.keys.next, self.keys.wake]
        with unavailable_as("could not activate entries in Redis"):
            for start in range(0, len(entries), SCRIPT_CHUNK):
                args: list[Any] = []
                for key, due_ms in entries[start : start + SCRIPT_CHUNK]:
                    args += [key, repr(due_ms)]
                self._activate(keys=keys, args=args)

    def forget(self, members: Sequence[str]) -> None:
        """Remove every trace of these entries (best effort, never raises)."""
        if not members:
            return
        try:
            pipe = self.connection.pipeline(transaction=True)
            for key in (self.keys.staged, self.keys.delay, self.keys.released):
                pipe.zrem(key, *members)
            pipe.execute()
        except Exception as error:
            logger.warning("could not withdraw %d entries from Redis: %s", len(members), error)

    def plan(self) -> float | None:
        """The earliest due score (ms), recorded as the pump's planned wake-up; None if empty."""
        with unavailable_as("could not read the delay index"):
            first = self._plan(keys=[self.keys.delay, self.keys.next])
        return None if first is None else float(first)

    def release_due(self, until_ms: float, limit: int) -> list[str]:
        """Pop up to ``limit`` entries due by ``until_ms`` and push RQ jobs for them, atomically."""
        return self.release(until_ms, limit)[0]

    def release(self, until_ms: float, limit: int) -> tuple[list[str], float | None]:
        """:meth:`release_due`, and then :meth:`plan` in the same ``MULTI`` (one round trip fewer
        per release): the released entries and the earliest score left (None if empty).

        ``until_ms`` may lie a little ahead of now (the pump's ``RELEASE_AHEAD``): entries due
        later than now go into RQ jobs of one due instant each, carried in the job's meta
        (``due_ms``), and a consumer holds such a job until that instant before it claims."""
        with self._release_lock, unavailable_as("could not release due entries"):
            found: list[tuple[Any, float]] = self.connection.zrangebyscore(  # type: ignore[assignment]
                self.keys.delay, "-inf", until_ms, start=0, num=limit, withscores=True
            )
            if not found:
                return [], self.plan()
            now = _now_ms()
            due = [as_text(m) for m, _ in found]
            pipe = self.connection.pipeline(transaction=True)
            pipe.multi()  # explicit, as RQ's enqueue_job expects of a caller's pipeline
            pipe.zrem(self.keys.delay, *due)
            pipe.zadd(self.keys.released, dict.fromkeys(due, min(now, until_ms)))
            for members, due_ms in self._jobs_of(found, now):
                self._push(members, due_ms, pipe)
            # EVAL, not EVALSHA: a script cache emptied by a Redis restart cannot fail the MULTI.
            pipe.eval(plumbing.PLAN, 2, self.keys.delay, self.keys.next)
            first = pipe.execute()[-1]
        return due, None if first is None else float(first)

    def _jobs_of(self, found: Sequence[Any], now_ms: float) -> list[tuple[list[str], float]]:
        """Released ``(member, score)`` entries (in score order) as RQ jobs of at most
        ``batch_size`` members, each with the latest due instant of its members: entries due by
        ``now_ms`` together, later ones one job per due instant (none is held past its own)."""
        jobs: list[tuple[list[str], float]] = []
        group: float | None = None
        for member, raw_score in found:
            score = float(raw_score)
            key = None if score <= now_ms else score
            if not jobs or key != group or len(jobs[-1][0]) >= self.batch_size:
                jobs.append(([], score))
                group = key
            members = jobs[-1][0]
            members.append(as_text(member))
            jobs[-1] = (members, score)  # scores ascend: the latest due of the job
        return jobs

    def _push(self, members: list[str], due_ms: float, pipe: Any) -> None:
        job = self.rq_queue.create_job(
            plumbing.FIRE_FUNCTION,
            args=[self.queue_name, members],
            job_id=batch_id(members),
            result_ttl=0,
            timeout=self.job_timeout,
            description=f"schedule_sdk fire x{len(members)}",
            meta={plumbing.DUE_META: due_ms},
        )
        self.rq_queue.enqueue_job(job, pipeline=pipe)

    def done(self, members: Sequence[str]) -> None:
        """The fire path took these released entries (claimed, or found stale): drop the marks."""
        if members:
            with unavailable_as("could not update released entries"):
                self.connection.zrem(self.keys.released, *members)

    def touch(self, members: Sequence[str]) -> None:
        """Renew the released marks of entries a live consumer holds but cannot claim yet (waiting
        for room), so they are not taken for stranded."""
        if members:
            with unavailable_as("could not update released entries"):
                self.connection.zadd(self.keys.released, dict.fromkeys(members, _now_ms()), xx=True)

    def restore(self, members: Sequence[str]) -> None:
        """Put released entries back in the delay index, due now (a stopping worker's leftovers)."""
        now = _now_ms()
        self.activate([(m, now) for m in members])
        self.done(members)

    def close(self) -> None:
        self.connection.close()


def batch_id(members: Sequence[str]) -> str:
    """The RQ job id of a release: the occurrence key itself for one, a digest for a batch."""
    if len(members) == 1:
        return members[0]
    return "sdkbatch_" + hashlib.sha256("\n".join(members).encode()).hexdigest()[:40]
