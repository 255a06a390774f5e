"""PostgreSQL: ending the sessions a dead worker left inside a transaction.

A worker that stops without closing its connections (paused by ``SIGSTOP``, a frozen VM, a host
cut off the network) leaves each session as it was. One caught between two statements of a
transaction stays ``idle in transaction`` and keeps its row locks until the process resumes or
TCP gives up, which can take hours. Its claims are exactly the rows it may have locked (a lease
renewal, an outcome being written), and the release of a dead worker's claims skips locked rows,
so those fires would wait for the process, or for their leases, instead of firing elsewhere.

Before a peer releases the claims of workers it declared dead, it ends their sessions that are
not idle, found by their ``application_name`` (:func:`~schedule_sdk.adapters.sql.engine.session_name`),
and waits for them to exit (PostgreSQL 14 and later), so the release that follows finds the rows
unlocked. This is also a fence: whatever such a session was writing is rolled back, never
committed after its claims went to another worker. Idle sessions hold no locks and are left alone.

A session can be ended by a member of its role (or of ``pg_signal_backend``); the sessions of
other roles are skipped, and so is the whole step, with a warning, if it fails.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from schedule_sdk.adapters.sql.engine import session_name

logger = logging.getLogger(__name__)

#: How long ending a session may wait for its process to exit (milliseconds).
EXIT_WAIT_MS = 2000

_SESSIONS = """
    FROM pg_stat_activity
    WHERE datname = current_database()
      AND application_name = ANY(CAST(:names AS text[]))
      AND state <> 'idle'
      AND pid <> pg_backend_pid()
      AND (pg_has_role(usesysid, 'MEMBER') OR pg_has_role('pg_signal_backend', 'MEMBER'))
"""
_END_AND_WAIT = sa.text(
    f"SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, {EXIT_WAIT_MS})) {_SESSIONS}"
)
_END = sa.text(f"SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) {_SESSIONS}")


def end_sessions_of(conn: Connection, worker_ids: Sequence[str]) -> int:
    """End the non-idle sessions of the workers ``worker_ids`` on ``conn``'s database (through a
    savepoint, so a failure leaves ``conn``'s transaction usable); return how many ended."""
    if not worker_ids:
        return 0
    version = conn.dialect.server_version_info or (0,)
    statement = _END_AND_WAIT if version >= (14,) else _END
    names = [session_name(worker_id) for worker_id in worker_ids]
    try:
        with conn.begin_nested():
            ended = int(conn.execute(statement, {"names": names}).scalar() or 0)
    except exc.DBAPIError as error:
        logger.warning("could not end the open sessions of dead workers: %s", error.orig or error)
        return 0
    if ended:
        logger.warning("ended %d database sessions that dead workers left inside a transaction", ended)
    return ended
