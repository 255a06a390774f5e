"""A cancel, a pause or a reschedule that returned before an occurrence's due instant means no
listener runs for it, on every backend, though a worker claims a row ahead of its due instant and
holds it until then: hundreds of one-shots, each steered in the last 10 ms before it is due
(:mod:`tests.support.steering`: every instant is read from the store's clock; calls that returned
after the due instant are left out of the judgment, and batches follow until enough returned in
the last few milliseconds). The same with a stock ``rq worker`` is in
tests/processes/test_rq_steered_before_due.py.
"""

from __future__ import annotations

import pytest

from schedule_sdk import JobStatus
from tests.support.steering import steer_before_due


@pytest.mark.every_backend
@pytest.mark.parametrize("action", ["cancel", "pause", "reschedule"])
def test_a_steering_call_that_returned_before_the_due_instant_stops_its_fire(backend, action):
    h = backend.harness().start()
    clock = h.container.store_time()
    assert clock.claim_now() is not None  # the offset is measured
    steered = steer_before_due(h.service, clock, action)
    before = steered.before
    h.wait_past(steered.jobs[-1].run_at)
    h.settle()
    fired = [job.id for job in before if h.events_for(job.id)]
    assert fired == [], f"{len(fired)} of {len(before)} jobs steered ({action}) before due fired"
    expected = JobStatus.PAUSED if action == "pause" else JobStatus.CANCELLED
    assert all(h.job(job.id).status is expected for job in before)
