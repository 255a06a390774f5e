"""Rows with a concurrency key are claimed by one server function.

Revision ID: 0024
Revises: 0023

PostgreSQL only: ``schedule_sdk_claim_keyed_first(now, worker, lease, limit)`` locks the keys with
due waiting rows, then claims their rows within each key's limit and rows without a key in the
room left; each of its statements takes a snapshot of its own, so the claim counts a key's running
rows after its lock is held. A worker of an earlier release keeps claiming with its own two
statements, which take the same locks: the two may run side by side during an upgrade.

The body is a copy of ``KEYED_FIRST_SOURCE`` in ``schedule_sdk.adapters.stores.pg_claims`` as of
this revision (a test holds the installed function equal to it).
"""

# ruff: noqa: E501  (the function's text is a copy, line for line)
from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_SOURCE = r"""
BEGIN
    PERFORM set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true);
    PERFORM 1 FROM (SELECT set_config('schedule_sdk.claim_keys', COALESCE(array_agg(l.key), '{}')::text, true) FROM (
SELECT q.key, pg_advisory_xact_lock(378093, hashtext(q.key)) FROM (
    SELECT d.key FROM (
        SELECT DISTINCT concurrency_key AS key FROM schedule_jobs
        WHERE status = 'pending' AND concurrency_key IS NOT NULL AND run_at <= p_now
    ) d ORDER BY hashtext(d.key), d.key
) q) l) l;
    RETURN QUERY WITH running AS (
    SELECT concurrency_key AS key, count(*) AS n FROM schedule_jobs
    WHERE status = 'active' AND concurrency_key IS NOT NULL
      AND concurrency_key = ANY(current_setting('schedule_sdk.claim_keys')::varchar[])
    GROUP BY concurrency_key
), waiting AS (
    SELECT j.id, j.run_at, j.concurrency_limit AS lim, COALESCE(r.n, 0) AS n,
           row_number() OVER (PARTITION BY j.concurrency_key ORDER BY j.run_at, j.id) AS place
    FROM schedule_jobs j LEFT JOIN running r ON r.key = j.concurrency_key
    WHERE j.status = 'pending' AND j.concurrency_key IS NOT NULL AND j.run_at <= p_now
      AND j.concurrency_key = ANY(current_setting('schedule_sdk.claim_keys')::varchar[])
), chosen AS MATERIALIZED (
    SELECT id FROM waiting WHERE n + place <= lim ORDER BY run_at, id LIMIT p_limit
), plain AS MATERIALIZED (
    SELECT id FROM schedule_jobs
    WHERE status = 'pending' AND run_at <= p_now AND concurrency_key IS NULL
    ORDER BY run_at LIMIT greatest(p_limit - (SELECT count(*) FROM chosen), 0)
    FOR UPDATE SKIP LOCKED
), claimed AS (

UPDATE schedule_jobs s SET status = 'active', claimed_by = p_worker, claimed_until = p_lease, updated_at = p_now
WHERE s.id = ANY(ARRAY(SELECT id FROM chosen UNION ALL SELECT id FROM plain)) AND coalesce(s.status, '') = 'pending'
RETURNING s
)
SELECT claimed.s, left_over.due, left_over.next_due FROM (
    SELECT (SELECT count(*) FROM waiting) > (SELECT count(*) FROM chosen) AS due, (
        SELECT min(run_at) FROM schedule_jobs WHERE status = 'pending' AND run_at > p_now
    ) AS next_due
) left_over LEFT JOIN claimed ON true;
END
"""

_FUNCTION = f"""
CREATE OR REPLACE FUNCTION schedule_sdk_claim_keyed_first(
    p_now timestamptz, p_worker varchar, p_lease timestamptz, p_limit integer
) RETURNS TABLE (claimed_job schedule_jobs, keyed_waiting boolean, following_due timestamptz)
LANGUAGE plpgsql VOLATILE AS $body${_SOURCE}$body$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "DROP FUNCTION IF EXISTS schedule_sdk_claim_keyed_first(timestamptz, varchar, timestamptz, integer)"
        )
