"""examples/django_app: its own test suite (Django's test client), then its management commands
as real processes on SQLite, PostgreSQL and PostgreSQL + Redis."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from schedule_sdk import JobMetadata, JobStatus, OneShotSpec, ScheduleContainer, ScheduleService
from schedule_sdk.domain.history import FireOutcome
from tests.support.waiting import wait_for

from .conftest import APP_BACKENDS, AppBackend
from .support import ROOT, Process, example_env, free_port

APP = ROOT / "examples/django_app"
#: Django's glue does not depend on which SQL store the SDK uses: its default (SQLite, the sql
#: substrate) and the production shape (PostgreSQL + Redis) cover it; the store and substrate
#: combinations are the behaviour suite's.
APP_BACKENDS = [p for p in APP_BACKENDS if p.id in ("sqlite", "postgres-redis")]


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=APP, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_apps_own_test_suite_passes() -> None:
    result = manage("test", "reminders", "--noinput", env=example_env())
    assert result.returncode == 0, result.stdout + result.stderr
    ran = re.search(r"Ran (\d+) tests?", result.stderr)
    assert ran and int(ran.group(1)) >= 8, result.stderr
    assert "OK" in result.stderr


@pytest.fixture(scope="session")
def migrated_django_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Django database ``manage.py migrate`` made once per test process: a test copies it. The
    migrations act on Django's own database only, so a copy is what migrate would have made there;
    the tests of ``migrate`` itself run it."""
    directory = tmp_path_factory.mktemp("django-template")
    path = directory / "django.sqlite3"
    env = example_env(DJANGO_DB_PATH=str(path), SCHEDULE_DATABASE_URL=f"sqlite:///{directory / 'sdk.db'}")
    migrated = manage("migrate", "--noinput", env=env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    return path


class DjangoApp:
    """The example's settings for one backend: its own Django database, migrated (a copy of
    ``migrated_django_db``)."""

    def __init__(self, backend: AppBackend, directory: Path, migrated: Path) -> None:
        self.db_path = directory / "django.sqlite3"
        self.env = example_env(DJANGO_DB_PATH=str(self.db_path), **backend.env())
        shutil.copyfile(migrated, self.db_path)  # Django's SQLite keeps no WAL: the file is all of it
        self.container = ScheduleContainer()
        self.container.config.from_dict(
            {
                "database_url": backend.database_url,
                "redis_url": backend.redis_url,
                "rq_queue": self.env.get("SCHEDULE_RQ_QUEUE"),
            }
        )

    @property
    def service(self) -> ScheduleService:
        return self.container.schedule_service()

    def schedule(self, user: str, due_in: float) -> str:
        """A reminder as the app's views schedule it (any process can schedule; the worker fires)."""
        job = self.service.schedule_at(
            OneShotSpec(
                topic="reminders.due",
                run_at=datetime.now(UTC) + timedelta(seconds=due_in),
                timezone="UTC",
                payload={"user_id": user, "message": f"hello {user}"},
                metadata=JobMetadata(owner_id=user),
            )
        )
        return job.id

    def sent(self) -> list[str]:
        with sqlite3.connect(self.db_path) as conn:
            rows = conn.execute("SELECT reminder_id FROM reminders_sentreminder ORDER BY id").fetchall()
        return [row[0] for row in rows]


@pytest.fixture
def django_app(fresh_backend: AppBackend, tmp_path: Path, migrated_django_db: Path) -> Iterator[DjangoApp]:
    app = DjangoApp(fresh_backend, tmp_path, migrated_django_db)
    yield app
    app.container.shutdown_resources()


def test_schedule_worker_fires_reminders_and_stops_on_sigterm(django_app: DjangoApp, tmp_path: Path) -> None:
    before = django_app.schedule("ana", due_in=0.5)  # comes due before the worker starts
    cancelled = django_app.schedule("bob", due_in=0.5)
    django_app.service.cancel(cancelled)
    worker = Process(["manage.py", "schedule_worker"], django_app.env, tmp_path / "worker.log", cwd=APP)
    try:
        wait_for(lambda: before in django_app.sent(), "the reminder that came due before the worker started")
        during = django_app.schedule("cid", due_in=1)
        wait_for(lambda: during in django_app.sent(), "the reminder scheduled while the worker runs")
        assert django_app.sent() == [before, during]  # each once; the cancelled one never
    finally:
        code = worker.stop()
    log = worker.output()
    assert code == 0, log
    assert "started" in log and "stopping" in log
    assert "Traceback" not in log


def test_the_apps_declared_schedule_is_planned_applied_and_fired_by_schedule_worker(
    django_app: DjangoApp, tmp_path: Path
) -> None:
    """reminders/schedules.py declares ``@every`` (found as the app's ``schedules`` module):
    ``manage.py schedules plan`` shows it and writes nothing, the worker syncs it at start and
    fires it, and its listener runs (outcome succeeded, not unheard)."""
    env = {**django_app.env, "REMINDERS_DIGEST_SECONDS": "1"}
    plan = manage("schedules", "plan", env=env)
    assert plan.returncode == 0, plan.stderr
    assert re.search(r"^\+ reminders\.digest +every add +next \S+$", plan.stdout, re.M), plan.stdout
    assert plan.stdout.splitlines()[-1] == "plan (version 0): 1 add, 0 change, 0 remove, 0 stale"
    as_json = json.loads(manage("schedules", "plan", "--json", env=env).stdout)
    assert [(i["name"], i["action"], i["kind"]) for i in as_json["items"]] == [
        ("reminders.digest", "add", "every")
    ]
    assert django_app.container.declared_rows().read() == []  # a plan writes nothing
    refused = manage("schedules", "plan", "--container", "no_such_module:app", env=env)
    assert refused.returncode == 2 and "schedule-sdk: error: cannot load container" in refused.stderr

    worker = Process(["manage.py", "schedule_worker"], env, tmp_path / "worker.log", cwd=APP)
    try:

        def fired() -> list[Any]:
            rows = django_app.container.declared_rows().read()
            if not rows or rows[0][1] is None:
                return []
            return [f for f in django_app.service.history(rows[0][1].id) if f.outcome.value == "succeeded"]

        wait_for(lambda: len(fired()) >= 2, "two fires of the declared digest")
    finally:
        code = worker.stop()
    log = worker.output()
    assert code == 0, log
    assert re.search(r"digest \S+: \d+ reminder\(s\) sent since", log), log
    [(stored, job)] = django_app.container.declared_rows().read()
    assert (stored.name, stored.kind, job is not None and job.topic) == (
        "reminders.digest",
        "every",
        "reminders.digest",
    )
    again = manage("schedules", "plan", env=env)  # the worker applied it: nothing left to do
    assert again.stdout.splitlines()[-1] == "plan (version 0): 0 add, 0 change, 0 remove, 0 stale", (
        again.stdout
    )
    changed = manage("schedules", "plan", env={**env, "REMINDERS_DIGEST_SECONDS": "7200"})
    assert re.search(r"^~ reminders\.digest +every change +next \S+ -> \S+$", changed.stdout, re.M), (
        changed.stdout
    )


def test_schedule_reconcile_prints_the_report(django_app: DjangoApp) -> None:
    for user in ("ana", "bob", "cid"):
        django_app.schedule(user, due_in=3600)

    plain = manage("schedule_reconcile", env=django_app.env)
    assert plain.returncode == 0, plain.stderr
    assert re.fullmatch(r"scanned=3 healed=0 skipped=3 released=0\n", plain.stdout), plain.stdout

    as_json = manage("schedule_reconcile", "--json", env=django_app.env)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"scanned": 3, "healed": 0, "skipped": 3, "released": 0}


def test_the_opt_in_in_process_worker_fires_inside_any_django_process(django_app: DjangoApp) -> None:
    """SCHEDULE_WORKER_IN_PROCESS=1 (development): ready() starts a worker, atexit stops it."""
    reminder = django_app.schedule("ana", due_in=0.5)
    wait = "import time\nfrom reminders.models import SentReminder\n"
    wait += "while not SentReminder.objects.exists(): time.sleep(0.1)\nprint('sent')"
    result = manage("shell", "-c", wait, env={**django_app.env, "SCHEDULE_WORKER_IN_PROCESS": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "sent"
    assert django_app.sent() == [reminder]
    assert re.search(r"worker \S+ stopped", result.stderr), result.stderr


IN_ATOMIC = """
import json, time
from datetime import UTC, datetime, timedelta
from django.db import connection, transaction
from reminders.models import Reminder, SentReminder
from schedule_sdk import OneShotSpec
from schedule_sdk.contrib.django import container as schedule_container

container = schedule_container()
service = container.schedule_service()
worker = container.worker().start()


def spec():
    due = datetime.now(UTC) + timedelta(seconds=0.2)
    payload = {"user_id": "u", "message": "m"}
    return OneShotSpec(topic="reminders.due", run_at=due, timezone="UTC", payload=payload)


class Boom(Exception):
    pass


try:
    with transaction.atomic():
        lost = service.schedule_at(spec(), connection=connection)
        Reminder.objects.create(job_id=lost.id, user_id="u", message="m")
        time.sleep(0.6)  # due while the transaction is open
        raise Boom
except Boom:
    pass
with transaction.atomic():
    kept = service.schedule_at(spec(), connection=connection)
    Reminder.objects.create(job_id=kept.id, user_id="u", message="m")
    time.sleep(0.6)
    early = SentReminder.objects.exists()
deadline = time.monotonic() + 15
while not SentReminder.objects.filter(reminder_id=kept.id).exists() and time.monotonic() < deadline:
    time.sleep(0.1)
time.sleep(0.5)
worker.stop()
print(json.dumps({
    "kept": kept.id,
    "early": early,
    "lost_job": service.get_by_id(lost.id) is not None,
    "rows": sorted(r.job_id == kept.id for r in Reminder.objects.all()),
    "sent": [r.reminder_id for r in SentReminder.objects.all()],
}))
"""


def test_a_reminder_scheduled_in_transaction_atomic_commits_or_vanishes_with_the_model_row(
    fresh_backend: AppBackend, tmp_path: Path
) -> None:
    """The SDK's tables in Django's own database (SQLite, or PostgreSQL with and without Redis)."""
    _, env = shared_database(fresh_backend, tmp_path)
    migrated = manage("migrate", "--noinput", env=env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    result = manage("shell", "-c", IN_ATOMIC, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["lost_job"] is False  # rolled back with the model row: never existed
    assert outcome["rows"] == [True]  # only the committed Reminder row
    assert outcome["early"] is False  # nothing fired before the commit
    assert outcome["sent"] == [outcome["kept"]]  # the committed one fired, once


def test_the_dashboard_is_mounted_in_the_django_asgi_app(django_app: DjangoApp, tmp_path: Path) -> None:
    import httpx

    job_id = django_app.schedule("ana", due_in=3600)
    port = free_port()
    args = ["-m", "uvicorn", "project.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    server = Process(args, django_app.env, tmp_path / "asgi.log", cwd=APP)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert server.alive(), server.output()
        try:
            return httpx.get(f"{base}/sent", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(up, "the Django ASGI app")
        jobs = httpx.get(f"{base}/scheduler/jobs?owner_id=ana", timeout=10)
        assert jobs.status_code == 200 and f'data-job-id="{job_id}"' in jobs.text
        assert f'href="/scheduler/jobs/{job_id}"' in jobs.text  # links keep the mount prefix
        assert httpx.get(f"{base}/scheduler/", timeout=10).status_code == 200
        assert httpx.get(f"{base}/reminders/{job_id}", timeout=10).json()["id"] == job_id  # Django's view
        refused = httpx.post(f"{base}/scheduler/jobs/{job_id}/cancel", data={"csrf": "x.y"}, timeout=10)
        assert refused.status_code == 403  # no token configured: read-only
    finally:
        server.stop()
    assert django_app.service.get_by_id(job_id).status is JobStatus.PENDING


ADMIN = """
import json
from datetime import UTC, datetime, timedelta
from django.contrib.auth.models import User
from django.test import Client
from schedule_sdk import OneShotSpec
from schedule_sdk.contrib.django import container

service = container().schedule_service()
spec = OneShotSpec(topic="reminders.due", run_at=datetime.now(UTC) + timedelta(hours=1), timezone="UTC")
open_job, done = service.schedule_at(spec), service.schedule_at(spec)
service.cancel(done.id)
from django.db import connection
with connection.cursor() as cursor:  # as a fire no listener heard leaves it
    cursor.execute("UPDATE schedule_jobs SET last_outcome = 'unheard' WHERE id = %s", [done.id])
    # and as a give-up's notice row reads (the row that delivers schedule.failed)
    cursor.execute("UPDATE schedule_jobs SET notice = 'failed' WHERE id = %s", [done.id])
User.objects.create_superuser("op", "op@example.com", "pw")
client = Client()
anonymous = client.get("/admin/schedule_sdk/job/").status_code
client.force_login(User.objects.get(username="op"))
jobs = client.get("/admin/schedule_sdk/job/")
fires = client.get("/admin/schedule_sdk/fire/?outcome=unheard")
unheard = client.get("/admin/schedule_sdk/job/?last_outcome=unheard").content.decode()
acted = client.post(
    "/admin/schedule_sdk/job/",
    {"action": "requeue", "_selected_action": [open_job.id, done.id]},
    follow=True,
)
print(json.dumps({
    "anonymous": anonymous,
    "jobs": jobs.status_code,
    "listed": open_job.id in jobs.content.decode() and done.id in jobs.content.decode(),
    "fires": fires.status_code,
    "fires_page": client.get("/admin/schedule_sdk/fire/").content.decode(),
    "jobs_page": jobs.content.decode(),
    "unheard": [
        open_job.id in unheard, done.id in unheard, '<td class="field-last_outcome">unheard</td>' in unheard
    ],
    "page": acted.content.decode(),
    "done": [service.get_by_id(done.id).status.value, service.get_by_id(done.id).occurrence],
    "open": service.get_by_id(open_job.id).occurrence,
}))
"""


def shared_database(backend: AppBackend, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """The SDK's URL and the example's environment when the SDK's tables are in Django's own
    database (no SCHEDULE_DATABASE_URL), on SQLite or PostgreSQL (with and without Redis)."""
    import sqlalchemy as sa

    if backend.database_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
        own = {"DJANGO_DB_PATH": str(tmp_path / "shared.sqlite3")}
    else:
        url = backend.database_url
        own = {"DJANGO_PG_NAME": str(sa.make_url(url).database)}
    settings = {k: v for k, v in backend.env().items() if k != "SCHEDULE_DATABASE_URL"}
    return url, example_env(**own, **settings)


def test_the_admin_lists_jobs_and_fires_and_steers_through_the_service(
    fresh_backend: AppBackend, tmp_path: Path
) -> None:
    _, env = shared_database(fresh_backend, tmp_path)
    migrated = manage("migrate", "--noinput", env=env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    result = manage("shell", "-c", ADMIN, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["anonymous"] == 302  # to the login page
    assert (outcome["jobs"], outcome["listed"], outcome["fires"]) == (200, True, 200)
    assert outcome["done"] == ["pending", 2]  # the cancelled one was requeued
    assert outcome["open"] == 1  # the pending one was refused, unchanged
    assert "Requeued: 1 job(s)" in outcome["page"]
    assert "SCHEDULE_NOT_REQUEUEABLE: " in outcome["page"]
    # the actions read in the imperative; the filters list every value, before any occurred
    for verb in ("Cancel", "Pause", "Resume", "Trigger", "Requeue"):
        assert f">{verb} selected jobs<" in outcome["jobs_page"]
    assert all(f"?outcome={o.value}" in outcome["fires_page"] for o in FireOutcome)
    assert all(f"?status={s.value}" in outcome["jobs_page"] for s in JobStatus)
    # the last outcome is a column and a filter: an unheard fire is visible where jobs are listed
    assert all(f"?last_outcome={o.value}" in outcome["jobs_page"] for o in FireOutcome)
    assert outcome["unheard"] == [False, True, True]
    # a notice row says so in a column of its own
    assert outcome["jobs_page"].count('<td class="field-notice">failed</td>') == 1


def test_manage_py_help_lists_the_sdks_commands_under_its_own_heading(django_app: DjangoApp) -> None:
    result = manage("help", env=django_app.env)
    assert result.returncode == 0, result.stderr
    sections = dict(re.findall(r"^\[(\w+)\]\n((?:    \S+\n?)+)", result.stdout, re.M))
    ours = {"schedule_cron", "schedule_reconcile", "schedule_worker", "schedules"}
    assert set(sections["schedule_sdk"].split()) == ours, result.stdout
    assert not ours & set(sections["django"].split()), result.stdout  # not among Django's own


def test_schedule_cron_prints_the_fire_times(django_app: DjangoApp) -> None:
    result = manage(
        "schedule_cron", "30 2 * * *", "--tz", "Europe/Berlin", "-n", "1", "--after", "2026-03-28T12:00Z",
        env=django_app.env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "2026-03-29T01:00:00Z  moved" in result.stdout  # 02:30 does not exist that night
    refused = manage("schedule_cron", "61 * * * *", "--tz", "UTC", env=django_app.env)
    assert refused.returncode != 0 and "schedule-sdk: error:" in refused.stderr


def test_migrate_creates_the_sdk_tables_exactly_as_its_alembic_migrations_describe_them(
    fresh_backend: AppBackend, tmp_path: Path
) -> None:
    """One source of truth: ``manage.py migrate`` runs the SDK's Alembic migrations in Django's
    database; the result has no difference from the SDK's table definitions, and the admin's
    models name the same columns with the same nullability."""
    import sqlalchemy as sa
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from schedule_sdk.adapters.sql import schema
    from schedule_sdk.adapters.sql.tables import metadata, schedule_fires, schedule_jobs

    url, env = shared_database(fresh_backend, tmp_path)
    migrated = manage("migrate", "--noinput", env=env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert "Applying schedule_sdk.0001_initial... OK" in migrated.stdout
    engine = sa.create_engine(url)
    try:
        assert schema.current_revision(engine) == schema.head_revision()
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        ours = {t.name for t in metadata.sorted_tables}
        assert [d for d in diff if _table_of(d) in ours] == []
    finally:
        engine.dispose()
    columns = manage("shell", "-c", MODEL_COLUMNS, env=env)
    assert columns.returncode == 0, columns.stderr
    described = json.loads(columns.stdout.splitlines()[-1])
    for table in (schedule_jobs, schedule_fires):
        assert described[table.name] == {c.name: c.nullable for c in table.columns}
    again = manage("migrate", "--noinput", env=env)  # later runs: a no-op at the latest revision
    assert again.returncode == 0 and "No migrations to apply" in again.stdout


MODEL_COLUMNS = """
import json
from schedule_sdk.contrib.django.models import Fire, Job  # the documented path
columns = {m._meta.db_table: {f.column: f.null for f in m._meta.concrete_fields} for m in (Job, Fire)}
print(json.dumps(columns))
"""


def _table_of(diff: Any) -> str | None:
    """The table an Alembic autogenerate difference is about."""
    item = diff[0] if isinstance(diff, list) else diff
    kind = item[0]
    if kind in ("add_table", "remove_table"):
        return str(item[1].name)
    if kind in ("add_index", "remove_index", "add_constraint", "remove_constraint"):
        return str(item[1].table.name)
    if kind in ("add_column", "remove_column") or kind.startswith("modify_"):
        return str(item[2])
    return None
