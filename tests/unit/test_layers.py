"""The import rule of the package's layout: arrows point inward only.

domain ← ports ← core ← (substrates, adapters) ← aio ← bootstrap ← entrypoints and the public faces.
Read from the source with ``ast`` (nothing is imported), so a new wrong-way arrow fails here before
anyone runs the code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "schedule_sdk"

#: What each room may import from the package (its own room is always allowed).
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "ports": {"domain"},
    "core": {"ports", "domain"},
    "substrates": {"ports", "domain"},
    "adapters": {"ports", "domain"},
    "aio": {"core", "ports", "domain", "adapters"},
    "bootstrap": {"core", "ports", "domain", "adapters", "substrates", "aio"},
}
#: The outer rooms: entry points and the public faces see everything.
OUTER = {"entrypoints", "testing", "timer", "dashboard", "errors", "__init__", "__main__"}


def room_of(module: str) -> str:
    """``schedule_sdk.core.service`` -> ``core``; a substrate's room is its own package."""
    parts = module.split(".")[1:] or ["__init__"]
    return parts[0]


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names imported, line) for every import of the package in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "schedule_sdk" or node.module.startswith("schedule_sdk."):
                found.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("schedule_sdk.")]
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.append(("." * node.level + (node.module or ""), [a.name for a in node.names], node.lineno))
    return found


def module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def package_files() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]


def wrong_way_arrows() -> list[str]:
    wrong = []
    for path in package_files():
        source = module_of(path)
        room = room_of(source)
        if room in OUTER:
            continue
        for target, _, line in imports(path):
            if target.startswith("."):
                wrong.append(f"{source}:{line} relative import {target}")
                continue
            other = room_of(target)
            if other == room and room != "substrates":
                continue
            if room == "substrates":
                own = ".".join(source.split(".")[:3])
                if target == own or target.startswith(own + "."):
                    continue
            if other not in ALLOWED[room]:
                wrong.append(f"{source}:{line} -> {target}")
    return sorted(wrong)


def private_imports() -> list[str]:
    found = []
    for path in package_files():
        source = module_of(path)
        for target, names, line in imports(path):
            found += [
                f"{source}:{line} imports {target}.{name}"
                for name in names
                if name.startswith("_") and not name.startswith("__") and target != source
            ]
    return sorted(found)


#: Arrows still to turn around (the layout moved first); an entry leaves when its arrow is fixed.
PENDING = {
    "schedule_sdk.adapters.brokers.inprocess -> schedule_sdk.core.listeners",
    "schedule_sdk.adapters.publishers.blinker -> schedule_sdk.core.listeners",
    "schedule_sdk.adapters.publishers.blinker -> schedule_sdk.core.loop",
    "schedule_sdk.adapters.publishers.redis -> schedule_sdk.core.listeners",
    "schedule_sdk.adapters.publishers.redis -> schedule_sdk.core.loop",
    "schedule_sdk.core.firing -> schedule_sdk.adapters.metrics",
    "schedule_sdk.core.firing -> schedule_sdk.adapters.tracing",
    "schedule_sdk.core.service -> schedule_sdk.adapters.metrics",
    "schedule_sdk.core.service -> schedule_sdk.adapters.tracing",
    "schedule_sdk.bootstrap.timer_settings imports schedule_sdk.bootstrap.settings._env",
    "schedule_sdk.testing.timers imports schedule_sdk.adapters.stores.memory._Transaction",
}


def _unlined(found: list[str]) -> set[str]:
    return {re.sub(r":\d+ ", " ", f) for f in found}


def test_arrows_point_inward_only() -> None:
    assert _unlined(wrong_way_arrows()) - PENDING == set()


def test_no_module_imports_another_modules_private_name() -> None:
    assert _unlined(private_imports()) - PENDING == set()


def test_pending_arrows_still_exist() -> None:
    """An arrow fixed but left in PENDING would hide its return."""
    assert PENDING - _unlined(wrong_way_arrows() + private_imports()) == set()


def test_the_rule_sees_a_wrong_way_arrow(tmp_path: Path) -> None:
    """The checker itself: an import of the core from the domain is reported."""
    sample = tmp_path / "sample.py"
    sample.write_text("from schedule_sdk.core.service import ScheduleService\nfrom .x import _y\n")
    assert [t for t, _, _ in imports(sample)] == ["schedule_sdk.core.service", ".x"]
    assert "core" not in ALLOWED["domain"]
