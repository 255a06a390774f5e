"""The import rule of the package's layout: arrows point inward only.

domain ← ports ← core ← (substrates, adapters) ← aio ← bootstrap ← entrypoints and the public faces.
Read from the source with ``ast`` (nothing is imported), so a new wrong-way arrow fails here before
anyone runs the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "schedule_sdk"

#: What each room may import from the package (its own room is always allowed).
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "ports": {"domain"},
    "core": {"ports", "domain"},
    "substrates": {"core", "ports", "domain"},
    "adapters": {"ports", "domain"},
    "aio": {"core", "ports", "domain", "adapters"},
    "bootstrap": {"core", "ports", "domain", "adapters", "substrates", "aio"},
}
#: The outer rooms: entry points and the public faces see everything.
OUTER = {"entrypoints", "contrib", "testing", "timer", "dashboard", "errors", "__init__", "__main__"}


def room_of(module: str) -> str:
    """``schedule_sdk.core.service`` -> ``core``; a substrate's room is its own package."""
    parts = module.split(".")[1:] or ["__init__"]
    return parts[0]


def _parse(path: Path, tries: int = 3) -> ast.Module:
    """``ast.parse``, again on CPython 3.11's spurious "AST constructor recursion depth mismatch"
    (a SystemError from a recursion counter other threads of the process can disturb)."""
    for attempt in range(tries):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names imported, line) for every import of the package in ``path``."""
    tree = _parse(path)
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


def module_of(path: Path, package: Path = PACKAGE) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def package_files(package: Path = PACKAGE) -> list[Path]:
    return [p for p in package.rglob("*.py") if "migrations" not in p.parts]


def wrong_way_arrows(package: Path = PACKAGE) -> list[str]:
    wrong = []
    for path in package_files(package):
        source = module_of(path, package)
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


def private_imports(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in package_files(package):
        source = module_of(path, package)
        for target, names, line in imports(path):
            found += [
                f"{source}:{line} imports {target}.{name}"
                for name in names
                if name.startswith("_") and not name.startswith("__") and target != source
            ]
    return sorted(found)


def test_arrows_point_inward_only() -> None:
    assert wrong_way_arrows() == []


def test_no_module_imports_another_modules_private_name() -> None:
    assert private_imports() == []


def test_the_rule_sees_wrong_way_arrows_and_private_names(tmp_path: Path) -> None:
    """The checker itself, on a small package of its own."""
    package = tmp_path / "schedule_sdk"
    (package / "domain").mkdir(parents=True)
    (package / "substrates" / "sql").mkdir(parents=True)
    (package / "domain" / "jobs.py").write_text("from schedule_sdk.core.service import ScheduleService\n")
    (package / "substrates" / "sql" / "poller.py").write_text(
        "from schedule_sdk.substrates.sql.queue import SQLExecutionQueue\n"
        "from schedule_sdk.substrates.rq.queue import RQExecutionQueue\n"
        "from schedule_sdk.ports import _Hidden\n"
    )
    (package / "entrypoints.py").write_text("from schedule_sdk.core.service import ScheduleService\n")
    assert wrong_way_arrows(package) == [
        "schedule_sdk.domain.jobs:1 -> schedule_sdk.core.service",
        "schedule_sdk.substrates.sql.poller:2 -> schedule_sdk.substrates.rq.queue",
    ]
    assert private_imports(package) == [
        "schedule_sdk.substrates.sql.poller:3 imports schedule_sdk.ports._Hidden"
    ]
