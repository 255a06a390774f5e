"""The PostgreSQL store's own claim path (``adapters/sql/fast/pg_claims.py``): driver sessions from a
pool of their own, outside the shared JobStore contract."""

from __future__ import annotations

import pytest

from schedule_sdk.domain.errors import StoreUnavailable
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import JobStore

from .jobs import NOW, at, ids, insert, job


@pytest.mark.postgres
@pytest.mark.parametrize("store_factory", ["postgres"], indirect=True)
def test_a_killed_claim_session_raises_store_unavailable_once_then_claims_again(job_store: JobStore) -> None:
    """Claims run on their own pool of driver sessions: a session the server terminated fails
    one claim with the typed error, claims nothing, and is replaced for the next claim."""
    first, second = insert(job_store, job(run_at=at(-2)), job(run_at=at(-1)))
    assert ids(job_store.claim_many([(first.id, 1, 1)], NOW, "w1", at(30))) == [first.id]
    with job_store.engine.connect() as admin:  # type: ignore[attr-defined]
        admin.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND query LIKE '%%chosen%%'"
        )
    with pytest.raises(StoreUnavailable) as raised:
        job_store.claim_many([(second.id, 1, 1)], NOW, "w1", at(30))
    assert raised.value.code == "SCHEDULE_STORE_UNAVAILABLE"
    assert job_store.get(second.id).status is JobStatus.PENDING  # type: ignore[union-attr]
    assert ids(job_store.claim_many([(second.id, 1, 1)], NOW, "w1", at(30))) == [second.id]
