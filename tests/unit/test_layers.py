"""The import rule of the package's layout: arrows point inward only.

domain ← ports ← core ← (substrates, adapters) ← aio ← bootstrap ← entrypoints and the public faces.
Read from the source with ``ast`` (nothing is imported), so a new wrong-way arrow fails here before
anyone runs the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.source import parse_file

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


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names imported, line) for every import of the package in ``path``."""
    tree = parse_file(path)
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


#: The public faces: what users import. Nothing inside the package imports them (a back-arrow),
#: but another face may.
PUBLIC_FACES = {"schedule_sdk", "schedule_sdk.dashboard", "schedule_sdk.errors", "schedule_sdk.timer"}
#: A module of the package is read whole by one reader: past this many lines, split it by theme.
MAX_LINES = 900


def _module_files(package: Path) -> dict[str, Path]:
    return {module_of(path, package): path for path in package_files(package)}


def _target_modules(target: str, names: list[str], known: dict[str, Path]) -> list[str]:
    """The package's modules an import names: ``from a.b import c`` is ``a.b.c`` when that is a
    module, else ``a.b``."""
    found = [f"{target}.{name}" for name in names if f"{target}.{name}" in known]
    if len(found) < len(names) or not names:
        found.append(target)
    return [module for module in found if module in known]


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in it (at the top, in a function, under
    ``TYPE_CHECKING``): a circle is a circle to a reader whichever way it is taken."""
    known = _module_files(package)
    graph: dict[str, set[str]] = {module: set() for module in known}
    for module, path in known.items():
        for target, names, _ in imports(path):
            graph[module].update(m for m in _target_modules(target, names, known) if m != module)
    return graph


def circles(package: Path = PACKAGE) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    graph = import_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def back_arrows(package: Path = PACKAGE) -> list[str]:
    """Imports of a public face from a module that is not one."""
    known = _module_files(package)
    found = []
    for module, path in known.items():
        if module in PUBLIC_FACES:
            continue
        for target, names, line in imports(path):
            faces = [m for m in _target_modules(target, names, known) if m in PUBLIC_FACES]
            found += [f"{module}:{line} -> {face}" for face in faces]
    return sorted(found)


def long_modules(package: Path = PACKAGE) -> list[str]:
    return sorted(
        f"{module_of(path, package)}: {count} lines"
        for path in package_files(package)
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    )


def test_no_import_circles() -> None:
    assert circles() == []


def test_nothing_inside_the_package_imports_a_public_face() -> None:
    assert back_arrows() == []


def test_no_module_is_longer_than_a_reader_reads_whole() -> None:
    assert long_modules() == []


def test_the_rules_see_circles_back_arrows_and_long_modules(tmp_path: Path) -> None:
    """The checkers themselves, on a small package of their own."""
    package = tmp_path / "schedule_sdk"
    (package / "domain").mkdir(parents=True)
    (package / "__init__.py").write_text("from schedule_sdk.domain.jobs import Job\n")
    (package / "domain" / "__init__.py").write_text("")
    (package / "domain" / "jobs.py").write_text("from schedule_sdk.domain import limits\n")
    (package / "domain" / "limits.py").write_text(
        "def check():\n    from schedule_sdk.domain.jobs import Job\n" + "\n" * MAX_LINES
    )
    (package / "domain" / "status.py").write_text("from schedule_sdk import Job\n")
    assert circles(package) == [["schedule_sdk.domain.jobs", "schedule_sdk.domain.limits"]]
    assert back_arrows(package) == ["schedule_sdk.domain.status:1 -> schedule_sdk"]
    assert long_modules(package) == [f"schedule_sdk.domain.limits: {MAX_LINES + 2} lines"]
