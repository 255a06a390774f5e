"""The trace context of the call that scheduled a job.

Revision ID: 0009
Revises: 0005

``trace_context`` (text, NULL when there was no trace): what the ``Tracing`` port captured at
schedule time (W3C ``traceparent``/``tracestate`` as JSON with OpenTelemetry), restored around
each fire so the fire's span joins the trace that scheduled the job. Existing rows get NULL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("schedule_jobs", sa.Column("trace_context", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.drop_column("trace_context")
