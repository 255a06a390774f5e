"""docs/howto/dashboard.md's FastAPI mount, run as a test: the pages answer under the prefix and
the auth hook decides who may act."""

from __future__ import annotations

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
