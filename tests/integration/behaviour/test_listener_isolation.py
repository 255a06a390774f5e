"""Each container owns its listeners: two containers in one process (one SQLite file each) never
deliver a fire to the other's listeners, and ``@on_event`` binds nothing by itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    OneShotSpec,
    ScheduleArrivedEvent,
    ScheduleContainer,
    on_event,
)
from tests.support import listener_module
from tests.support.waiting import wait_until

DEADLINE = 20.0  # generous: a fire is due in 0.3 s


class Recorder:
    def __init__(self) -> None:
        self.events: list[ScheduleArrivedEvent] = []

    def __call__(self, event: ScheduleArrivedEvent) -> None:
        self.events.append(event)

    def wait_for(self, count: int) -> list[ScheduleArrivedEvent]:
        wait_until(lambda: len(self.events) >= count, DEADLINE)
        return list(self.events)


def _container(path: Path) -> ScheduleContainer:
    container = ScheduleContainer()
    container.config.from_dict({"database_url": f"sqlite:///{path}", "poll_interval": 0.2})
    return container


def _one_shot(topic: str) -> OneShotSpec:
    return OneShotSpec(topic=topic, run_at=datetime.now(UTC) + timedelta(seconds=0.3), timezone="UTC")


def test_two_containers_in_one_process_each_deliver_only_to_their_own_listeners(tmp_path: Path) -> None:
    a, b = _container(tmp_path / "a.db"), _container(tmp_path / "b.db")
    heard_a, heard_b = Recorder(), Recorder()
    a.listeners().connect(SCHEDULE_ARRIVED_EVENT, heard_a)
    b.listeners().connect(SCHEDULE_ARRIVED_EVENT, heard_b)
    assert a.listeners() is not b.listeners()
    try:
        with a.worker(), b.worker():
            job_a = a.schedule_service().schedule_at(_one_shot("app.a"))
            job_b = b.schedule_service().schedule_at(_one_shot("app.b"))
            heard_a.wait_for(1), heard_b.wait_for(1)
            # both fired; a second job in each shows whether anything crossed over meanwhile
            marker_a = a.schedule_service().schedule_at(_one_shot("app.a"))
            marker_b = b.schedule_service().schedule_at(_one_shot("app.b"))
            got_a, got_b = heard_a.wait_for(2), heard_b.wait_for(2)
    finally:
        a.shutdown_resources()
        b.shutdown_resources()
    assert [e.scheduled_job_id for e in got_a] == [job_a.id, marker_a.id]
    assert [e.scheduled_job_id for e in got_b] == [job_b.id, marker_b.id]


def test_a_listener_module_binds_to_the_container_that_names_it_only(tmp_path: Path) -> None:
    listener_module.received.clear()
    named = _container(tmp_path / "named.db")
    named.config.from_dict({"listener_modules": [listener_module.__name__]})
    other = _container(tmp_path / "other.db")
    heard_other = Recorder()
    other.listeners().connect(SCHEDULE_ARRIVED_EVENT, heard_other)
    try:
        with named.worker(), other.worker():
            job_other = other.schedule_service().schedule_at(_one_shot("app.other"))
            heard_other.wait_for(1)
            job_named = named.schedule_service().schedule_at(_one_shot("app.named"))
            wait_until(lambda: bool(listener_module.received), DEADLINE)
    finally:
        named.shutdown_resources()
        other.shutdown_resources()
    assert [e.scheduled_job_id for e in listener_module.received] == [job_named.id]
    assert [e.scheduled_job_id for e in heard_other.events] == [job_other.id]


def test_on_event_marks_without_registering_anywhere() -> None:
    @on_event(SCHEDULE_ARRIVED_EVENT)
    def listener(event: ScheduleArrivedEvent) -> None: ...

    container = ScheduleContainer()
    assert container.listeners().listeners(SCHEDULE_ARRIVED_EVENT) == []
    container.listeners().register(listener)
    assert container.listeners().listeners(SCHEDULE_ARRIVED_EVENT) == [listener]
    assert ScheduleContainer().listeners().listeners(SCHEDULE_ARRIVED_EVENT) == []
