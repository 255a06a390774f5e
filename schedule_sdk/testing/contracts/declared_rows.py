"""The :class:`~schedule_sdk.ports.DeclaredRows` contract: where the schedules declared in code are
kept (one row per name, written in a job store transaction, a sync lock across processes).

Subclass it in your test module (a name starting with ``Test``), say how to open your store and,
when the store does not keep the declarations itself, how to open the rows on a store::

    from schedule_sdk.testing.contracts.declared_rows import DeclaredRowsContract

    class TestMyDeclaredRows(DeclaredRowsContract):
        def open_store(self):
            return MyJobStore(...)          # a fresh, empty store, once per test

        def open_rows(self, store):
            return MyDeclaredRows(store)    # default: the store itself, if it is a DeclaredRows

What the suite checks: a put is seen by ``rows`` in its own transaction, by ``read`` and by other
processes only after the commit, and not at all after a rollback; one row per name (a put
replaces); rows come ordered by name with their job (the job as the transaction sees it, None
when there is none); ``synced_at`` comes back aware UTC; a second sync waits for the first one's
lock and then sees what it wrote.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest

from schedule_sdk.domain.declared import StoredDeclaration
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import DeclaredRows, Guard, JobStore, require
from schedule_sdk.testing.contracts.rows import NOW, insert, job
from schedule_sdk.testing.contracts.store import StoreContract


def declaration(name: str, job_id: str, **changes: Any) -> StoredDeclaration:
    """A stored declaration of ``name`` owning ``job_id``, synced at ``NOW``."""
    values: dict[str, Any] = {
        "name": name,
        "job_id": job_id,
        "kind": "cron",
        "fingerprint": "f" * 64,
        "spec": '{"cron": "0 9 * * 1-5"}',
        "version": 0,
        "declared": True,
        "synced_at": NOW,
    }
    values.update(changes)
    return StoredDeclaration(**values)


def names(pairs: list[tuple[StoredDeclaration, ScheduledJob | None]]) -> list[str]:
    return [row.name for row, _ in pairs]


class DeclaredRowsContract(StoreContract):
    """``DeclaredRows``: ``lock``, ``rows``, ``put`` and ``read``."""

    # -- hooks ---------------------------------------------------------------------------------

    def open_rows(self, store: JobStore) -> DeclaredRows:
        """The declared rows of ``store`` (default: the store itself, when it keeps them)."""
        return require(store, DeclaredRows, "DeclaredRowsContract")

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def declared(self) -> DeclaredRows:
        return self.open_rows(self.job_store)

    def put(self, *rows: StoredDeclaration, store: JobStore | None = None) -> None:
        store = store or self.job_store
        declared = self.open_rows(store)
        with store.transaction() as tx:
            declared.lock(tx)
            declared.put(tx, list(rows))

    # -- the contract ----------------------------------------------------------------------------

    def test_an_empty_store_has_no_declarations(self) -> None:
        assert self.declared.read() == []
        with self.job_store.transaction() as tx:
            self.declared.lock(tx)
            assert self.declared.rows(tx) == []

    def test_put_then_read_returns_every_field_ordered_by_name_with_its_job(self) -> None:
        owned = insert(self.job_store, job())[0]
        b = declaration("b.report", owned.id, kind="every", spec='{"every_ms": 5000}', version=7)
        a = declaration("a.audit", "01900000-0000-7000-8000-0000000000ff", declared=False)
        self.put(b, a)
        pairs = self.declared.read()
        assert pairs == [(a, None), (b, owned)]

    def test_synced_at_comes_back_aware_utc(self) -> None:
        paris = timezone(timedelta(hours=2))
        self.put(declaration("app.x", "j1", synced_at=NOW.astimezone(paris)))
        [(row, _)] = self.declared.read()
        assert row.synced_at == NOW
        assert row.synced_at.utcoffset() == timedelta(0)
        assert row.synced_at.tzinfo is not None and row.synced_at.astimezone(UTC) == NOW

    def test_a_put_replaces_the_row_of_its_name(self) -> None:
        self.put(declaration("app.x", "j1", fingerprint="1" * 64))
        self.put(declaration("app.x", "j2", fingerprint="2" * 64, version=3, declared=False))
        [(row, _)] = self.declared.read()
        assert (row.job_id, row.fingerprint, row.version, row.declared) == ("j2", "2" * 64, 3, False)

    def test_rows_in_a_transaction_see_its_own_puts_and_jobs_others_see_them_after_commit(self) -> None:
        other = self.open_rows(self.reopen())
        owned = job()
        with self.job_store.transaction() as tx:
            self.declared.lock(tx)
            tx.insert(owned)
            self.declared.put(tx, [declaration("app.x", owned.id)])
            [(row, seen)] = self.declared.rows(tx)
            assert row.name == "app.x" and seen is not None and seen.id == owned.id
            assert self.declared.read() == []
        assert names(other.read()) == ["app.x"]
        assert other.read()[0][1] == owned

    def test_a_rolled_back_put_leaves_nothing(self) -> None:
        self.put(declaration("app.kept", "j0"))
        with pytest.raises(RuntimeError, match="boom"), self.job_store.transaction() as tx:
            self.declared.lock(tx)
            self.declared.put(tx, [declaration("app.x", "j1"), declaration("app.kept", "j9")])
            raise RuntimeError("boom")
        [(row, _)] = self.declared.read()
        assert (row.name, row.job_id) == ("app.kept", "j0")

    def test_rows_show_the_job_as_the_transaction_changed_it(self) -> None:
        owned = insert(self.job_store, job())[0]
        self.put(declaration("app.x", owned.id))
        with self.job_store.transaction() as tx:
            self.declared.lock(tx)
            current = tx.get(owned.id)
            assert current is not None
            moved = dataclasses.replace(current, run_at=NOW + timedelta(hours=1))
            assert tx.update(moved, Guard(frozenset({JobStatus.PENDING})))
            [(_, seen)] = self.declared.rows(tx)
            assert seen is not None and seen.run_at == NOW + timedelta(hours=1)

    def test_a_second_sync_waits_for_the_first_and_sees_what_it_wrote(self) -> None:
        second_store = self.reopen()
        second = self.open_rows(second_store)
        started, seen = threading.Event(), []

        def sync_later() -> None:
            started.set()
            with second_store.transaction() as tx:
                second.lock(tx)
                seen.extend(names(second.rows(tx)))

        thread = threading.Thread(target=sync_later)
        with self.job_store.transaction() as tx:
            self.declared.lock(tx)
            thread.start()
            assert started.wait(10)
            self.declared.put(tx, [declaration("app.first", "j1")])
        thread.join(10)
        assert not thread.is_alive()
        assert seen == ["app.first"]
