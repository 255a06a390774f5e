"""The old module paths of the timer (``schedule_sdk.timer.app``, ``.settings``, ``.domain``,
``.ports``, ``.service``) still give every public name they had, with a deprecation warning naming
its home; so do the names ``schedule_sdk.ports`` lost (the claim timing helpers)."""

from __future__ import annotations

import importlib

import pytest

from schedule_sdk import ports
from schedule_sdk.bootstrap import timer, timer_settings
from schedule_sdk.core import timers as core_timers
from schedule_sdk.domain import timers as domain_timers

#: Each old module, where its names live now, and the public names it had.
OLD = {
    "app": (timer, ["Timer", "TimerContainer"]),
    "settings": (timer_settings, ["TimerSettings"]),
    "domain": (
        domain_timers,
        [
            "DUE_TIME_REACHED",
            "MAX_ID_LENGTH",
            "SCHEDULE_TIMER",
            "TIMER_TOPIC",
            "DueTimeReached",
            "Envelope",
            "ScheduleTimer",
            "TimerEntry",
            "TimerOutcome",
            "TimerState",
            "format_instant",
            "parse_instant",
            "to_ms",
        ],
    ),
    "ports": (ports, ["CommandSink", "CommandSource", "MessageBus", "Metrics", "TimerStore"]),
    "service": (core_timers, ["Result", "TimerQueries", "TimerService"]),
}
CASES = [(module, name) for module, (_, names) in OLD.items() for name in names]


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_an_old_timer_path_gives_the_moved_object_with_a_deprecation_warning(module: str, name: str) -> None:
    home, _ = OLD[module]
    old = importlib.import_module(f"schedule_sdk.timer.{module}")
    with pytest.warns(
        DeprecationWarning, match=rf"timer\.{module} is deprecated: import {name} from {home.__name__}"
    ):
        assert getattr(old, name) is getattr(home, name)


def test_the_old_from_imports_work() -> None:
    with pytest.warns(DeprecationWarning, match="Timer from schedule_sdk.bootstrap.timer"):
        from schedule_sdk.timer.app import Timer
    with pytest.warns(DeprecationWarning, match="TimerSettings"):
        from schedule_sdk.timer.settings import TimerSettings
    with pytest.warns(DeprecationWarning, match="ScheduleTimer"):
        from schedule_sdk.timer.domain import ScheduleTimer
    import schedule_sdk.timer as face

    assert (Timer, TimerSettings, ScheduleTimer) == (face.Timer, face.TimerSettings, face.ScheduleTimer)


def test_a_name_the_new_module_lacks_is_an_attribute_error() -> None:
    old = importlib.import_module("schedule_sdk.timer.domain")
    with pytest.raises(AttributeError, match="no_such_name"):
        old.no_such_name  # noqa: B018


@pytest.mark.parametrize("name", ["CLAIM_AHEAD", "claim_horizon", "claim_lead", "claim_time"])
def test_the_claim_timing_names_the_ports_lost_still_import_from_there_with_a_warning(name: str) -> None:
    from schedule_sdk.core import claim_timing

    with pytest.warns(
        DeprecationWarning,
        match=rf"ports\.{name} is deprecated: import {name} from schedule_sdk\.core\.claim_timing",
    ):
        assert getattr(ports, name) is getattr(claim_timing, name)
    with pytest.raises(AttributeError, match="no_such_port"):
        ports.no_such_port  # noqa: B018
