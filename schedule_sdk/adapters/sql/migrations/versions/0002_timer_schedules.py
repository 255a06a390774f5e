"""Create timer_schedules (see docs/explanation/timer.md).

Revision ID: 0002
Revises: 0001

SQLite: the documented DDL (TEXT columns, STRICT). PostgreSQL: the same with timestamptz
for the three instants. The foreign key to the host application's ``service_calls(tenant_id,
service_call_id) ON DELETE CASCADE`` is created only when the upgrade is run with the attribute
``timer_service_calls_fk`` set (the timer does not own that table, which must then exist).
"""

from __future__ import annotations

from alembic import context, op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_FK = """,
    FOREIGN KEY (tenant_id, service_call_id)
        REFERENCES service_calls(tenant_id, service_call_id)
        ON DELETE CASCADE"""

_TABLE = """CREATE TABLE timer_schedules (
    tenant_id TEXT NOT NULL,
    service_call_id TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    due_at {instant} NOT NULL,
    registered_at {instant} NOT NULL,
    reached_at {instant},
    state TEXT NOT NULL DEFAULT 'Scheduled',
    PRIMARY KEY (tenant_id, service_call_id){fk},
    CONSTRAINT ck_timer_schedules_state CHECK (state IN ('Scheduled', 'Reached'))
){strict}"""


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    fk = bool(context.config.attributes.get("timer_service_calls_fk", False))
    op.execute(
        _TABLE.format(
            instant="TEXT" if sqlite else "TIMESTAMPTZ",
            fk=_FK if fk else "",
            strict=" STRICT" if sqlite else "",
        )
    )
    op.execute("CREATE INDEX idx_timer_schedules_due_at ON timer_schedules(tenant_id, state, due_at)")
    op.execute("CREATE INDEX idx_timer_schedules_correlation_id ON timer_schedules(correlation_id)")


def downgrade() -> None:
    op.execute("DROP TABLE timer_schedules")
