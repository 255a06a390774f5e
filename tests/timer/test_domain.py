"""The wire contract: ScheduleTimer parsing and validation, the DueTimeReached envelope."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from schedule_sdk.domain.errors import InvalidTimerCommand, ScheduleValidationError
from schedule_sdk.domain.ids import uuid7
from schedule_sdk.domain.timers import format_instant, to_ms
from schedule_sdk.timer import Envelope, ScheduleTimer, TimerEntry

VALID = {"tenantId": "t1", "serviceCallId": "sc1", "dueAt": "2026-11-21T10:00:00.123Z"}


def test_parses_a_bare_command_with_camel_case_names():
    cmd = ScheduleTimer.from_json(json.dumps({**VALID, "correlationId": "c1"}))
    assert cmd == ScheduleTimer(
        tenant_id="t1",
        service_call_id="sc1",
        due_at=datetime(2026, 11, 21, 10, 0, 0, 123000, tzinfo=UTC),
        correlation_id="c1",
    )
    assert ScheduleTimer.from_json(cmd.to_json()) == cmd
    assert json.loads(cmd.to_json()) == {**VALID, "correlationId": "c1"}


def test_parses_offsets_into_utc_and_rounds_up_to_the_millisecond():
    cmd = ScheduleTimer.from_json({**VALID, "dueAt": "2026-11-21T12:00:00.0001+02:00"})
    assert cmd.due_at == datetime(2026, 11, 21, 10, 0, 0, 1000, tzinfo=UTC)  # never early
    assert cmd.correlation_id is None


def test_parses_a_schedule_timer_envelope():
    envelope = {
        "id": "x",
        "type": "ScheduleTimer",
        "payload": VALID,
        "correlationId": "corr",
        "tenantId": "t1",
    }
    cmd = ScheduleTimer.from_json(json.dumps(envelope))
    assert (cmd.tenant_id, cmd.service_call_id, cmd.correlation_id) == ("t1", "sc1", "corr")


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (json.dumps({k: v for k, v in VALID.items() if k != "tenantId"}), "tenantId"),
        (json.dumps({**VALID, "tenantId": ""}), "tenantId"),
        (json.dumps({**VALID, "tenantId": "   "}), "tenantId"),
        (json.dumps({**VALID, "tenantId": 42}), "tenantId"),
        (json.dumps({**VALID, "serviceCallId": None}), "serviceCallId"),
        (json.dumps({**VALID, "serviceCallId": "x" * 256}), "serviceCallId"),
        (json.dumps({k: v for k, v in VALID.items() if k != "dueAt"}), "dueAt"),
        (json.dumps({**VALID, "dueAt": 1795257257350}), "dueAt"),
        (json.dumps({**VALID, "dueAt": "tomorrow"}), "dueAt"),
        (json.dumps({**VALID, "dueAt": "2026-11-21T10:00:00"}), "naive"),
        (json.dumps({**VALID, "correlationId": 7}), "correlationId"),
        (json.dumps({**VALID, "correlationId": ""}), "correlationId"),
    ],
)
def test_bad_commands_raise_the_typed_error(raw, fragment):
    with pytest.raises(InvalidTimerCommand, match=fragment) as caught:
        ScheduleTimer.from_json(raw)
    assert caught.value.code == "TIMER_INVALID_COMMAND"
    assert isinstance(caught.value, ScheduleValidationError)


def test_python_construction_refuses_naive_datetimes():
    with pytest.raises(InvalidTimerCommand, match="naive"):
        ScheduleTimer(tenant_id="t", service_call_id="s", due_at=datetime(2026, 1, 1))


def test_envelope_has_seed_001_fields():
    reached = datetime(2026, 11, 21, 10, 0, 1, 500000, tzinfo=UTC)
    entry = TimerEntry(
        tenant_id="t1", service_call_id="sc1", correlation_id="corr", due_at=reached, registered_at=reached
    )
    envelope = Envelope.due_time_reached(entry, reached)
    body = json.loads(envelope.to_json())
    assert body == {
        "id": envelope.id,
        "type": "DueTimeReached",
        "payload": {"tenantId": "t1", "serviceCallId": "sc1", "reachedAt": "2026-11-21T10:00:01.500Z"},
        "tenantId": "t1",
        "timestampMs": int(reached.timestamp() * 1000),
        "correlationId": "corr",
        "causationId": None,
        "aggregateId": "sc1",
    }
    from uuid import UUID

    assert UUID(envelope.id).version == 7
    assert Envelope.from_json(envelope.to_json()) == envelope
    assert uuid7().version == 7


def test_instant_format_is_fixed_width_utc_milliseconds():
    instant = datetime(2026, 3, 1, 1, 2, 3, 4567, tzinfo=timezone(timedelta(hours=-5)))
    assert format_instant(instant) == "2026-03-01T06:02:03.004Z"
    assert to_ms(instant) == datetime(2026, 3, 1, 6, 2, 3, 4000, tzinfo=UTC)
