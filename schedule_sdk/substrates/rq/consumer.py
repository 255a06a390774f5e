"""``WorkerThread``: the in-process consumer of the RQ queue, safe inside a threaded host app.

It pops released RQ jobs from the RQ queue list (``BLPOP`` with a one-second timeout), then in
one ``MULTI`` pops up to ``batch`` more, reads and deletes the first one's hash and clears the
released marks of the entries it already fired; it parses jobs with RQ's own ``Job`` class and the
JSON serializer (nothing is unpickled), refuses any job whose function is not the SDK's fire
function, holds a job released ahead of its due instant (the ``due_ms`` of its meta) until then,
and hands the occurrence keys to the fire runtime. Two round trips per pop at steady
rates (each one is also a GIL hand-off, which is what lateness is made of). It
installs no signal handlers, never subscribes to RQ's command channel (whose shutdown command
``os.kill``s the host with SIGINT), adds no log handlers, and notices a stop within a second.

Why not RQ's ``SimpleWorker`` in a thread? It issues about twenty Redis commands
per job (registries, heartbeats, status), measured at 110 jobs/s on the project machine; the
released jobs are still ordinary RQ jobs, so stock ``rq worker --serializer
rq.serializers.JSONSerializer`` processes can execute them alongside (or instead of) this thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from redis.exceptions import RedisError
from rq.job import Job
from rq.queue import Queue
from rq.serializers import JSONSerializer

from schedule_sdk.domain.backoff import Reconnect
from schedule_sdk.substrates.rq.fire import DispatchRuntime
from schedule_sdk.substrates.rq.plumbing import FIRE_FUNCTION, as_text, due_of, hold_until_due

logger = logging.getLogger(__name__)


class WorkerThread:
    """Consumes the RQ queue ``queue`` in a daemon thread, firing through ``runtime``; the released
    marks of fired entries (in the Redis sorted set ``released_key``) are cleared with the next pop."""

    def __init__(
        self,
        *,
        queue: Queue,
        runtime: DispatchRuntime,
        released_key: str,
        batch: int = 50,
        poll_seconds: int = 1,
    ) -> None:
        self._queue = queue
        self._runtime = runtime
        self._batch = batch
        self._poll = poll_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The delay index's set of released marks, cleared in the pop's own ``MULTI``.
        self._released_key = released_key
        self._fired: list[str] = []  # entries whose released marks are still to clear
        self.executed = 0  #: RQ jobs this thread executed

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="schedule-sdk-rq-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning("the RQ worker thread did not stop within %.1fs", timeout)
            self._thread = None

    def _run(self) -> None:
        backoff = Reconnect()
        while not self._stop.is_set():
            try:
                taken = self._pop()
                if taken:
                    self._execute(taken)
                else:
                    self._clear_marks()  # idle: no pop to carry them
                backoff.reset()
            except RedisError as error:
                delay = backoff.next()
                logger.warning("RQ worker: %s; reconnecting in %.2fs", error, delay)
                self._stop.wait(delay)
            except Exception:  # never lose the thread; released entries are healed by the reconciler
                logger.exception("RQ worker: unexpected error")
                self._stop.wait(backoff.next())
        try:
            self._clear_marks()
        except RedisError as error:  # stale marks only make the reconciler wait before healing
            logger.warning("RQ worker: could not clear released marks at stop: %s", error)

    def _pop(self) -> list[tuple[str, Job | None]]:
        connection: Any = self._queue.connection
        first = connection.blpop([self._queue.key], timeout=self._poll)
        if first is None:
            return []
        ids = [as_text(first[1])]
        pipe = connection.pipeline(transaction=True)
        if self._batch > 1:
            pipe.lpop(self._queue.key, self._batch - 1)
        earlier, jobs = self._take(pipe, ids)
        taken = list(zip(ids, jobs, strict=True))
        more = [as_text(m) for m in (earlier[0] if earlier else None) or ()]
        if more:
            taken += zip(more, self._take(connection.pipeline(transaction=True), more)[1], strict=True)
        return taken

    def _take(self, pipe: Any, ids: list[str]) -> tuple[list[Any], list[Job | None]]:
        """Read and delete the job hashes of ``ids`` in ``pipe`` (a ``MULTI``: a re-release of the
        same id that lands later creates a fresh hash, never one deleted unread), clearing the
        released marks of earlier fires on the way; the replies to the commands ``pipe`` already
        held, and the jobs."""
        earlier = len(pipe)
        keys = [Job.key_for(job_id) for job_id in ids]
        for key in keys:
            pipe.hgetall(key)
        pipe.delete(*keys)
        with self._marks() as marks:
            if marks:
                pipe.zrem(self._released_key, *marks)
            results: list[Any] = pipe.execute()
        return results[:earlier], self._jobs(ids, results[earlier : earlier + len(ids)])

    def _jobs(self, ids: list[str], raws: list[Any]) -> list[Job | None]:
        jobs: list[Job | None] = []
        for job_id, raw in zip(ids, raws, strict=True):
            job = None
            if raw:
                job = Job(job_id, connection=self._queue.connection, serializer=JSONSerializer)
                job.restore(raw)
            jobs.append(job)
        return jobs

    def _execute(self, taken: list[tuple[str, Job | None]]) -> None:
        batches: list[tuple[list[str], Job]] = []
        for job_id, job in taken:
            if job is None:
                continue  # already taken (e.g. by a stock rq worker)
            members = _members(job, self._runtime.queue.queue_name)
            if members is None:
                logger.error("refusing RQ job %s: it is not a schedule_sdk fire", job_id)
                continue
            batches.append((members, job))
        batches.sort(key=lambda batch: due_of(batch[1].meta) or 0.0)  # a hold delays no earlier fire
        self._runtime.holding = [member for members, _ in batches for member in members]
        for members, job in batches:
            hold_until_due(job.meta, self._stop.is_set)  # released ahead of its due instant
            if self._runtime.take(members):
                self._fired += members  # cleared with the next pop (or when idle)
            self.executed += 1

    def _clear_marks(self) -> None:
        with self._marks() as marks:
            if marks:
                self._queue.connection.zrem(self._released_key, *marks)

    @contextlib.contextmanager
    def _marks(self) -> Iterator[list[str]]:
        """The released marks to clear now; handed back for a later try if clearing fails."""
        marks, self._fired = self._fired, []
        try:
            yield marks
        except BaseException:
            self._fired = marks + self._fired
            raise


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
