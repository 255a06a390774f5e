"""The public faces load their names on first use (PEP 562): each name is the very object of its
home module, ``dir()`` lists it, and the block checkers read (``if TYPE_CHECKING:``) names the same
homes as the runtime table."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import schedule_sdk
import schedule_sdk.dashboard
import schedule_sdk.errors
from tests.support.source import parse_file

PACKAGE = Path(schedule_sdk.__file__).resolve().parent


def checked_imports(path: Path) -> dict[str, str]:
    """name -> module of every ``from X import name`` under the file's ``if TYPE_CHECKING:``."""
    tree = parse_file(path)
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module
                found.update({alias.asname or alias.name: statement.module for alias in statement.names})
    return found


def test_the_checkers_see_every_public_name_of_the_package_from_its_home() -> None:
    homes = checked_imports(PACKAGE / "__init__.py")
    assert sorted(homes) == sorted(schedule_sdk.__all__)
    assert homes == schedule_sdk._HOMES


@pytest.mark.parametrize("name", schedule_sdk.__all__)
def test_each_public_name_is_its_home_modules_object(name: str) -> None:
    home = importlib.import_module(schedule_sdk._HOMES[name])
    assert getattr(schedule_sdk, name) is getattr(home, name)
    namespace: dict[str, object] = {}
    exec(f"from schedule_sdk import {name}", namespace)
    assert namespace[name] is getattr(home, name)


def test_dir_lists_the_public_names_and_the_sub_packages() -> None:
    listed = dir(schedule_sdk)
    assert set(schedule_sdk.__all__) <= set(listed)
    assert {"core", "domain", "errors", "ports"} <= set(listed)
    assert listed == sorted(listed)
    assert "JobNotFound" not in listed  # as before: the error classes are listed by schedule_sdk.errors


@pytest.mark.parametrize("name", schedule_sdk.errors.__all__)
def test_the_error_classes_are_importable_from_the_top(name: str) -> None:
    assert getattr(schedule_sdk, name) is getattr(schedule_sdk.errors, name)


def test_the_sub_packages_the_face_once_loaded_are_attributes() -> None:
    for name in ("adapters", "aio", "bootstrap", "core", "domain", "errors", "ports", "substrates"):
        assert getattr(schedule_sdk, name) is importlib.import_module(f"schedule_sdk.{name}")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = schedule_sdk.NoSuchThing
    with pytest.raises(ImportError):
        exec("from schedule_sdk import NoSuchThing", {})
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = schedule_sdk.dashboard.NoSuchThing  # type: ignore[attr-defined]


def test_the_dashboard_face_is_its_home_modules_objects() -> None:
    pytest.importorskip("starlette")
    homes = checked_imports(PACKAGE / "dashboard.py")
    assert sorted(homes) == sorted(schedule_sdk.dashboard.__all__)
    home = importlib.import_module("schedule_sdk.entrypoints.dashboard")
    for name in schedule_sdk.dashboard.__all__:
        assert homes[name] == home.__name__
        assert getattr(schedule_sdk.dashboard, name) is getattr(home, name)
    assert set(schedule_sdk.dashboard.__all__) <= set(dir(schedule_sdk.dashboard))
