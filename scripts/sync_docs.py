"""Keep the code blocks in the docs identical to the tested files they come from.

Every fenced block tagged ``python`` (or ``toml``, ``ini``, ``dotenv``) in ``docs/**/*.md`` and
``README.md`` is preceded by an include comment naming its source::

    <!-- include: examples/quickstart.py:schedule -->      (a named section)
    <!-- include: tests/integration/examples/custom_adapter.py -->     (the whole file)

A section is marked in the source with comment lines ``# --8<-- [start:NAME]`` and
``# --8<-- [end:NAME]`` (pymdown-extensions "snippets" syntax); the block holds the lines between
them, dedented, without blank lines at either end and without any marker lines. Sources must live
under examples/, tests/ or bench/ and be run by the test suite (its test_docs.py checks this).

Usage: ``python scripts/sync_docs.py`` rewrites every included block from its source;
``python scripts/sync_docs.py --check`` only reports blocks that differ (exit status 1).
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Blocks in these languages must be included from a tested file.
CHECKED = frozenset({"python", "py", "toml", "ini", "dotenv", "env"})
#: Where included files may live (all of it is collected or executed by the test suite).
SOURCE_DIRS = ("examples", "tests", "bench")

INCLUDE = re.compile(r"^\s*<!--\s*include:\s*(?P<path>[^\s:]+)(?::(?P<name>[\w.-]+))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
MARKER = re.compile(r"--8<--\s*\[(?P<kind>start|end):(?P<name>[\w.-]+)\]")


class SnippetError(Exception):
    """An include names a missing file or section."""


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown file: lines ``start`` (the opening fence) to ``end`` (closing)."""

    language: str
    start: int
    end: int
    indent: str
    body: str
    include: tuple[str, str | None] | None  # (path, section name) from the comment before it


def docs_files(root: Path = ROOT) -> list[Path]:
    files = sorted((root / "docs").rglob("*.md"))
    readme = root / "README.md"
    return [readme, *files] if readme.exists() else files


def blocks(text: str) -> Iterator[Block]:
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        closing = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        inner = lines[i + 1 : end]
        body = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in inner)
        yield Block(opening["info"].lower(), i, end, indent, body, _include_before(lines, i))
        i = end + 1


def _include_before(lines: list[str], index: int) -> tuple[str, str | None] | None:
    j = index - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    match = INCLUDE.match(lines[j]) if j >= 0 else None
    return (match["path"], match["name"]) if match else None


def snippet(path: Path, name: str | None) -> str:
    """The text a block including ``path`` (section ``name``, or all of it) must hold."""
    if not path.is_file():
        raise SnippetError(f"{path} does not exist")
    lines = path.read_text().split("\n")
    if name is not None:
        starts = [i for i, line in enumerate(lines) if _marker(line) == ("start", name)]
        ends = [i for i, line in enumerate(lines) if _marker(line) == ("end", name)]
        if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
            raise SnippetError(f"{path} needs exactly one [start:{name}] marker followed by one [end:{name}]")
        lines = lines[starts[0] + 1 : ends[0]]
    kept = [line for line in lines if _marker(line) is None]
    return textwrap.dedent("\n".join(kept)).strip("\n")


def _marker(line: str) -> tuple[str, str] | None:
    match = MARKER.search(line)
    return (match["kind"], match["name"]) if match else None


def problems(doc: Path, root: Path = ROOT) -> list[str]:
    """Everything wrong with the code blocks of ``doc`` (empty: all good)."""
    found: list[str] = []
    for block in blocks(doc.read_text()):
        where = f"{doc.relative_to(root)}:{block.start + 1}"
        if not block.language:
            found.append(f"{where}: tag the block with its language (```python, ```bash, ```text, ...)")
        elif block.language in CHECKED and block.include is None:
            found.append(f"{where}: a ```{block.language} block needs an include comment before it")
        elif block.include is not None:
            found += [f"{where}: {p}" for p in _include_problems(block, root)]
    return found


def _include_problems(block: Block, root: Path) -> list[str]:
    assert block.include is not None
    rel, name = block.include
    if not rel.startswith(tuple(f"{d}/" for d in SOURCE_DIRS)):
        return [f"include {rel}: sources must live under {', '.join(SOURCE_DIRS)}/"]
    try:
        expected = snippet(root / rel, name)
    except SnippetError as error:
        return [str(error)]
    if block.body.strip("\n") != expected:
        return [f"differs from {rel}{':' + name if name else ''} (run python scripts/sync_docs.py)"]
    return []


def sync(doc: Path, root: Path = ROOT) -> bool:
    """Rewrite every included block of ``doc`` from its source; return whether anything changed."""
    text = doc.read_text()
    lines = text.split("\n")
    for block in reversed(list(blocks(text))):
        if block.include is None:
            continue
        try:
            body = snippet(root / block.include[0], block.include[1])
        except SnippetError:
            continue  # left for --check / the tests to report
        new = [f"{block.indent}{line}" if line else "" for line in body.split("\n")]
        lines[block.start + 1 : block.end] = new
    updated = "\n".join(lines)
    if updated != text:
        doc.write_text(updated)
    return updated != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="report problems; change nothing")
    args = parser.parse_args(argv)
    status = 0
    for doc in docs_files():
        if not args.check and sync(doc):
            sys.stdout.write(f"updated {doc.relative_to(ROOT)}\n")
        for problem in problems(doc):
            sys.stdout.write(f"{problem}\n")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
