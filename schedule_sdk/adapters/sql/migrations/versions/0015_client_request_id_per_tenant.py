"""Client request ids are unique per tenant.

Revision ID: 0015
Revises: 0014

A ``client_request_id`` was unique across all jobs, so one tenant's id answered "in use" to
another tenant. Now it is unique among the jobs of one ``tenant_id``, and among the jobs without
a tenant (``tenant_id IS NULL``), in any status:

- ``uq_schedule_jobs_client_request_id (client_request_id) WHERE client_request_id IS NOT NULL
  AND tenant_id IS NULL``: the jobs without a tenant;
- ``uq_schedule_jobs_tenant_client_request_id (tenant_id, client_request_id) WHERE
  client_request_id IS NOT NULL AND tenant_id IS NOT NULL``: per tenant.

Two partial indexes, because a unique index counts NULLs as distinct. Every row that satisfied
the old index satisfies the new ones, so the upgrade cannot fail. The downgrade restores the
global index, and fails if two tenants have come to use the same id meanwhile.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_GLOBAL = "uq_schedule_jobs_client_request_id"
_PER_TENANT = "uq_schedule_jobs_tenant_client_request_id"


def _where(condition: str) -> dict[str, Any]:
    where = sa.text(condition)
    return {"postgresql_where": where, "sqlite_where": where}


def upgrade() -> None:
    op.drop_index(_GLOBAL, table_name="schedule_jobs")
    op.create_index(
        _GLOBAL,
        "schedule_jobs",
        ["client_request_id"],
        unique=True,
        **_where("client_request_id IS NOT NULL AND tenant_id IS NULL"),
    )
    op.create_index(
        _PER_TENANT,
        "schedule_jobs",
        ["tenant_id", "client_request_id"],
        unique=True,
        **_where("client_request_id IS NOT NULL AND tenant_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(_PER_TENANT, table_name="schedule_jobs")
    op.drop_index(_GLOBAL, table_name="schedule_jobs")
    where = _where("client_request_id IS NOT NULL")
    op.create_index(_GLOBAL, "schedule_jobs", ["client_request_id"], unique=True, **where)
