"""A process that syncs the declared schedules of $SCHEDULE_LISTENER_MODULES as soon as the file
$SDK_TEST_GO exists (so several start their syncs together), then prints the applied plan as
JSON."""

from __future__ import annotations

import json
import os
import sys
import time

from schedule_sdk import ScheduleContainer


def main() -> int:
    container = ScheduleContainer()
    sync = container.declared_sync()
    container.store()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    go = os.environ["SDK_TEST_GO"]
    while not os.path.exists(go):
        time.sleep(0.001)
    plan = sync.apply()
    sys.stdout.write(json.dumps(plan.to_dict()) + "\n")
    container.shutdown_resources()
    return 0


if __name__ == "__main__":
    sys.exit(main())
