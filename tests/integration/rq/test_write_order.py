"""The write order (docs/explanation/write-order.md) on the rq substrate, with each fault injected,
and the wire format."""

from __future__ import annotations

import contextlib
import json
import logging
import time
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from dependency_injector import providers
from rq import Queue
from rq.serializers import JSONSerializer

from schedule_sdk import JobStatus, OneShotSpec, QueueUnavailable, StoreUnavailable
from schedule_sdk.core.reconciler import Reconciler
from schedule_sdk.ports import Occurrence
from schedule_sdk.substrates.rq import RQExecutionQueue
from schedule_sdk.substrates.rq.entries import FIRE_FUNCTION
from schedule_sdk.substrates.rq.plumbing import Keys

pytestmark = pytest.mark.redis


def spec(seconds: float = 0.3) -> OneShotSpec:
    return OneShotSpec(
        topic="rq.order", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC"
    )


def entries(url: str, queue: str) -> dict[str, list[bytes]]:
    r, keys = redis.Redis.from_url(url), Keys(queue)
    return {name: r.zrange(getattr(keys, name), 0, -1) for name in ("staged", "delay", "released")}


def test_enqueue_error_rolls_the_row_back_and_raises_queue_unavailable(rq_settings, harnesses):
    h = harnesses(rq_settings, redis_url="redis://127.0.0.1:1/0")  # nothing listens on port 1
    with pytest.raises(QueueUnavailable) as raised:
        h.service.schedule_at(spec())
    assert raised.value.code == "SCHEDULE_QUEUE_UNAVAILABLE"
    assert h.service.list(limit=10).items == []  # nothing written


class FailingCommit:
    """Wraps a store: every transaction's body runs, then the commit fails (it rolls back)."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[object]:
        with self._store.transaction() as tx:
            yield tx
            raise StoreUnavailable("injected commit failure")


def test_a_commit_failure_after_enqueue_withdraws_the_entry(rq_settings, harnesses):
    h = harnesses(rq_settings)
    real = h.container.store()
    h.container.store.override(providers.Object(FailingCommit(real)))
    with pytest.raises(StoreUnavailable):
        h.service.schedule_at(spec())
    h.container.store.reset_override()
    assert h.service.list(limit=10).items == []
    assert entries(rq_settings["redis_url"], rq_settings["rq_queue"]) == {
        "staged": [],
        "delay": [],
        "released": [],
    }


def test_schedule_many_hands_off_every_occurrence_or_none(rq_settings, harnesses):
    h = harnesses(rq_settings, redis_url="redis://127.0.0.1:1/0")
    with pytest.raises(QueueUnavailable):
        h.service.schedule_many([spec(), spec()])
    assert h.service.list(limit=10).items == []  # the queue refused: the rows rolled back
    h = harnesses(rq_settings)
    real = h.container.store()
    h.container.store.override(providers.Object(FailingCommit(real)))
    with pytest.raises(StoreUnavailable):
        h.service.schedule_many([spec(), spec(3600), spec()])
    h.container.store.reset_override()
    assert h.service.list(limit=10).items == []
    empty = {"staged": [], "delay": [], "released": []}
    assert entries(rq_settings["redis_url"], rq_settings["rq_queue"]) == empty  # all withdrawn
    jobs = harnesses(rq_settings).service.schedule_many([spec(), spec(3600)])
    found = entries(rq_settings["redis_url"], rq_settings["rq_queue"])
    assert sorted(found["delay"]) == sorted(Occurrence.of(j).key.encode() for j in jobs)


def test_an_entry_left_staged_by_a_crash_after_commit_is_healed_by_the_reconciler(rq_settings, harnesses):
    h = harnesses(rq_settings)
    queue: RQExecutionQueue = h.container.queue()
    queue.committed = lambda occurrences: None  # the process "dies" between commit and activation
    job = h.service.schedule_at(spec(0.2))
    assert entries(rq_settings["redis_url"], rq_settings["rq_queue"])["staged"] == [
        Occurrence.of(job).key.encode()
    ]
    del queue.committed
    reconciler = Reconciler(store=h.store, queue=queue, clock=h.container.clock())
    assert reconciler.run().healed == 0  # a fresh staged entry may still be committing
    queue.stale_after = 0.0
    assert reconciler.run().healed == 1
    h.start()
    assert h.wait_events(job.id, 1)[0].fired_at >= job.run_at


def test_released_jobs_are_json_with_the_fire_function_and_plain_ids(rq_settings, harnesses):
    h = harnesses(rq_settings)
    queue: RQExecutionQueue = h.container.queue()
    jobs = [h.service.schedule_at(spec(0.05)) for _ in range(3)]
    h.wait_past(max(j.run_at for j in jobs))
    assert sorted(queue.release_due(time.time() * 1000, 10)) == sorted(Occurrence.of(j).key for j in jobs)
    r = redis.Redis.from_url(rq_settings["redis_url"])
    [rq_id] = [i.decode() for i in r.lrange(queue.rq_queue.key, 0, -1)]
    data = json.loads(zlib.decompress(r.hget(f"rq:job:{rq_id}", "data")))
    assert data[0] == FIRE_FUNCTION and data[2][0] == rq_settings["rq_queue"]
    assert sorted(data[2][1]) == sorted(Occurrence.of(j).key for j in jobs)
    h.start()
    for job in jobs:
        h.wait_status(job.id, "completed")


def test_a_single_release_uses_the_occurrence_key_as_rq_id_and_double_enqueue_fires_once(
    rq_settings, harnesses
):
    h = harnesses(rq_settings)
    queue: RQExecutionQueue = h.container.queue()
    job = h.service.schedule_at(spec(0.05))
    occurrence = Occurrence.of(job)
    queue.enqueue([occurrence])  # a second hand-over of the same occurrence
    queue.committed([occurrence])
    h.wait_past(job.run_at)
    assert queue.release_due(time.time() * 1000, 10) == [occurrence.key]
    assert queue.rq_queue.fetch_job(occurrence.key) is not None
    queue.activate([(occurrence.key, time.time() * 1000)])  # and a double release
    queue.release_due(time.time() * 1000, 10)
    h.start()
    h.wait_status(job.id, "completed")
    h.settle()
    assert len(h.events_for(job.id)) == 1


def test_the_in_process_worker_refuses_foreign_functions(rq_settings, harnesses, tmp_path, caplog):
    h = harnesses(rq_settings).start()
    marker = tmp_path / "pwned"
    foreign = Queue(rq_settings["rq_queue"], connection=redis.Redis.from_url(rq_settings["redis_url"]),
                    serializer=JSONSerializer)  # fmt: skip
    with caplog.at_level(logging.ERROR):
        foreign.enqueue("os.mkdir", str(marker))
        job = h.service.schedule_at(spec(0.1))
        h.wait_status(job.id, "completed")
    assert not marker.exists()
    assert "refusing RQ job" in caplog.text


def test_withdraw_on_cancel_leaves_no_entry_and_a_stale_release_never_fires(rq_settings, harnesses):
    h = harnesses(rq_settings).start()
    job = h.service.schedule_at(spec(0.5))
    h.service.cancel(job.id)
    assert entries(rq_settings["redis_url"], rq_settings["rq_queue"])["delay"] == []
    queue: RQExecutionQueue = h.container.queue()
    queue.activate([(Occurrence.of(job).key, time.time() * 1000)])  # a stale entry resurfaces
    h.settle()
    assert h.events_for(job.id) == [] and h.job(job.id).status is JobStatus.CANCELLED


def test_released_marks_are_cleared_after_the_fires_are_claimed(rq_settings, harnesses):
    """The consumer clears the marks of what it fired with its next pop, or within its one-second
    idle poll: none is left behind (a left-over mark would delay the reconciler's healing)."""
    h = harnesses(rq_settings).start()
    jobs = [h.service.schedule_at(spec(0.1 + i * 0.05)) for i in range(5)]
    for job in jobs:
        h.wait_status(job.id, "completed")
    assert h.wait_for(lambda: entries(rq_settings["redis_url"], rq_settings["rq_queue"])["released"] == [], 3)


def _age(url: str, queue: str, name: str, key: str, seconds: float) -> None:
    """Make the entry ``key`` of set ``name`` look ``seconds`` old."""
    redis.Redis.from_url(url).zadd(getattr(Keys(queue), name), {key: (time.time() - seconds) * 1000}, xx=True)


def test_only_entries_left_behind_by_a_dead_process_are_stranded(rq_settings, harnesses):
    """Staged for longer than the lease: stranded. Released that long ago: stranded once taken out
    of the RQ queue (its consumer died), never while it still waits there (a backlog is not
    released twice); a consumer waiting for room renews the marks it holds."""
    h = harnesses(rq_settings)
    url = rq_settings["redis_url"]
    queue: RQExecutionQueue = h.container.queue()
    staged, queued = h.service.schedule_at(spec(0.05)), h.service.schedule_at(spec(0.05))
    queued_key = Occurrence.of(queued).key
    queue.withdraw([Occurrence.of(staged)])
    queue.enqueue([Occurrence.of(staged)])  # staged, its committed() never comes
    h.wait_past(max(staged.run_at, queued.run_at))
    assert queue.release_due(time.time() * 1000, 10) == [queued_key]
    marked = datetime.now(UTC)
    assert queue.stranded(0.5) == []  # both are younger than the lease
    h.wait_past(marked + timedelta(seconds=0.6))
    assert queue.stranded(0.5) == [(staged.id, 1, 1)]  # the released one still waits in RQ's queue
    touched = datetime.now(UTC)
    queue.touch([queued_key])  # a live consumer holding it renews the mark
    redis.Redis.from_url(url).lpop(queue.rq_queue.key)  # a consumer took it out of the queue ...
    assert queue.stranded(0.5) == [(staged.id, 1, 1)]
    h.wait_past(touched + timedelta(seconds=0.6))  # ... and died before claiming it: the mark ages
    assert sorted(queue.stranded(0.5)) == sorted([(staged.id, 1, 1), (queued.id, 1, 1)])


def test_rescue_hands_pending_stranded_entries_over_again_and_drops_the_others(rq_settings, harnesses):
    h = harnesses(rq_settings, lease_seconds=1.0)
    url, name = rq_settings["redis_url"], rq_settings["rq_queue"]
    queue: RQExecutionQueue = h.container.queue()
    queue.committed = lambda occurrences: None  # the process "dies" after each commit
    alive, gone = h.service.schedule_at(spec(0.3)), h.service.schedule_at(spec(0.3))
    del queue.committed
    h.service.cancel(gone.id)  # withdraws its entry: stage it again, as a late hand-off would
    queue.enqueue([Occurrence.of(gone)])
    for job in (alive, gone):
        _age(url, name, "staged", Occurrence.of(job).key, 2.0)
    reconciler = h.container.reconciler()
    assert reconciler.rescue() == 1
    assert entries(url, name) == {"staged": [], "delay": [Occurrence.of(alive).key.encode()], "released": []}
    h.start()
    assert h.wait_events(alive.id, 1)[0].fired_at >= alive.run_at
    assert h.events_for(gone.id) == []


def test_only_the_fire_function_is_run_from_an_rq_entry() -> None:
    import redis
    from rq.job import Job
    from rq.serializers import JSONSerializer
    from rq.utils import import_attribute

    from schedule_sdk.entrypoints import rq_job
    from schedule_sdk.substrates.rq.queue import _members

    unused = redis.Redis()  # creating a job issues no command
    assert import_attribute(FIRE_FUNCTION) is rq_job.fire
    job = Job.create(FIRE_FUNCTION, args=["q", ["k_1_1"]], serializer=JSONSerializer, connection=unused)
    assert _members(job, "q") == ["k_1_1"]
    foreign = Job.create("os.getcwd", args=["q", ["k_1_1"]], serializer=JSONSerializer, connection=unused)
    assert _members(foreign, "q") is None
