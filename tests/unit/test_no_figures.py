"""No benchmark figure in the package's own voice.

Docstrings and ``#`` comments say why the code is the way it is; how fast it ran on one machine
on one day belongs to ``bench/`` output and ``docs/explanation/performance.md``, where each figure
comes with the command that reproduces it. A figure in a docstring goes stale without anyone
noticing. Read from the source with ``ast`` and ``tokenize`` (nothing is imported).

What counts as a figure: a number followed by a unit of time (``ns``, ``us``, ``µs``, ``ms``,
``s``), of throughput (``ops/s``, ``jobs/s``, ``fires/s``…) or of size (``KB``, ``MB``, ``GB``),
a ratio (``3×``, ``3x faster``), a share (``1.4 % of a core``) and a percentile with a value
(``p99 1.2``, ``p99 = 4``). A real constant written with a unit (a bound the code checks, a
default of a setting) is not a measurement: such a phrase goes to :data:`ALLOWED`, each with
its reason.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.support.source import parse

PACKAGE = Path(__file__).resolve().parents[2] / "schedule_sdk"

#: Sub-paths of the package not checked, relative to the package (none: every module is).
EXCLUDED: tuple[str, ...] = ()

#: Sub-paths checked, relative to the package ("" is the whole package); a test per entry.
CHECKED: tuple[str, ...] = ("",)

_NUMBER = r"(?<![\w.])~?\d[\d,]*(?:\.\d+)?(?:\s*[-–]\s*\d[\d,]*(?:\.\d+)?)?"
_UNIT = (
    r"(?:ns|us|µs|μs|ms|s|sec|secs|seconds?|milliseconds?|microseconds?|nanoseconds?"
    r"|[KMG]i?B"
    r"|(?:ops|jobs|fires|runs|claims|calls|msgs|messages|statements|rows|events|requests)\s*/\s*s"
    r"|(?:ops|jobs|fires|runs|claims|calls|msgs|messages|statements|rows|events|requests)"
    r"\s+(?:per|a)\s+second"
    r"|×|x\s+(?:faster|slower|more|less|fewer|the))"
)
FIGURE = re.compile(
    rf"{_NUMBER}\s*{_UNIT}(?![\w/])"
    rf"|\b(?:tens|hundreds|thousands|dozens)\s+of\s+{_UNIT}(?![\w/])"
    rf"|(?:{_NUMBER}\s*%|(?:\ba\s+few|{_NUMBER})\s+per\s*cent)\s+of\s+a\b"
    r"|\bp(?:50|90|95|99|999)\b\s*(?:[:=]|of|at|was|is)?\s*~?\d",
    re.IGNORECASE,
)

_LITERAL = re.compile(r"``.+?``")

#: Phrases with a unit that are constants of the code, not measurements, and why. Matched
#: against the text (whitespace collapsed); keep this short. A literal in double backticks is
#: never a figure: it shows a syntax or a format the code reads or writes (``45s``, ``1.2s ago``).
ALLOWED: dict[str, str] = {
    "1 ms to 7 days": "the range a time limit is checked against (domain/time_limits.py)",
    "1 ms to :data:`MAX_SPREAD`": "the range a spread is checked against (domain/jobs.py)",
    "1 ms to 10 years": "the range an interval is checked against (domain/timing.py)",
}


def _docstrings(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, text) of every docstring: module, class and function ones, and the string
    statements that document an attribute."""
    found = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        found.extend(
            (stmt.lineno, stmt.value.value)
            for stmt in body
            if isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        )
    return found


def _comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every ``#`` comment."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(tok.start[0], tok.string) for tok in tokens if tok.type == tokenize.COMMENT]


def figures_in_text(text: str) -> list[str]:
    """The figures in ``text``, allowed phrases taken out first."""
    flat = _LITERAL.sub(" ", " ".join(text.split()))
    for phrase in ALLOWED:
        flat = flat.replace(phrase, " ")
    return [m.group(0) for m in FIGURE.finditer(flat)]


def figures_in(path: Path) -> list[str]:
    """``path:line: figure`` for every figure in the docstrings and comments of ``path``."""
    source = path.read_text()
    texts = _docstrings(parse(source, str(path))) + _comments(source)
    return [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {figure!r}"
        for line, text in sorted(texts)
        for figure in figures_in_text(text)
    ]


def _excluded(path: Path) -> bool:
    rel = path.relative_to(PACKAGE).as_posix()
    return any(rel == e or rel.startswith(e.rstrip("/") + "/") for e in EXCLUDED)


def files_under(sub_path: str) -> list[Path]:
    root = PACKAGE / sub_path
    paths = [root] if root.is_file() else sorted(root.rglob("*.py"))
    return [p for p in paths if not _excluded(p)]


@pytest.mark.parametrize("sub_path", CHECKED, ids=lambda s: s or "schedule_sdk")
def test_no_benchmark_figures_in_docstrings_or_comments(sub_path: str) -> None:
    found = [hit for path in files_under(sub_path) for hit in figures_in(path)]
    assert not found, (
        "benchmark figures in the package's docstrings or comments (say the design reason; the "
        "figure goes to bench/ output and docs/explanation/performance.md):\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    "text",
    [
        "a claim costs ~1.2 ms on PostgreSQL",
        "measured at 110 jobs/s on a 2-core machine",
        "about 25 us each here",
        "3.2 µs per call",
        "12,000 jobs/s",
        "lateness p99 1 ms",
        "p99 = 4",
        "the worker holds 80 MB",
        "3× fewer round trips",
        "tens of ms, 40-60 ms per pass",
        "a 0.5 s fetch",
        "pauses of tens of ms",
        "1.4 % of a core",
        "a few percent of a worker's CPU",
        "claims: 2x faster",
    ],
)
def test_figures_are_found(text: str) -> None:
    assert figures_in_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "a time limit is a timedelta from 1 ms to 7 days",
        "lateness p50 and p99 per bucket",
        "``30d``, ``12h``, ``90m``, ``45s`` or seconds",
        "``1.2s ago``; never ``-0.0s ago``",
        "the mask 0x1F",
        "SCHEDULE_TIMER_* settings",
        "the store's clock read once per 2 claims",
        "O(1) per fire",
        "UTF-8 and int64",
        "hands over entries for a few seconds after a failover",
    ],
)
def test_non_figures_pass(text: str) -> None:
    assert not figures_in_text(text)
