"""The :class:`~schedule_sdk.ports.JoinableStore` contract: writing in the caller's transaction.

Subclass it in your test module (a name starting with ``Test``), say how to open your store and
how to open a *caller's connection* on its database, with a transaction begun::

    from schedule_sdk.testing.contracts.joined import JoinedTransactionContract

    class TestMyJoinedTransaction(JoinedTransactionContract):
        def open_store(self):
            return MyJobStore(...)          # a fresh, empty store, once per test

        def open_connection(self):
            return my_engine.connect()      # what the app passes as connection=

The connection is ended through :meth:`~JoinedTransactionContract.commit`,
:meth:`~JoinedTransactionContract.rollback` and :meth:`~JoinedTransactionContract.close_connection`,
which call its ``commit()``, ``rollback()`` and ``close()`` (a SQLAlchemy ``Connection``, a
``Session``, a :class:`~schedule_sdk.adapters.memory.MemoryConnection`); override them for
anything else. What the suite checks: rows written through ``join`` are visible to others only
after the caller commits and not at all after it rolls back, leaving the ``join`` block (even
with an exception) ends nothing, and the ``when_done`` callbacks run once the caller's
transaction ends, after its commit or its rollback.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.status import OPEN_STATUSES, JobStatus
from schedule_sdk.ports import Guard, JoinableStore, require
from schedule_sdk.testing.contracts.rows import NOW, insert, job
from schedule_sdk.testing.contracts.store import StoreContract


class JoinedTransactionContract(StoreContract):
    """``JoinableStore.join`` and ``JoinedTransaction``, with the caller's transaction."""

    _connections: list[Any]

    # -- hooks ---------------------------------------------------------------------------------

    def open_connection(self) -> Any:
        """A caller's connection on the store's database (a transaction begun or begun on first
        use), as an app passes it to ``connection=``."""
        raise NotImplementedError("a contract subclass returns a caller's connection from open_connection()")

    def commit(self, connection: Any) -> None:
        connection.commit()

    def rollback(self, connection: Any) -> None:
        connection.rollback()

    def close_connection(self, connection: Any) -> None:
        connection.close()

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def joinable(self) -> JoinableStore:
        """The current test's store, as the capability under test."""
        return require(self.job_store, JoinableStore, "JoinedTransactionContract")

    def caller(self) -> Any:
        """A caller's connection, closed when the test ends."""
        connection = self.open_connection()
        self._connections.append(connection)
        return connection

    def setup_method(self, method: object) -> None:
        super().setup_method(method)
        self._connections = []

    def teardown_method(self, method: object) -> None:
        for connection in self._connections:
            self.close_connection(connection)
        self._connections = []
        super().teardown_method(method)

    def seen(self, row: ScheduledJob) -> ScheduledJob | None:
        """``row`` as another process reads it now."""
        return self.reopen().get(row.id)

    # -- the contract --------------------------------------------------------------------------

    def test_a_row_written_in_the_callers_transaction_is_visible_only_after_it_commits(self) -> None:
        connection, new = self.caller(), job()
        with self.joinable.join(connection) as tx:
            tx.insert(new)
            assert tx.get(new.id) == new  # the caller's transaction reads its own writes
        assert self.seen(new) is None  # the block ended: still the caller's, uncommitted
        self.commit(connection)
        assert self.seen(new) == new

    def test_nothing_written_in_the_callers_transaction_remains_after_it_rolls_back(self) -> None:
        existing = insert(self.job_store, job())[0]
        connection, new, batch = self.caller(), job(), [job(), job()]
        with self.joinable.join(connection) as tx:
            tx.insert(new)
            tx.insert_many(batch)
            assert tx.update(
                existing.evolve(status=JobStatus.CANCELLED, updated_at=NOW), Guard(OPEN_STATUSES)
            )
        self.rollback(connection)
        assert [self.seen(j) for j in (new, *batch)] == [None, None, None]
        assert self.seen(existing) == existing

    def test_guarded_updates_in_the_callers_transaction_commit_with_it(self) -> None:
        row = insert(self.job_store, job())[0]
        moved = row.evolve(run_at=NOW + timedelta(hours=1), updated_at=NOW)
        connection = self.caller()
        with self.joinable.join(connection) as tx:
            locked = tx.get(row.id, for_update=True)
            assert locked == row
            assert not tx.update(moved, Guard(frozenset({JobStatus.ACTIVE})))  # the guard fails
            assert tx.update(moved, Guard(frozenset({JobStatus.PENDING})))
            assert tx.get(row.id) == moved
        assert self.seen(row) == row
        self.commit(connection)
        assert self.seen(row) == moved

    def test_leaving_the_block_with_an_exception_neither_commits_nor_rolls_back(self) -> None:
        connection, new = self.caller(), job()
        with pytest.raises(RuntimeError, match="the caller's"), self.joinable.join(connection) as tx:
            tx.insert(new)
            raise RuntimeError("the caller's code failed")
        assert self.seen(new) is None
        self.commit(connection)  # the caller decides: here it commits anyway
        assert self.seen(new) == new

    def test_when_done_calls_committed_once_the_caller_has_committed(self) -> None:
        connection, new = self.caller(), job()
        calls: list[tuple[str, ScheduledJob | None]] = []
        with self.joinable.join(connection) as tx:
            tx.insert(new)
            tx.when_done(
                lambda: calls.append(("committed", self.seen(new))),
                lambda: calls.append(("rolled back", self.seen(new))),
            )
        assert calls == []  # not when the block ends: when the caller's transaction does
        self.commit(connection)
        assert calls == [("committed", new)]  # after the commit: the row is there for all

    def test_when_done_calls_rolled_back_once_the_caller_has_rolled_back(self) -> None:
        connection, new = self.caller(), job()
        calls: list[str] = []
        with self.joinable.join(connection) as tx:
            tx.insert(new)
            tx.when_done(lambda: calls.append("committed"), lambda: calls.append("rolled back"))
        assert calls == []
        self.rollback(connection)
        assert calls == ["rolled back"]
        assert self.seen(new) is None

    def test_every_callback_of_the_transaction_runs_in_order(self) -> None:
        connection, calls = self.caller(), []

        def note(what: str) -> Callable[[], None]:
            return lambda: calls.append(what)

        for n in range(2):
            with self.joinable.join(connection) as tx:
                tx.insert(job())
                tx.when_done(note(f"committed {n}"), note(f"rolled back {n}"))
        self.commit(connection)
        assert calls == ["committed 0", "committed 1"]
