"""The wire contract: ScheduleTimer parsing and validation, the DueTimeReached envelope."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from schedule_sdk.domain import timers as timer_domain
from schedule_sdk.domain.errors import InvalidTimerCommand, ScheduleValidationError
from schedule_sdk.domain.ids import uuid7
from schedule_sdk.domain.timers import MAX_COMMAND_BYTES, MAX_JSON_DEPTH, as_refusal, format_instant, to_ms
from schedule_sdk.domain.timing import MAX_INSTANT, MIN_INSTANT
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


def _raw_command(**fields: str) -> bytes:
    """A command's JSON with ``fields`` replaced verbatim (JSON text, so escapes such as
    ``"\\ud800"`` reach the decoder as they would on the wire)."""
    values = {key: json.dumps(value) for key, value in VALID.items()} | fields
    return ("{" + ",".join(f'"{key}":{value}' for key, value in values.items()) + "}").encode()


#: Bodies that once escaped the decoder as something other than InvalidTimerCommand, or were
#: accepted and then failed in the store: each must be refused at decode time, on every backend.
POISON = [
    pytest.param(_raw_command(dueAt='"9999-12-31T23:59:59.999999+00:00"'), "dueAt", id="due-at-overflows-ms"),
    pytest.param(_raw_command(dueAt='"9999-12-31T23:00:00-05:00"'), "dueAt", id="due-at-overflows-utc"),
    pytest.param(_raw_command(dueAt='"0001-01-01T00:00:00+01:00"'), "dueAt", id="due-at-underflows-utc"),
    pytest.param(_raw_command(dueAt='"0999-01-01T00:00:00Z"'), "dueAt", id="due-at-before-1970"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "bytes", id="nested-100k-deep"),
    pytest.param(b"[" * 20_000 + b"]" * 20_000, "nested deeper", id="nested-20k-deep-under-size-limit"),
    pytest.param(_raw_command(extra="[" * 33 + "]" * 33), "nested deeper", id="nested-33-deep-in-a-field"),
    pytest.param(b"[" * 20_000, "nested deeper", id="unclosed-brackets"),
    pytest.param(_raw_command(tenantId='"\\ud800"'), "lone surrogate", id="lone-surrogate-tenant"),
    pytest.param(_raw_command(serviceCallId='"a\\udfffb"'), "lone surrogate", id="lone-surrogate-call"),
    pytest.param(_raw_command(correlationId='"\\ud800"'), "correlationId", id="lone-surrogate-correlation"),
    pytest.param(_raw_command(tenantId='"a\\u0000b"'), "NUL", id="nul-tenant"),
    pytest.param(_raw_command(serviceCallId='"\\u0000"'), "NUL", id="nul-call"),
    pytest.param(_raw_command(correlationId='"c\\u0000"'), "NUL", id="nul-correlation"),
    pytest.param(_raw_command(extra=json.dumps("x" * 70_000)), "bytes", id="too-large"),
]


@pytest.mark.parametrize(("raw", "fragment"), POISON)
def test_poison_commands_are_refused_at_decode_time(raw, fragment):
    for data in (raw, raw.decode("utf-8")):  # bytes from a broker, or text
        with pytest.raises(InvalidTimerCommand, match=fragment) as caught:
            ScheduleTimer.from_json(data)
        assert caught.value.code == "TIMER_INVALID_COMMAND"


def test_lone_surrogates_in_python_text_are_refused_too():
    text = '{"tenantId": "\ud800", "serviceCallId": "sc1", "dueAt": "2026-11-21T10:00:00Z"}'
    with pytest.raises(InvalidTimerCommand, match="lone surrogate"):
        ScheduleTimer.from_json(text)
    with pytest.raises(InvalidTimerCommand, match="lone surrogate"):
        ScheduleTimer.from_json({**VALID, "tenantId": "\udc00"})


def test_the_limits_themselves_are_accepted():
    deepest = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)  # + the command object itself
    assert ScheduleTimer.from_json(_raw_command(extra=deepest)).tenant_id == "t1"
    brackets_in_text = json.dumps("[{" * 1000 + '\\"')  # brackets inside strings are not nesting
    assert ScheduleTimer.from_json(_raw_command(extra=brackets_in_text)).tenant_id == "t1"
    padding = MAX_COMMAND_BYTES - len(_raw_command(extra='""'))
    largest = _raw_command(extra=json.dumps("x" * padding))
    assert len(largest) == MAX_COMMAND_BYTES
    assert ScheduleTimer.from_json(largest).tenant_id == "t1"
    latest = ScheduleTimer.from_json({**VALID, "dueAt": "9999-12-31T00:00:00Z"})
    assert latest.due_at == MAX_INSTANT
    earliest = ScheduleTimer.from_json({**VALID, "dueAt": "1970-01-01T00:00:00Z"})
    assert earliest.due_at == MIN_INSTANT


def test_a_recursion_error_from_the_decoder_is_refused_too(monkeypatch):
    """Should the nesting pre-check ever let a deep body through, the decoder's RecursionError
    is still turned into the typed refusal."""
    monkeypatch.setattr(timer_domain, "MAX_JSON_DEPTH", 10**9)
    with pytest.raises(InvalidTimerCommand, match="too deep"):
        ScheduleTimer.from_json(b"[" * 20_000 + b"]" * 20_000)


def test_python_construction_refuses_what_parsing_refuses():
    due = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(InvalidTimerCommand, match="NUL"):
        ScheduleTimer(tenant_id="a\x00", service_call_id="s", due_at=due)
    with pytest.raises(InvalidTimerCommand, match="lone surrogate"):
        ScheduleTimer(tenant_id="t", service_call_id="\ud800", due_at=due)
    with pytest.raises(InvalidTimerCommand, match="dueAt"):
        ScheduleTimer(tenant_id="t", service_call_id="s", due_at=datetime.max.replace(tzinfo=UTC))
    with pytest.raises(InvalidTimerCommand, match="dueAt"):
        ScheduleTimer(
            tenant_id="t",
            service_call_id="s",
            due_at=datetime.min.replace(tzinfo=timezone(timedelta(hours=1))),
        )


def test_unexpected_exceptions_become_the_typed_refusal():
    cause = UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
    refusal = as_refusal(cause, "persisting the command")
    assert isinstance(refusal, InvalidTimerCommand) and refusal.__cause__ is cause
    assert "UnicodeEncodeError" in str(refusal)
    already = InvalidTimerCommand("bad")
    assert as_refusal(already, "decoding") is already


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
