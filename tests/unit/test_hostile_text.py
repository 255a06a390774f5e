"""Hostile text at the domain boundary: an error quotes at most a short, clearly cut prefix of a
bad value (and no message is longer than ``MAX_MESSAGE``), and ids and metadata with control
characters are refused with the field's own typed error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import ConcurrencyLimit, CronRepeat, JobMetadata, OneShotSpec, RepeatSpec, Settings
from schedule_sdk.domain.errors import MAX_MESSAGE, ScheduleError, ScheduleValidationError
from schedule_sdk.domain.text import SHOWN_CHARACTERS, escaped, shown
from schedule_sdk.errors import InvalidMetadata, InvalidSpread, InvalidTimerCommand
from schedule_sdk.timer import ScheduleTimer

MIB = "a" * (1 << 20)
#: An ANSI escape, CR/LF, a tab, DEL, a C1 control, the Unicode line separator.
CONTROLS = ["\x1b[31mred", "root\r\nFAKE LOG LINE", "a\tb", "a\x7fb", "a\x85b", "a\u2028b", "\x07"]


def _run_at() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


REFUSALS = {
    "topic": lambda: OneShotSpec(topic=MIB, run_at=_run_at(), timezone="UTC"),
    "timezone": lambda: OneShotSpec(topic="t", run_at=_run_at(), timezone=MIB),
    "cron": lambda: RepeatSpec(
        topic="t", timezone="UTC", repeat=CronRepeat(expression=MIB[:1000] + " * * * *", timezone="UTC")
    ),
    "cron-fields": lambda: CronRepeat(expression=" ".join([MIB[:200]] * 5), timezone="UTC"),
    "concurrency-key": lambda: ConcurrencyLimit(key=MIB),
    "setting": lambda: Settings.load({"retention": MIB}, environ={}),
    "timer-due": lambda: ScheduleTimer.from_json({"tenantId": "t", "serviceCallId": "x", "dueAt": MIB}),
}


@pytest.mark.parametrize("make", REFUSALS.values(), ids=REFUSALS.keys())
def test_an_error_quotes_a_short_clearly_cut_prefix_of_a_huge_value(make):
    with pytest.raises(ScheduleValidationError) as refused:
        make()
    message = str(refused.value)
    assert len(message) < 600, message[:200]  # a 1 MiB value was echoed whole
    assert "a" * (SHOWN_CHARACTERS + 1) not in message
    assert "more characters)" in message  # the cut is marked


def test_shown_is_the_repr_of_a_short_value_and_cuts_a_long_one_saying_so():
    assert shown("UTC") == "'UTC'" and shown(None) == "None" and shown(5) == "5"
    assert shown("\x1b[31m") == r"'\x1b[31m'"  # escaped, never raw
    assert shown("b" * 100) == repr("b" * SHOWN_CHARACTERS) + "… (40 more characters)"
    assert shown(list(range(1000))).endswith("more characters)")


def test_no_error_message_is_longer_than_the_limit_whatever_it_quotes():
    error = ScheduleError("the driver said: " + MIB)
    assert len(error.message) < MAX_MESSAGE + 40 and error.message.endswith("more characters)")
    assert ScheduleError("short").message == "short"


@pytest.mark.parametrize("value", CONTROLS)
@pytest.mark.parametrize("field", ["owner_id", "tenant_id", "correlation_id", "client_request_id"])
def test_metadata_with_a_control_character_is_refused(field, value):
    with pytest.raises(InvalidMetadata, match=rf"metadata\.{field} contains a control character") as refused:
        JobMetadata(**{field: value})
    assert value not in str(refused.value) and "\x1b" not in str(refused.value)


@pytest.mark.parametrize("value", CONTROLS)
def test_a_spread_key_with_a_control_character_is_refused(value):
    with pytest.raises(InvalidSpread, match="control character"):
        OneShotSpec(
            topic="t", run_at=_run_at(), timezone="UTC", spread=timedelta(minutes=1), spread_key=value
        )


@pytest.mark.parametrize("value", CONTROLS)
@pytest.mark.parametrize("field", ["tenantId", "serviceCallId", "correlationId"])
def test_a_timer_command_with_a_control_character_in_an_id_is_refused(field, value):
    body = {"tenantId": "t", "serviceCallId": "x", "dueAt": "2026-11-21T10:00:00Z", field: value}
    with pytest.raises(InvalidTimerCommand, match=f"{field} contains a control character") as refused:
        ScheduleTimer.from_json(body)
    assert "\x1b" not in str(refused.value) and "\r" not in str(refused.value)


def test_printable_text_stays_allowed_and_stored_metadata_reads_back_as_it_is():
    assert (
        JobMetadata(owner_id="Zoë 😀 <ops@example.com>", tenant_id="a b").owner_id
        == "Zoë 😀 <ops@example.com>"
    )
    legacy = JobMetadata.stored(owner_id="\x1b[31mold", tenant_id="t")
    assert legacy.owner_id == "\x1b[31mold" and legacy.tenant_id == "t"


def test_escaped_writes_control_characters_as_escapes():
    assert escaped("a\x1b[31mb\r\n\x85\u2028é") == r"a\x1b[31mb\r\n\x85\u2028é"
