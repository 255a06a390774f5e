"""A listener module for ``schedule-sdk worker`` tests: appends each event, as JSON, to the file
named by ``$CLI_TEST_EVENTS_FILE``."""

from __future__ import annotations

import json
import os

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ScheduleArrivedEvent, on_event


@on_event(SCHEDULE_ARRIVED_EVENT)
def record(event: ScheduleArrivedEvent) -> None:
    with open(os.environ["CLI_TEST_EVENTS_FILE"], "a", encoding="utf-8") as events:
        events.write(json.dumps(event.to_dict()) + "\n")
