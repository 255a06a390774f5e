"""What ``import schedule_sdk`` costs, and what checkers see of it: a fresh interpreter each time,
so nothing another test imported counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: What the public faces must not load on import: the SQL store, the container, web frameworks.
HEAVY = ("sqlalchemy", "alembic", "dependency_injector", "fastapi", "starlette", "flask", "django")


def loaded_after(code: str) -> set[str]:
    """The top-level packages of ``HEAVY`` in ``sys.modules`` after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1])) & set(HEAVY)


def test_importing_the_package_does_not_load_alembic() -> None:
    code = "import sys, schedule_sdk; print('alembic' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_importing_the_package_loads_no_store_container_or_web_framework() -> None:
    assert loaded_after("import schedule_sdk") == set()


@pytest.mark.parametrize(
    "code",
    [
        "import schedule_sdk.dashboard",
        "import schedule_sdk.errors",
        "from schedule_sdk import OneShotSpec, RepeatSpec, CronRepeat, JobStatus, ScheduleError, cron",
        "from schedule_sdk import JobNotFound, ScheduleValidationError",
        "import schedule_sdk; dir(schedule_sdk)",
    ],
)
def test_the_light_names_stay_light(code: str) -> None:
    assert loaded_after(code) == set()


def test_the_container_is_loaded_when_asked_for() -> None:
    assert {"sqlalchemy", "dependency_injector"} <= loaded_after("from schedule_sdk import ScheduleContainer")


MYPY_PROBE = """\
import schedule_sdk
from schedule_sdk import OneShotSpec, ScheduleContainer, cron
from schedule_sdk.dashboard import TenantScope, create_dashboard

reveal_type(schedule_sdk.ScheduleService)
reveal_type(OneShotSpec)
reveal_type(ScheduleContainer)
reveal_type(cron)
reveal_type(create_dashboard)
reveal_type(TenantScope)
"""


def test_type_checkers_see_the_names_and_their_types(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    probe = tmp_path / "face_types.py"
    probe.write_text(MYPY_PROBE)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-error-summary",
            "--no-incremental",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(probe),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert "error:" not in result.stdout, result.stdout
    revealed = [
        line.split("Revealed type is ", 1)[1] for line in result.stdout.splitlines() if "Revealed" in line
    ]
    assert len(revealed) == 6, result.stdout
    service, spec, container, cron, dashboard, scope = revealed
    assert service.endswith('-> schedule_sdk.core.service.ScheduleService"'), service
    assert spec.endswith('-> schedule_sdk.domain.jobs.OneShotSpec"'), spec
    assert container.endswith('-> schedule_sdk.bootstrap.container.ScheduleContainer"'), container
    assert cron.startswith('"def (expression: str'), cron
    assert dashboard.endswith('-> starlette.applications.Starlette"'), dashboard
    assert "TenantScope" in scope, scope


def test_starting_on_a_migrated_database_loads_no_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    start = (
        "from schedule_sdk import ScheduleContainer\n"
        "container = ScheduleContainer()\n"
        f"container.config.from_dict({{'database_url': {url!r}}})\n"
        "container.schedule_service().list()\n"
        "container.shutdown_resources()"
    )
    assert "alembic" in loaded_after(start)  # the first start-up migrates the empty database
    assert "alembic" not in loaded_after(start)  # later ones find it at HEAD_REVISION
