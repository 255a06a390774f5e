"""Spread and calendars on every backend, with a real worker: a spread fire happens at the
instant the preview showed (never before it), the events keep the nominal occurrence, and an
occurrence on an excluded date is not fired but reported missed with its reason and recorded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schedule_sdk import (
    SCHEDULE_MISSED_EVENT,
    Calendar,
    FireOutcome,
    IntervalRepeat,
    MisfirePolicy,
    RepeatSpec,
)
from schedule_sdk.domain.jobs import spread_offset_ms

SPREAD_MS = 900


def _key_with_offset_past(low_ms: int) -> str:
    """A spread key whose offset in the window is at least ``low_ms`` (so the spread is visible)."""
    return next(k for k in (f"tenant-{n}" for n in range(1000)) if spread_offset_ms(k, SPREAD_MS) >= low_ms)


def test_spread_fires_are_previewed_and_then_observed_at_the_previewed_instants(backend):
    h = backend.harness().start()
    key = _key_with_offset_past(400)
    spec = RepeatSpec(
        topic="tests.spread",
        timezone="UTC",
        repeat=IntervalRepeat(every_ms=1000),
        spread=timedelta(milliseconds=SPREAD_MS),
        spread_key=key,
        limit=3,
    )
    job = h.service.schedule_repeat(spec)
    offset = timedelta(milliseconds=spread_offset_ms(key, SPREAD_MS))
    preview = h.service.preview(job.id, 5)
    assert len(preview) == 3  # the limit
    assert [f.at - f.nominal for f in preview if f.nominal is not None] == [offset] * 3
    assert h.service.get_by_id(job.id).spread_offset == offset  # type: ignore[union-attr]

    events = h.wait_events(job.id, 3)
    assert [e.scheduled_for for e in events] == [f.nominal for f in preview]  # nominal in the events
    for event, fire in zip(events, preview, strict=True):
        assert event.fired_at >= fire.at  # never before the spread instant the preview showed
    done = h.wait_status(job.id, "completed")
    history = sorted(h.service.history(done.id), key=lambda f: f.occurrence)
    assert [f.due_at for f in history] == [f.at for f in preview]  # due at the spread instant
    assert all(f.lateness_ms >= 0 for f in history)


def test_an_excluded_date_is_not_fired_and_is_reported_missed_with_its_reason(backend):
    h = backend.harness().start()
    missed: list[object] = []
    h.listen(SCHEDULE_MISSED_EVENT, missed.append)
    today = datetime.now(UTC).date()
    calendar = Calendar(dates=[today, today + timedelta(days=1)])  # around midnight too
    # a grace no loaded machine exceeds: a claim later than the next occurrence would otherwise be
    # coalesced by fire_once and reported as a misfire, not as the exclusion under test
    spec = RepeatSpec(
        topic="tests.excluded",
        timezone="UTC",
        repeat=IntervalRepeat(every_ms=300),
        calendar=calendar,
        misfire=MisfirePolicy(mode="fire_once", grace_ms=60_000),
    )
    job = h.service.schedule_repeat(spec)
    assert all(f.excluded for f in h.service.preview(job.id, 5))
    assert h.wait_for(lambda: len(missed) >= 3)
    h.service.cancel(job.id)
    h.settle()
    assert h.events_for(job.id) == []
    ours = [m for m in missed if m.scheduled_job_id == job.id]  # type: ignore[attr-defined]
    assert all(m.reason == "excluded" and m.count == 1 for m in ours)  # type: ignore[attr-defined]
    assert len({m.missed[0] for m in ours}) == len(ours)  # type: ignore[attr-defined]  # each one once
    skipped = [f for f in h.service.history(job.id) if f.outcome is FireOutcome.SKIPPED]
    assert len(skipped) >= 3 and all("excluded" in (f.error or "") for f in skipped)
    stored = h.job(job.id)
    assert stored.calendar == calendar and stored.occurrence_count == 0
