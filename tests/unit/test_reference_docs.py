"""The reference pages list every error code and every setting, so they cannot fall behind."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import schedule_sdk
from schedule_sdk import ScheduleError, Settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"


def all_error_classes() -> set[type[ScheduleError]]:
    found: set[type[ScheduleError]] = set()
    pending: list[type[ScheduleError]] = [ScheduleError]
    while pending:
        cls = pending.pop()
        if cls.__module__.startswith("schedule_sdk") and cls not in found:
            found.add(cls)
            pending.extend(cls.__subclasses__())
    return found


def test_every_error_code_is_documented():
    page = (DOCS / "errors.md").read_text()
    missing = sorted(f"{c.__name__} ({c.code})" for c in all_error_classes() if f"`{c.code}`" not in page)
    assert missing == []


def test_error_codes_are_unique_per_class():
    codes = [c.code for c in all_error_classes()]
    assert len(codes) == len(set(codes))


def test_every_setting_and_its_variable_is_documented():
    page = (DOCS / "settings.md").read_text()
    for field in dataclasses.fields(Settings):
        assert f"`{field.name}`" in page, field.name
        assert f"`{field.metadata['env']}`" in page, field.metadata["env"]


def test_public_api_is_sorted_and_complete():
    exported = schedule_sdk.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))
    public = {n for n in dir(schedule_sdk) if not n.startswith("_")} - {
        "adapters",
        "aio",
        "bootstrap",
        "contrib",
        "core",
        "dashboard",
        "domain",
        "entrypoints",
        "errors",
        "ports",
        "substrates",
        "testing",
        "timer",
        "annotations",
    }
    assert public == set(exported)


def test_errors_live_in_their_module_and_stay_importable_from_the_top():
    import schedule_sdk.errors as errors

    assert {c.__name__ for c in all_error_classes()} == set(errors.__all__)
    assert set(schedule_sdk.__all__) & set(errors.__all__) == {"ScheduleError"}
    for name in errors.__all__:
        assert getattr(schedule_sdk, name) is getattr(errors, name)
