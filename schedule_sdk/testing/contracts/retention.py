"""The :class:`~schedule_sdk.ports.Retention` capability's contract suite:
:class:`JobStoreRetentionContract` (also importable from :mod:`.job_store`)."""

from __future__ import annotations

from datetime import timedelta

from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import (
    Retention,
    require,
)
from schedule_sdk.testing.contracts.rows import NOW, at, ids, insert, job
from schedule_sdk.testing.contracts.store import (
    FINISHED,
    OPEN,
    StoreContract,
)


class JobStoreRetentionContract(StoreContract):
    """The :class:`~schedule_sdk.ports.Retention` capability (``purge_finished``, ``one_writer``)
    and the paused status."""

    @property
    def retention(self) -> Retention:
        """The current test's store, as the capability under test."""
        return require(self.job_store, Retention, "JobStoreRetentionContract")

    def test_the_store_declares_retention_and_says_whether_it_has_one_writer(self) -> None:
        assert isinstance(self.retention.one_writer, bool)

    def test_purge_deletes_only_finished_rows_older_than_the_cutoff(self) -> None:
        old_finished = [job(status=s, updated_at=at(-3600 - i)) for i, s in enumerate(FINISHED)]
        old_open = [job(status=s, updated_at=at(-7200)) for s in OPEN]
        recent_finished = [job(status=s, updated_at=at(-10)) for s in FINISHED]
        insert(self.job_store, *old_finished, *old_open, *recent_finished)
        assert self.retention.purge_finished(at(-60), 100) == 3
        for gone in old_finished:
            assert self.job_store.get(gone.id) is None
        for kept in old_open + recent_finished:
            assert self.job_store.get(kept.id) == kept

    def test_purge_deletes_at_most_limit_rows_oldest_first(self) -> None:
        rows = insert(
            self.job_store, *[job(status=JobStatus.COMPLETED, updated_at=at(-100 + i)) for i in range(7)]
        )
        assert self.retention.purge_finished(NOW, 3) == 3
        left = [r for r in rows if self.job_store.get(r.id) is not None]
        assert ids(left) == ids(rows[3:])
        assert self.retention.purge_finished(NOW, 3) == 3
        assert self.retention.purge_finished(NOW, 3) == 1
        assert self.retention.purge_finished(NOW, 3) == 0

    def test_the_cutoff_is_exclusive(self) -> None:
        [row] = insert(self.job_store, job(status=JobStatus.FAILED, updated_at=at(-5)))
        assert self.retention.purge_finished(at(-5), 10) == 0
        assert self.retention.purge_finished(at(-5) + timedelta(microseconds=1), 10) == 1
        assert self.job_store.get(row.id) is None

    def test_a_paused_row_roundtrips_and_is_never_claimed(self) -> None:
        [paused] = insert(self.job_store, job(status=JobStatus.PAUSED, run_at=at(-10)))
        assert self.job_store.get(paused.id) == paused
        assert self.job_store.claim_due(NOW, 10, "w", at(30)) == []
        assert self.job_store.claim(paused.id, 1, 1, NOW, "w", at(30)) is None
        assert self.job_store.next_due_at() is None
