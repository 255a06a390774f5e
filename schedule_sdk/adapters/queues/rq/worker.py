"""``WorkerThread``: the in-process consumer of the RQ queue, safe inside a threaded host app.

It pops released RQ jobs from the RQ queue list (``BLPOP`` with a one-second timeout, then up to
``batch`` more without blocking), reads and deletes their hashes in one ``MULTI``, parses them
with RQ's own ``Job`` class and the JSON serializer (nothing is unpickled), refuses any job whose
function is not the SDK's fire function, and hands the occurrence keys to the fire runtime. It
installs no signal handlers, never subscribes to RQ's command channel (whose shutdown command
``os.kill``s the host with SIGINT), adds no log handlers, and notices a stop within a second.

Why not RQ's ``SimpleWorker`` in a thread (STACK-NOTES §2)? It issues about twenty Redis commands
per job (registries, heartbeats, status), measured at 110 jobs/s on the project machine; the
released jobs are still ordinary RQ jobs, so stock ``rq worker --serializer
rq.serializers.JSONSerializer`` processes can execute them alongside (or instead of) this thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from redis.exceptions import RedisError
from rq.job import Job
from rq.queue import Queue
from rq.serializers import JSONSerializer

from ._redis import FIRE_FUNCTION
from .fire import FireRuntime

logger = logging.getLogger(__name__)


class WorkerThread:
    """Consumes the RQ queue ``queue`` in a daemon thread, firing through ``runtime``."""

    def __init__(self, *, queue: Queue, runtime: FireRuntime, batch: int = 50, poll_seconds: int = 1) -> None:
        self._queue = queue
        self._runtime = runtime
        self._batch = batch
        self._poll = poll_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
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
        backoff = 0.05
        while not self._stop.is_set():
            try:
                ids = self._pop()
                if ids:
                    self._execute(ids)
                backoff = 0.05
            except RedisError as error:
                logger.warning("RQ worker: %s; reconnecting in %.2fs", error, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
            except Exception:  # never lose the thread; released entries are healed by the reconciler
                logger.exception("RQ worker: unexpected error")
                self._stop.wait(backoff)

    def _pop(self) -> list[str]:
        connection: Any = self._queue.connection
        first = connection.blpop([self._queue.key], timeout=self._poll)
        if first is None:
            return []
        more = connection.lpop(self._queue.key, self._batch - 1) if self._batch > 1 else None
        return [_text(first[1]), *(_text(m) for m in more or ())]

    def _execute(self, ids: list[str]) -> None:
        for job_id, job in zip(ids, self._take(ids), strict=True):
            if job is None:
                continue  # already taken (e.g. by a stock rq worker)
            members = _members(job, self._runtime.queue.queue_name)
            if members is None:
                logger.error("refusing RQ job %s: it is not a schedule_sdk fire", job_id)
                continue
            self._runtime.fire(members)
            self.executed += 1

    def _take(self, ids: list[str]) -> list[Job | None]:
        """Read and delete the job hashes in one ``MULTI``: a re-release of the same id (the same
        occurrence) that lands later creates a fresh hash, never one we delete unread."""
        connection = self._queue.connection
        pipe = connection.pipeline(transaction=True)
        keys = [Job.key_for(job_id) for job_id in ids]
        for key in keys:
            pipe.hgetall(key)
        pipe.delete(*keys)
        *raws, _ = pipe.execute()
        jobs: list[Job | None] = []
        for job_id, raw in zip(ids, raws, strict=True):
            job = None
            if raw:
                job = Job(job_id, connection=connection, serializer=JSONSerializer)
                job.restore(raw)
            jobs.append(job)
        return jobs


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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
