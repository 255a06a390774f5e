"""Bad declarations fail when the function is decorated or registered, with a typed error naming
it; the diff a sync applies decides add / change / remove / keep / unchanged / stale by name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import ModuleType

import pytest
from dependency_injector import containers, providers

from schedule_sdk import ListenerRegistry, after, cron, every, schedule_arrived_event_name
from schedule_sdk.core.declared import DeclaredSchedules, declarations_of
from schedule_sdk.domain.declared import StoredDeclaration, diff
from schedule_sdk.errors import DuplicateDeclaration, InvalidDeclaration


def job(event: object) -> None:
    return None


def other(event: object) -> None:
    return None


@pytest.mark.parametrize(
    ("decorator", "reason_code"),
    [
        (cron("61 * * * *"), "SCHEDULE_INVALID_CRON"),
        (cron("0 9 * * *", tz="Mars/Olympus"), "SCHEDULE_INVALID_TIMEZONE"),
        (every(timedelta(0)), "SCHEDULE_INVALID_INTERVAL"),
        (every(timedelta(seconds=-5)), "SCHEDULE_INVALID_INTERVAL"),
        (after(timedelta(seconds=-1)), "SCHEDULE_INVALID_INTERVAL"),
        (every(timedelta(microseconds=1500)), "SCHEDULE_INVALID_DECLARATION"),
        (every(timedelta(minutes=1), anchor=datetime(2026, 1, 1)), "SCHEDULE_NAIVE_DATETIME"),
        (cron("0 9 * * *", payload={"x": object()}), "SCHEDULE_INVALID_PAYLOAD"),
        (cron("0 9 * * *", name=""), "SCHEDULE_INVALID_DECLARATION"),
        (cron("0 9 * * *", topic="not a topic"), "SCHEDULE_INVALID_TOPIC"),
    ],
)
def test_an_invalid_declaration_fails_when_decorated_naming_the_function(decorator, reason_code):
    with pytest.raises(InvalidDeclaration) as raised:
        decorator(job)
    assert raised.value.function == f"{__name__}.job"
    assert f"{__name__}.job" in str(raised.value)
    assert raised.value.reason_code == reason_code
    assert raised.value.code == "SCHEDULE_INVALID_DECLARATION"
    assert not declarations_of(job)


def test_a_lambda_or_a_nested_function_cannot_be_declared():
    with pytest.raises(InvalidDeclaration, match="lambda"):
        cron("0 9 * * *")(lambda event: None)

    def nested(event: object) -> None:
        return None

    with pytest.raises(InvalidDeclaration, match="nested") as raised:
        every(timedelta(minutes=1))(nested)
    assert "nested" in raised.value.function


def test_a_name_declared_twice_fails_at_registration():
    module = ModuleType("dup_app")
    first = cron("0 9 * * *", name="dup")(_function(module, "first"))
    second = every(timedelta(minutes=5), name="dup")(_function(module, "second"))
    schedules = DeclaredSchedules(ListenerRegistry())
    schedules.register(first)
    schedules.register(first)  # the same function again: harmless
    with pytest.raises(DuplicateDeclaration, match="dup_app.second"):
        schedules.register(second)
    clash = cron("0 10 * * *", name="elsewhere", topic="dup")(_function(module, "third"))
    with pytest.raises(DuplicateDeclaration, match="topic"):
        schedules.register(clash)
    assert [d.name for d in schedules.declarations()] == ["dup"]


# --8<-- [start:method]
class Reports:
    built = 0

    def __init__(self) -> None:
        Reports.built += 1
        self.calls: list[object] = []

    @after(timedelta(seconds=30), name="reports.warm")
    def warm(self, event: object) -> None:
        self.calls.append(event)


# --8<-- [end:method]


class Broken:
    def __init__(self) -> None:
        raise RuntimeError("no database")

    @after(timedelta(seconds=30), name="broken.warm")
    def warm(self, event: object) -> None:
        return None


class App(containers.DeclarativeContainer):
    reports = providers.Singleton(Reports)
    broken = providers.Factory(Broken)


class Empty(containers.DeclarativeContainer):
    pass


def test_a_method_gets_its_instance_from_the_container():
    # --8<-- [start:register]
    registry = ListenerRegistry()
    schedules = DeclaredSchedules(registry)
    app = App()
    schedules.register(Reports, container=app)
    # --8<-- [end:register]
    [listener] = registry.listeners(schedule_arrived_event_name("reports.warm"))
    listener("event")
    assert app.reports().calls == ["event"]


def test_a_method_whose_object_the_container_cannot_build_fails_at_registration():
    schedules = DeclaredSchedules(ListenerRegistry())
    with pytest.raises(InvalidDeclaration, match="cannot build Reports") as raised:
        schedules.register(Reports, container=Empty())
    assert raised.value.function.endswith("Reports.warm")
    with pytest.raises(InvalidDeclaration, match="cannot build Reports"):
        schedules.register(Reports)
    with pytest.raises(InvalidDeclaration, match="no database"):
        schedules.register(Broken, container=App())
    assert schedules.declarations() == []


def _function(module: ModuleType, name: str):
    def fn(event: object) -> None:
        return None

    fn.__module__, fn.__name__, fn.__qualname__ = module.__name__, name, name
    setattr(module, name, fn)
    return fn


def _stored(declaration, *, version: int = 0, declared: bool = True, fingerprint: str | None = None):
    return StoredDeclaration(
        name=declaration.name,
        job_id=f"job-{declaration.name}",
        kind=declaration.kind,
        fingerprint=fingerprint or declaration.fingerprint,
        spec="{}",
        version=version,
        declared=declared,
        synced_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_the_diff_by_name_and_version():
    module = ModuleType("diff_app")
    a, b, c, d = (
        declarations_of(cron("0 9 * * *", name=n)(_function(module, n)))[0] for n in ("a", "b", "c", "d")
    )
    stored = {
        "a": _stored(a),
        "b": _stored(b, fingerprint="old"),
        "gone": _stored(c.__class__(name="gone", kind="cron", topic="gone", cron="0 1 * * *")),
        "d": _stored(d, declared=False),
    }
    actions = {s.name: s.action for s in diff([a, b, c, d], stored, version=0, prune=True)}
    assert actions == {"a": "unchanged", "b": "change", "c": "add", "d": "add", "gone": "remove"}
    keep = {s.name: s.action for s in diff([a], {"gone": stored["gone"]}, version=0, prune=False)}
    assert keep == {"a": "add", "gone": "keep"}
    newer = {"b": _stored(b, version=5, fingerprint="newer")}
    stale = {s.name: s.action for s in diff([a, b], newer, version=4, prune=True)}
    assert stale == {"a": "stale", "b": "stale"}
    wins = {s.name: s.action for s in diff([a, b], newer, version=6, prune=True)}
    assert wins == {"a": "add", "b": "change"}
