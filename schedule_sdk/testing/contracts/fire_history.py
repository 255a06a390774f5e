"""The :class:`~schedule_sdk.ports.FireHistory` capability's contract suite:
:class:`FireHistoryContract` (also importable from :mod:`.job_store`)."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from schedule_sdk.domain.history import FireOutcome
from schedule_sdk.ports import (
    FireHistory,
    require,
)
from schedule_sdk.testing.contracts.rows import FIRED_JOB_ID, NOW, at, fire, record
from schedule_sdk.testing.contracts.store import (
    StoreContract,
)

PLUS_2 = timezone(timedelta(hours=2))


class FireHistoryContract(StoreContract):
    """The :class:`~schedule_sdk.ports.FireHistory` capability (``record_fires``, ``history``,
    ``purge_history``): entries commit and roll back with the transaction that writes them."""

    @property
    def fire_history(self) -> FireHistory:
        """The current test's store, as the capability under test."""
        return require(self.job_store, FireHistory, "FireHistoryContract")

    def test_a_recorded_fire_reads_back_field_for_field(self) -> None:
        failed = fire(
            occurrence=3,
            attempt=2,
            due_at=NOW.astimezone(PLUS_2),
            fired_at=(NOW + timedelta(microseconds=7)).astimezone(PLUS_2),
            lateness_ms=0,
            outcome=FireOutcome.FAILED,
            error="RuntimeError: <script>é</script>",
        )
        record(self.job_store, failed)
        [back] = require(self.reopen(), FireHistory, "FireHistoryContract").history(failed.job_id, 10)
        assert back == failed  # frozen dataclass equality; aware datetimes compare as instants
        assert back.fired_at.utcoffset() == timedelta(0) and back.outcome is FireOutcome.FAILED

    def test_history_is_one_jobs_newest_first_limited_and_paged(self) -> None:
        mine = [fire(seconds=s, occurrence=s + 1) for s in range(5)]
        record(self.job_store, *mine[:2], fire(job_id="01900000-0000-7000-8000-00000000000b"))
        record(self.job_store, *mine[2:])
        page = self.fire_history.history(FIRED_JOB_ID, 3)
        assert [f.occurrence for f in page] == [5, 4, 3]
        rest = self.fire_history.history(FIRED_JOB_ID, 3, before=page[-1].fired_at)
        assert [f.occurrence for f in rest] == [2, 1]
        assert self.fire_history.history("01900000-0000-7000-8000-00000000000c", 3) == []

    def test_fires_roll_back_with_their_transaction(self) -> None:
        with pytest.raises(RuntimeError), self.job_store.transaction() as tx:
            self.fire_history.record_fires(tx, [fire()])
            raise RuntimeError("abort")
        assert self.fire_history.history(FIRED_JOB_ID, 10) == []

    def test_purge_history_deletes_old_entries_oldest_first_up_to_the_limit(self) -> None:
        record(self.job_store, *(fire(seconds=s, occurrence=s + 1) for s in range(6)))
        assert self.fire_history.purge_history(at(3), 2) == 2  # fired at +0.25 and +1.25
        assert [f.occurrence for f in self.fire_history.history(FIRED_JOB_ID, 10)] == [6, 5, 4, 3]
        assert self.fire_history.purge_history(at(3), 10) == 1  # +2.25; +3.25 is not before +3
        assert self.fire_history.purge_history(at(3), 10) == 0
        assert [f.occurrence for f in self.fire_history.history(FIRED_JOB_ID, 10)] == [6, 5, 4]

    def test_purge_history_returns_less_than_the_limit_only_when_nothing_old_is_left(self) -> None:
        """Whatever else the store deletes with the entries (a summary of them), calls until one
        returns less than ``limit`` leave nothing before the cutoff and keep everything after."""
        minutes = range(-180, 0, 7)  # fires in many minutes, some failed, varied lateness
        old = [
            fire(seconds=60 * m, occurrence=n, lateness_ms=10**n % 7_000_000, topic=f"t{n % 3}")
            for n, m in enumerate(minutes)
        ]
        old += [fire(seconds=60 * m, outcome=FireOutcome.FAILED, topic="t9") for m in minutes[::4]]
        kept = [fire(seconds=s, occurrence=100 + s) for s in range(0, 300, 60)]
        for start in range(0, len(old), 5):  # several transactions
            record(self.job_store, *old[start : start + 5])
        record(self.job_store, *kept)
        total, calls = 0, 0
        while True:
            deleted = self.fire_history.purge_history(at(0), 3)
            assert 0 <= deleted <= 3
            total, calls = total + deleted, calls + 1
            if deleted < 3:
                break
            assert calls < 1000
        assert total >= len(old)
        assert self.fire_history.purge_history(at(0), 3) == 0
        left = require(self.reopen(), FireHistory, "FireHistoryContract").history(FIRED_JOB_ID, 100)
        assert sorted(f.occurrence for f in left) == [100 + s for s in range(0, 300, 60)]
