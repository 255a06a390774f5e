"""docs/howto/dashboard.md's FastAPI mount, run as a test: the pages answer under the prefix and
the auth hook decides who may act."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import FastAPI, Request

from schedule_sdk import ScheduleContainer
from tests.integration.dashboard.conftest import Client


def test_mount_in_fastapi(tmp_path):
    container = ScheduleContainer()
    container.config.from_dict({"database_url": f"sqlite:///{tmp_path}/jobs.db"})
    # --8<-- [start:mount]
    from schedule_sdk.dashboard import create_dashboard

    def may_act(request: Request) -> bool:  # your app's decision: a session, a header set by SSO...
        return request.headers.get("x-forwarded-groups", "") == "scheduler-admins"

    app = FastAPI()
    app.mount("/scheduler", create_dashboard(container, auth=may_act))
    # --8<-- [end:mount]
    client = Client(app)
    page = client.get("/scheduler/jobs")
    assert page.status_code == 200 and 'href="/scheduler/jobs"' in page.text and "read-only" in page.text
    admin = client.get("/scheduler/", headers={"x-forwarded-groups": "scheduler-admins"})
    assert "can act" in admin.text
    container.shutdown_resources()


def test_scope_operators_by_tenant(tmp_path):
    container = ScheduleContainer()
    container.config.from_dict({"database_url": f"sqlite:///{tmp_path}/jobs.db"})
    # --8<-- [start:tenants]
    from schedule_sdk.dashboard import TenantScope, create_dashboard

    def scope(request: Request) -> bool | TenantScope:
        groups = request.headers.get("x-forwarded-groups", "").split(",")
        if "scheduler-admins" in groups:
            return True  # every tenant, and may act
        tenants = [g.removeprefix("tenant-") for g in groups if g.startswith("tenant-")]
        return TenantScope(tenants, act="tenant-operators" in groups)  # only these tenants

    app = FastAPI()
    app.mount("/scheduler", create_dashboard(container, auth=scope))
    # --8<-- [end:tenants]
    from schedule_sdk import JobMetadata, OneShotSpec

    service = container.schedule_service()
    mine, theirs = (
        service.schedule_at(
            OneShotSpec(
                topic="t",
                run_at=datetime.now(UTC) + timedelta(days=1),
                timezone="UTC",
                metadata=JobMetadata(tenant_id=t),
            )
        ).id
        for t in ("acme", "globex")
    )
    client = Client(app)
    headers = {"x-forwarded-groups": "tenant-acme,tenant-operators"}
    listed = client.get("/scheduler/jobs", headers=headers).text
    assert mine in listed and theirs not in listed
    assert client.get(f"/scheduler/jobs/{theirs}", headers=headers).status_code == 404
    container.shutdown_resources()
