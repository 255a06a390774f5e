"""A process that schedules one job (``schedule_at``, due in $SDK_TEST_DUE seconds) with
SCHEDULE_* settings and dies at $SDK_TEST_CRASH_AT (see tests/procs/crash.py)."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta

from schedule_sdk import OneShotSpec, ScheduleContainer
from tests.procs import crash


def main() -> int:
    container = ScheduleContainer()
    crash.install(os.environ["SDK_TEST_CRASH_AT"], container)
    service = container.schedule_service()
    container.store()  # connected (and migrated) before the due instant is chosen
    due = datetime.now(UTC) + timedelta(seconds=float(os.environ.get("SDK_TEST_DUE", "0.2")))
    service.schedule_at(OneShotSpec(topic="crash.schedule", run_at=due, timezone="UTC"))
    return 0  # not reached: the crash point kills the process


if __name__ == "__main__":
    sys.exit(main())
