"""examples/fastapi_app end to end: a real uvicorn process, driven over real HTTP.

One server per backend (SQLite, PostgreSQL, PostgreSQL + Redis) serves the module's tests; the
last tests stop it with SIGTERM and restart it on the same database.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.support.waiting import wait_for
from tests.support.webhook import Webhook

from .conftest import AppBackend
from .support import Process, example_env, free_port

#: One pytest-xdist worker runs the module: one app server per backend (a module fixture).
pytestmark = pytest.mark.xdist_group("fastapi-app")

#: uvicorn shuts down gracefully on SIGTERM, then re-raises the signal, so a clean stop reports it.
CLEAN_EXIT = (0, -signal.SIGTERM)


class Server:
    """``python -m examples.fastapi_app`` on a free port, with an httpx client."""

    def __init__(self, backend: AppBackend, log: Path, webhook_url: str | None = None) -> None:
        port = free_port()
        env = example_env(
            PORT=str(port),
            SCHEDULE_POLL_INTERVAL="0.5",
            WEBHOOK_URL=webhook_url,
            DIGEST_EVERY_SECONDS="1",  # the app's declared schedule, every second instead of hourly
            **backend.env(),
        )
        self.process = Process(["-m", "examples.fastapi_app"], env, log)
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
        wait_for(self._ready, "the server to answer /health")

    def _ready(self) -> bool:
        if not self.process.alive():
            raise AssertionError(f"the server exited:\n{self.process.output()}")
        try:
            return self.http.get("/health").status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> int:
        self.http.close()
        return self.process.stop()

    def create(self, user: str, due_in: float, **extra: Any) -> dict[str, Any]:
        due = datetime.now(UTC) + timedelta(seconds=due_in)
        body = {"user_id": user, "message": f"hello {user}", "due_at": due.isoformat(), **extra}
        response = self.http.post("/reminders", json=body)
        assert response.status_code == 201, response.text
        reminder: dict[str, Any] = response.json()
        return reminder

    def sent_ids(self) -> list[str]:
        response = self.http.get("/sent")
        assert response.status_code == 200, response.text
        return [row["reminder_id"] for row in response.json()]

    def wait_sent(self, reminder_id: str) -> list[str]:
        def sent() -> list[str] | None:
            ids = self.sent_ids()
            return ids if reminder_id in ids else None

        return wait_for(sent, f"reminder {reminder_id} to be sent")

    def wait_status(self, reminder_id: str, status: str) -> dict[str, Any]:
        """The reminder once it reads ``status``: a fire's outcome is recorded after its listener
        returns, so the listener's own writes can be visible before it."""

        def reached() -> dict[str, Any] | None:
            response = self.http.get(f"/reminders/{reminder_id}")
            assert response.status_code == 200, response.text
            reminder: dict[str, Any] = response.json()
            return reminder if reminder["status"] == status else None

        return wait_for(reached, f"reminder {reminder_id} to be {status}")

    def digests(self, count: int) -> list[dict[str, Any]]:
        """The digests of the declared schedule, once this process made ``count`` of them."""

        def made() -> list[dict[str, Any]] | None:
            response = self.http.get("/digests")
            assert response.status_code == 200, response.text
            runs: list[dict[str, Any]] = response.json()
            return runs if len(runs) >= count else None

        return wait_for(made, f"{count} digests")


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture(scope="module")
def server(
    app_backend: AppBackend, tmp_path_factory: pytest.TempPathFactory, webhook: Webhook
) -> Iterator[Server]:
    server = Server(app_backend, tmp_path_factory.mktemp("fastapi") / "server.log", webhook.url + "/hook")
    yield server
    server.stop()


def test_the_async_listener_calls_the_webhook_through_the_apps_one_client(
    server: Server, webhook: Webhook
) -> None:
    """Three fires, one shared httpx.AsyncClient on the app's loop: every call succeeds and they
    reuse its pooled keep-alive connection."""
    ids = [server.create("ivy", due_in=1 + i * 0.3, client_request_id=f"ivy-{i}")["id"] for i in range(3)]
    for reminder_id in ids:
        server.wait_sent(reminder_id)
    called = [body["reminder_id"] for body in webhook.received if body["reminder_id"] in ids]
    assert sorted(called) == sorted(ids)  # each once (the webhook is shared by the backends' servers)
    for reminder_id in ids:
        server.wait_status(reminder_id, "completed")


def test_a_rolled_back_request_leaves_no_job_and_a_committed_one_fires(server: Server) -> None:
    """The reminder's job and the app's row are one transaction: a request whose row is refused
    (the same reminder twice) rolls back, and the job it had scheduled never exists."""
    due = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat()
    body = {"user_id": "hal", "message": "hello hal", "due_at": due}
    created = server.http.post("/reminders", json=body)
    assert created.status_code == 201, created.text
    kept = created.json()
    refused = server.http.post("/reminders", json=body)
    assert refused.status_code == 409, refused.text
    assert refused.json() == {  # the same shape as the SDK's errors
        "code": "REMINDER_EXISTS",
        "message": "this user already has this reminder at this time",
    }
    listed = server.http.get("/reminders", params={"owner": "hal", "limit": 500}).json()["items"]
    assert [item["id"] for item in listed] == [kept["id"]]  # the rolled-back job never existed
    server.wait_sent(kept["id"])
    # a later reminder fired too: the refused one, due before it, would have fired by now
    later = (datetime.now(UTC) + timedelta(seconds=0.2)).isoformat()
    marker = server.http.post("/reminders", json={"user_id": "hal-marker", "message": "m", "due_at": later})
    assert marker.status_code == 201, marker.text
    server.wait_sent(marker.json()["id"])
    sent = [row for row in server.http.get("/sent").json() if row["user_id"] == "hal"]
    assert [row["reminder_id"] for row in sent] == [kept["id"]]


def test_a_reminder_fires_at_its_due_time(server: Server) -> None:
    reminder = server.create("ana", due_in=1, timezone="Europe/Paris")
    assert reminder["status"] == "pending"
    assert reminder["timezone"] == "Europe/Paris"

    server.wait_sent(reminder["id"])
    sent = [row for row in server.http.get("/sent").json() if row["reminder_id"] == reminder["id"]]
    assert [(row["user_id"], row["message"]) for row in sent] == [("ana", "hello ana")]
    server.wait_status(reminder["id"], "completed")


def test_a_cancelled_reminder_never_fires(server: Server) -> None:
    cancelled = server.create("bob", due_in=2)
    assert server.http.delete(f"/reminders/{cancelled['id']}").status_code == 204
    assert server.http.delete(f"/reminders/{cancelled['id']}").status_code == 204  # idempotent
    control = server.create("bob", due_in=3)  # due after the cancelled one

    sent = server.wait_sent(control["id"])  # by now the cancelled one would have fired
    assert cancelled["id"] not in sent
    assert server.http.get(f"/reminders/{cancelled['id']}").json()["status"] == "cancelled"


def test_paging_through_the_list(server: Server) -> None:
    created = [server.create("carol", due_in=3600)["id"] for _ in range(25)]
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"owner": "carol", "limit": 10, **({"cursor": cursor} if cursor else {})}
        page = server.http.get("/reminders", params=params).json()
        pages.append([item["id"] for item in page["items"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [i for p in pages for i in p] == created  # creation order, no duplicates, none missing

    pending = server.http.get("/reminders", params={"owner": "carol", "status": "pending", "limit": 500})
    assert len(pending.json()["items"]) == 25


def test_reschedule_replaces_the_reminder(server: Server) -> None:
    old = server.create("dan", due_in=3600)
    soon = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    response = server.http.post(f"/reminders/{old['id']}/reschedule", json={"due_at": soon})
    assert response.status_code == 200, response.text
    new = response.json()
    assert new["id"] != old["id"]
    assert new["rescheduled_from"] == old["id"]
    assert (new["user_id"], new["message"]) == ("dan", "hello dan")

    sent = server.wait_sent(new["id"])
    assert old["id"] not in sent
    assert server.http.get(f"/reminders/{old['id']}").json()["status"] == "cancelled"
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    again = server.http.post(f"/reminders/{old['id']}/reschedule", json={"due_at": later})
    assert (again.status_code, again.json()["code"]) == (409, "SCHEDULE_NOT_RESCHEDULABLE")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"due_at": "2030-01-01T09:00:00"}, "SCHEDULE_NAIVE_DATETIME"),
        ({"due_at": "2001-01-01T09:00:00Z"}, "SCHEDULE_RUN_AT_IN_PAST"),
        ({"timezone": "Mars/Olympus_Mons"}, "SCHEDULE_INVALID_TIMEZONE"),
        ({"due_at": "not a time"}, "INVALID_REQUEST"),
        ({"user_id": None}, "INVALID_REQUEST"),
    ],
)
def test_bad_input_is_422_with_the_error_code(server: Server, body: dict[str, Any], code: str) -> None:
    valid = {"user_id": "eve", "message": "m", "due_at": "2030-01-01T09:00:00Z", "timezone": "UTC"}
    before = server.http.get("/reminders", params={"owner": "eve"}).json()["items"]
    response = server.http.post("/reminders", json={**valid, **body})
    assert response.status_code == 422
    assert response.json()["code"] == code
    assert response.json()["message"]
    assert server.http.get("/reminders", params={"owner": "eve"}).json()["items"] == before  # nothing written


def test_error_mapping(server: Server) -> None:
    unknown = "01900000-0000-7000-8000-000000000000"
    for response in (
        server.http.get(f"/reminders/{unknown}"),
        server.http.delete(f"/reminders/{unknown}"),
        server.http.post(f"/reminders/{unknown}/reschedule", json={"due_at": "2030-01-01T00:00:00Z"}),
    ):
        assert (response.status_code, response.json()["code"]) == (404, "SCHEDULE_NOT_FOUND")

    server.create("fay", due_in=3600, client_request_id="req-fay-1")
    body = {"user_id": "fay", "message": "m", "due_at": "2030-01-01T00:00:00Z"}
    body["client_request_id"] = "req-fay-1"
    duplicate = server.http.post("/reminders", json=body)
    assert (duplicate.status_code, duplicate.json()["code"]) == (409, "SCHEDULE_CLIENT_REQUEST_ID_IN_USE")

    bad_cursor = server.http.get("/reminders", params={"cursor": "!!"})
    assert (bad_cursor.status_code, bad_cursor.json()["code"]) == (422, "SCHEDULE_INVALID_CURSOR")


def test_a_recurring_reminder_runs_on_its_cron_in_the_users_zone(server: Server) -> None:
    body = {"user_id": "gus", "message": "standup", "cron": "30 9 * * 1-5", "timezone": "Europe/Berlin"}
    created = server.http.post("/reminders/recurring", json=body)
    assert created.status_code == 201, created.text
    reminder = created.json()
    assert (reminder["cron"], reminder["timezone"], reminder["status"]) == (
        "30 9 * * 1-5",
        "Europe/Berlin",
        "pending",
    )
    due = datetime.fromisoformat(reminder["due_at"]).astimezone(ZoneInfo("Europe/Berlin"))
    assert (due.hour, due.minute) == (9, 30) and due.isoweekday() <= 5
    bad = server.http.post("/reminders/recurring", json={**body, "cron": "61 9 * * *"})
    assert (bad.status_code, bad.json()["code"]) == (422, "SCHEDULE_INVALID_CRON")
    unknown_route = server.http.get("/nope")
    assert (unknown_route.status_code, unknown_route.json()["code"]) == (404, "HTTP_404")


def test_the_schedule_declared_in_code_is_synced_by_the_lifespan_and_fires(server: Server) -> None:
    """``running_schedules`` in the lifespan bound ``Digest.run`` (``@every``) and the worker
    synced it: one job, firing every second on its grid, each fire on the container's one
    ``Digest``, counting what was sent."""
    reminder = server.create("dora", due_in=0.5)
    server.wait_sent(reminder["id"])
    runs = server.digests(3)
    assert len({run["job_id"] for run in runs}) == 1
    due = [datetime.fromisoformat(run["at"]) for run in runs]
    assert all(b - a == timedelta(seconds=1) for a, b in zip(due, due[1:], strict=False))
    assert runs[-1]["sent"] >= 1
    assert server.http.get("/reminders", params={"owner": "dora"}).json()["items"][0]["id"] == reminder["id"]


def test_sigterm_stops_cleanly_and_a_restart_fires_what_came_due(
    server: Server, app_backend: AppBackend, tmp_path: Path
) -> None:
    """Runs last: stops the module's server. A reminder that comes due while no server runs fires
    once the app is back (the boot reconciler and the store, not memory, hold the schedule)."""
    reminder = server.create("gus", due_in=1)
    digest_job = server.digests(1)[0]["job_id"]
    assert server.stop() in CLEAN_EXIT
    log = server.process.output()
    assert "Application shutdown complete" in log
    assert re.search(r"worker \S+ stopped", log)  # the lifespan stopped the worker
    assert "Traceback" not in log

    restarted = Server(app_backend, tmp_path / "restarted.log")
    try:
        restarted.wait_sent(reminder["id"])
        assert restarted.sent_ids().count(reminder["id"]) == 1
        # the restart's sync found the declared schedule unchanged: the same job fires on
        assert restarted.digests(1)[0]["job_id"] == digest_job
    finally:
        assert restarted.stop() in CLEAN_EXIT
