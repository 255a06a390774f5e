"""``RQExecutionQueue``: the ``rq`` substrate's delay index in Redis, in the write order
(docs/explanation/write-order.md): every Redis and RQ call of the substrate's fire side.

The hand-off (``enqueue``, ``committed``, ``withdraw``, ``missing``) follows the rules of
:class:`~schedule_sdk.substrates.rq.handoff.RedisHandOff`, shared with the asyncio hand-off. An
entry is released to RQ only after its transaction committed, so a worker never looks for a row
that is not visible yet. ``stranded`` reports the entries a process that died between two steps
left behind (staged, or released and taken out of RQ's queue, for longer than the lease); the
reconciler re-checks them against their rows.

The :class:`~schedule_sdk.ports.DelayIndex` side is what the pump, the consumer and the fire
runtimes call. ``release`` pops due entries and pushes RQ jobs for them in the same ``MULTI``:
the only callable is the SDK's fire function, the arguments are the queue name and occurrence
keys (plain strings), the serializer is JSON, and a one-occurrence RQ job's id is the occurrence
key itself (a double release overwrites, never duplicates). The job's meta carries the due
instant of its entries (``due_ms``): the pump releases a few ms ahead, and consumers hold a job
until then. ``pop_released`` is the consumer's pop: ``BLPOP`` with a timeout, then one ``MULTI``
that pops up to ``limit`` more, reads and deletes the first job's hash and clears the released
marks of the entries already fired (two round trips per pop at steady rates); jobs are parsed
with RQ's own ``Job`` class and the JSON serializer (nothing is unpickled), and any job that does
not decode, or whose function is not the SDK's fire function of this queue, is refused alone:
set aside under the ``refused`` key (its id, the reason and its fields, newest first, at most
``MAX_REFUSED``) and counted (``schedule.rq.entries.refused``), while the rest of its pop fires
as usual. The releaser lease is a
``SET NX PX`` lock renewed by compare-and-set; the wake-ups are a pub/sub channel.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.serializers import JSONSerializer

from schedule_sdk.ports import DelayIndex, HealNote, Metrics, OccurrenceRef, ReleasedBatch, WakeUps, key_of
from schedule_sdk.substrates.rq import plumbing
from schedule_sdk.substrates.rq.entries import DUE_META, FIRE_FUNCTION, due_of, parse_key
from schedule_sdk.substrates.rq.handoff import SCRIPT_CHUNK, RedisHandOff, now_ms
from schedule_sdk.substrates.rq.plumbing import as_text, unavailable_as

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

STRANDED_BATCH = 1000  # most stranded entries one look returns
#: A released entry counts as taken out of the RQ queue only if it was released this long before
#: the fire at the queue's head (covers the gap between the pump's clock read and RQ's stamp).
HEAD_MARGIN_MS = 1000.0
#: How long a heal under way is reported without news from it (seconds): it is noted again at
#: least every second while its pages go on, so only a heal whose worker died (or stalled) ages
#: out, and a peer that waited for it heals then.
HEALING_TTL = 10.0


class RQExecutionQueue(RedisHandOff, DelayIndex):
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
        metrics: Metrics | None = None,
    ) -> None:
        self.redis_url = redis_url
        self._metrics = metrics
        self.connection: redis.Redis = plumbing.connect(redis_url)
        super().__init__(client=self.connection, queue_name=queue_name, stale_after=stale_after)
        self.batch_size = batch_size
        self.job_timeout = job_timeout
        self.rq_queue = Queue(queue_name, connection=self.connection, serializer=JSONSerializer)
        self._plan = self.connection.register_script(plumbing.PLAN)
        self._discard = self.connection.register_script(plumbing.DISCARD)
        self._renew = self.connection.register_script(plumbing.RENEW)
        self._unlock = self.connection.register_script(plumbing.UNLOCK)
        self._drop_lock_of = self.connection.register_script(plumbing.DROP_LOCK_OF)
        self._release_lock = threading.Lock()

    # -- the rest of the ExecutionQueue port (the reconciler) ------------------------------------

    def stranded(self, older_than: float) -> list[OccurrenceRef]:
        """Entries staged more than ``older_than`` seconds ago (their ``committed`` never came), and
        entries released that long ago, taken out of the RQ queue, and still unclaimed (their
        consumer died, or a stock ``rq worker`` did). An entry still waiting in the RQ queue is not
        stranded, however old: it was released before the fire at the queue's head only if it was
        taken (the queue is first in, first out)."""
        cutoff = now_ms() - older_than * 1000.0
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
        cutoff = repr(now_ms() - older_than * 1000.0)
        try:
            for start in range(0, len(keys), SCRIPT_CHUNK):
                chunk = keys[start : start + SCRIPT_CHUNK]
                self._discard(keys=[self.keys.staged, self.keys.released], args=[cutoff, *chunk])
        except Exception as error:
            logger.warning("could not drop %d stranded entries: %s", len(keys), error)

    def incarnation(self) -> str | None:
        """``<run id>/<marker>``: the run id of the Redis server the queue reaches (a failover
        through Sentinel or a restart changes it; ``-`` where ``INFO`` is refused) and the
        namespace's marker token (a flush or a restart without persistence deletes it; this look
        sets a new one). One round trip, O(1) whatever the number of entries
        (:func:`~schedule_sdk.substrates.rq.plumbing.identity`)."""
        with unavailable_as("could not read the Redis server's identity"):
            server, marker = plumbing.identity(self.connection, self.keys, uuid.uuid4().hex)
        return f"{server or '-'}/{marker}"

    def loss_reason(self, before: str, now: str) -> str:
        server_before, _, marker_before = before.partition("/")
        server_now, _, marker_now = now.partition("/")
        if marker_before != marker_now:
            restarted = " (the server restarted)" if server_before != server_now else ""
            return (
                f"the SDK's marker key was gone from Redis{restarted}: its database was flushed, "
                "or the server restarted without its data"
            )
        return "the Redis server changed (a failover or a restart): it may lack the latest entries"

    def note_heal(self, note: HealNote) -> None:
        record = {
            "lost_at": note.lost_at,
            "reason": note.reason,
            "healed": note.healed,
            "took": note.took,
            "for": note.incarnation,
        }
        try:
            plumbing.note_heal(self.connection, self.keys, record, done=note.done, ttl=HEALING_TTL)
        except Exception as error:
            logger.warning("could not record the heal of lost entries: %s", error)

    def heal_of(self, incarnation: str) -> str | None:
        with unavailable_as("could not read the heal notes"):
            return plumbing.heal_of(self.connection, self.keys, incarnation)

    def risks(self) -> list[str]:
        """The Redis ``maxmemory-policy`` if it could evict the SDK's keys
        (:func:`~schedule_sdk.substrates.rq.plumbing.eviction_risks`)."""
        with unavailable_as("could not read the Redis server's memory policy"):
            return plumbing.eviction_risks(self.connection)

    # -- the DelayIndex port (the pump, the consumer and the fire runtimes) ------------------------

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
            now = now_ms()
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
            FIRE_FUNCTION,
            args=[self.queue_name, members],
            job_id=batch_id(members),
            result_ttl=0,
            timeout=self.job_timeout,
            description=f"schedule_sdk fire x{len(members)}",
            meta={DUE_META: due_ms},
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
                self.connection.zadd(self.keys.released, dict.fromkeys(members, now_ms()), xx=True)

    def restore(self, members: Sequence[str]) -> None:
        """Put released entries back in the delay index, due now (a stopping worker's leftovers)."""
        now = now_ms()
        self.activate([(m, now) for m in members])
        self.done(members)

    def pop_released(self, limit: int, timeout: float, done: Sequence[str] = ()) -> list[ReleasedBatch]:
        with unavailable_as("could not pop released entries"):
            first = self.connection.blpop([self.rq_queue.key], timeout=timeout)
            if first is None:
                if done:
                    self.connection.zrem(self.keys.released, *done)
                return []
            ids = [as_text(first[1])]
            pipe = self.connection.pipeline(transaction=True)
            if limit > 1:
                pipe.lpop(self.rq_queue.key, limit - 1)
            earlier, jobs = self._take(pipe, ids, done)
            taken = list(zip(ids, jobs, strict=True))
            more = [as_text(m) for m in (earlier[0] if earlier else None) or ()]
            if more:
                taken += zip(
                    more, self._take(self.connection.pipeline(transaction=True), more)[1], strict=True
                )
        return [batch for job_id, job in taken if job is not None and (batch := self._batch(job_id, job))]

    def _take(
        self, pipe: Any, ids: list[str], done: Sequence[str] = ()
    ) -> tuple[list[Any], list[Job | None]]:
        """Read and delete the job hashes of ``ids`` in ``pipe`` (a ``MULTI``: a re-release of the
        same id that lands later creates a fresh hash, never one deleted unread), clearing the
        released marks of ``done`` on the way; the replies to the commands ``pipe`` already held,
        and the jobs (None: already taken, e.g. by a stock rq worker)."""
        earlier = len(pipe)
        keys = [Job.key_for(job_id) for job_id in ids]
        for key in keys:
            pipe.hgetall(key)
        pipe.delete(*keys)
        if done:
            pipe.zrem(self.keys.released, *done)
        results: list[Any] = pipe.execute()
        jobs: list[Job | None] = []
        for job_id, raw in zip(ids, results[earlier : earlier + len(ids)], strict=True):
            job = None
            if raw:
                job = Job(job_id, connection=self.connection, serializer=JSONSerializer)
                try:
                    job.restore(raw)
                except Exception as error:  # undecodable: set aside, never delays the others
                    self._set_aside(job_id, f"undecodable: {type(error).__name__}: {error}", raw)
                    job = None
            jobs.append(job)
        return results[:earlier], jobs

    def _set_aside(self, job_id: str, reason: str, raw: Any) -> None:
        """Keep a refused RQ job under the ``refused`` key (capped) and count it; never raises
        (the rest of the pop must go on)."""
        logger.error("refusing RQ job %s: %s", job_id, reason)
        if self._metrics is not None:
            self._metrics.increment("schedule.rq.entries.refused")
        try:
            fields = {_shown(k): _shown(v)[:2000] for k, v in raw.items()} if isinstance(raw, dict) else {}
            at_ms = int(time.time() * 1000)
            record = {"id": job_id, "reason": reason[:500], "at_ms": at_ms, "fields": fields}
            pipe = self.connection.pipeline(transaction=True)
            pipe.lpush(self.keys.refused, json.dumps(record))
            pipe.ltrim(self.keys.refused, 0, plumbing.MAX_REFUSED - 1)
            pipe.execute()
        except Exception as error:
            logger.warning("could not set aside RQ job %s: %s", job_id, error)

    def refused(self, limit: int = 100) -> list[dict[str, Any]]:
        """The RQ jobs set aside, newest first (``id``, ``reason``, ``at_ms``, ``fields``)."""
        with unavailable_as("could not read the refused RQ jobs"):
            return [json.loads(item) for item in self.connection.lrange(self.keys.refused, 0, limit - 1)]

    def _batch(self, job_id: str, job: Job) -> ReleasedBatch | None:
        """The released batch of a fire job of this queue; None (logged) for anything else."""
        try:
            members = _members(job, self.queue_name)
            due = None if members is None else due_of(job.meta)
        except Exception as error:  # what RQ decodes lazily: the rest of the pop goes on
            self._set_aside(job_id, f"undecodable: {type(error).__name__}: {error}", None)
            return None
        if members is None:
            self._set_aside(job_id, "not a schedule_sdk fire of this queue", None)
            return None
        return ReleasedBatch(job_id, members, due)

    # -- the releaser lease and its wake-ups -------------------------------------------------------

    def lead(self, token: str, ttl: float) -> bool:
        ttl_ms = int(ttl * 1000)
        with unavailable_as("could not take the pump lock"):
            return bool(self._renew(keys=[self.keys.pump], args=[token, ttl_ms])) or bool(
                self.connection.set(self.keys.pump, token, nx=True, px=ttl_ms)
            )

    def resign(self, token: str) -> None:
        with unavailable_as("could not release the pump lock"):
            self._unlock(keys=[self.keys.pump], args=[token])

    def depose(self, worker_ids: Sequence[str]) -> bool:
        if not worker_ids:
            return False
        with unavailable_as("could not check the pump lock"):
            return bool(self._drop_lock_of(keys=[self.keys.pump], args=list(worker_ids)))

    def wakeups(self) -> WakeUps:
        with unavailable_as("could not subscribe to the wake-up channel"):
            return _RedisWakeUps(self.connection, self.keys.wake)

    def nudge(self) -> None:
        try:
            self.connection.publish(self.keys.wake, "stop")
        except Exception as error:
            logger.debug("could not publish a wake-up: %s", error)

    def close(self) -> None:
        self.connection.close()


def batch_id(members: Sequence[str]) -> str:
    """The RQ job id of a release: the occurrence key itself for one, a digest for a batch."""
    if len(members) == 1:
        return members[0]
    return "sdkbatch_" + hashlib.sha256("\n".join(members).encode()).hexdigest()[:40]


class _RedisWakeUps(WakeUps):
    """The pump's wake-up channel: a pub/sub subscription. ``wait`` is ``get_message`` with a
    socket timeout (rounded up to whole milliseconds by redis-py)."""

    def __init__(self, connection: Any, channel: str) -> None:
        self._pubsub: Any = connection.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(channel)

    def wait(self, timeout: float) -> bool:
        with unavailable_as("lost the wake-up channel"):
            return self._pubsub.get_message(timeout=timeout) is not None

    def close(self) -> None:
        try:
            self._pubsub.close()
        except Exception:
            pass


def _shown(value: Any) -> str:
    """A Redis reply as text, whatever its bytes (undecodable ones replaced)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _members(job: Job, queue_name: str) -> list[str] | None:
    """The occurrence keys of a fire job of this queue, or None for anything else."""
    try:
        if job.func_name != FIRE_FUNCTION or job.kwargs:
            return None
        target, members = job.args
    except Exception:  # undecodable data: never executed
        return None
    if target != queue_name or not isinstance(members, list):
        return None
    if not all(isinstance(m, str) for m in members):
        return None
    return members
