"""The docs cannot rot: every checked code block is a copy of a section of a file the tests run.

The rules (docs/contributing.md): a fenced block tagged python, toml, ini or dotenv is preceded by
``<!-- include: path[:section] -->`` and equals that section of ``path``; ``path`` lives under
examples/, tests/ or bench/ and is run by the test suite; every block names its language; every
relative link resolves; docs/index.md links every page. ``scripts/sync_docs.py`` rewrites blocks.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_sync_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_docs", ROOT / "scripts" / "sync_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


sync_docs = _load_sync_docs()
DOCS = sync_docs.docs_files(ROOT)
LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def _id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_code_blocks_equal_their_tested_sources(doc: Path) -> None:
    problems = sync_docs.problems(doc, ROOT)
    assert not problems, "\n".join(problems)


def _test_sources() -> str:
    return "\n".join(
        p.read_text(errors="replace") for p in (ROOT / "tests").rglob("*.py") if p != Path(__file__).resolve()
    )


def run_by_tests(rel: str, test_sources: str) -> bool:
    """Under tests/, or the file (or a folder or package holding it) is named by a test file."""
    if rel.startswith("tests/"):
        return True
    parts = Path(rel).with_suffix("").parts
    candidates = {rel}
    for n in range(2, len(parts) + 1):
        candidates |= {"/".join(parts[:n]), ".".join(parts[:n])}
    return any(candidate in test_sources for candidate in candidates)


def test_every_included_source_is_run_by_the_tests() -> None:
    sources = _test_sources()
    includes = {
        block.include[0]
        for doc in DOCS
        for block in sync_docs.blocks(doc.read_text())
        if block.include is not None
    }
    assert [rel for rel in sorted(includes) if not run_by_tests(rel, sources)] == []


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for match in LINK.finditer(doc.read_text()):
        target = match["target"].split("#")[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        if not (doc.parent / target).exists():
            broken.append(match["target"])
    assert broken == [], f"broken links in {_id(doc)}: {broken}"


def test_the_index_links_every_page() -> None:
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / m["target"].split("#")[0]).resolve() for m in LINK.finditer(index.read_text())}
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*.md") if p != index}
    assert sorted(_id(p) for p in pages - linked) == []


# -- the machinery itself ------------------------------------------------------------------------


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


SOURCE = """\
import os

def main():
    # --8<-- [start:body]
    if os.environ:
        # --8<-- [start:inner]
        print("hi")
        # --8<-- [end:inner]
    # --8<-- [end:body]
"""


def test_a_section_is_dedented_without_marker_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "examples/demo.py", SOURCE)
    assert sync_docs.snippet(path, "body") == 'if os.environ:\n    print("hi")'
    assert sync_docs.snippet(path, "inner") == 'print("hi")'
    assert "--8<--" not in sync_docs.snippet(path, None)


def test_sync_rewrites_stale_blocks_and_then_nothing_is_wrong(tmp_path: Path) -> None:
    _write(tmp_path, "examples/demo.py", SOURCE)
    doc = _write(
        tmp_path,
        "docs/page.md",
        "Intro\n\n<!-- include: examples/demo.py:inner -->\n```python\nprint('old')\n```\n\n"
        "- item\n\n  <!-- include: examples/demo.py:body -->\n  ```python\n  stale\n  ```\n",
    )
    assert len(sync_docs.problems(doc, tmp_path)) == 2
    assert sync_docs.sync(doc, tmp_path) is True
    assert sync_docs.problems(doc, tmp_path) == []
    assert '  ```python\n  if os.environ:\n      print("hi")\n  ```' in doc.read_text()
    assert sync_docs.sync(doc, tmp_path) is False


@pytest.mark.parametrize(
    ("markdown", "problem"),
    [
        ("```python\nx = 1\n```\n", "needs an include comment"),
        ("```toml\n[tool]\n```\n", "needs an include comment"),
        ("```\nx = 1\n```\n", "tag the block"),
        ("<!-- include: examples/demo.py:missing -->\n```python\nx\n```\n", "[start:missing]"),
        ("<!-- include: examples/nope.py -->\n```python\nx\n```\n", "does not exist"),
        ("<!-- include: schedule_sdk/x.py -->\n```python\nx\n```\n", "must live under"),
    ],
)
def test_what_the_check_refuses(tmp_path: Path, markdown: str, problem: str) -> None:
    _write(tmp_path, "examples/demo.py", SOURCE)
    doc = _write(tmp_path, "docs/page.md", markdown)
    found = sync_docs.problems(doc, tmp_path)
    assert len(found) == 1 and problem in found[0], found


def test_shell_text_and_diagram_blocks_are_exempt(tmp_path: Path) -> None:
    markdown = "```bash\nls\n```\n\n```text\nout\n```\n\n```mermaid\ngraph\n```\n"
    doc = _write(tmp_path, "docs/page.md", markdown)
    assert sync_docs.problems(doc, tmp_path) == []


def test_a_source_counts_as_tested_when_a_test_names_it() -> None:
    sources = 'run(["examples/quickstart.py"])\nProcess(["-m", "examples.fastapi_app"])'
    assert run_by_tests("examples/quickstart.py", sources)
    assert run_by_tests("examples/fastapi_app/endpoints.py", sources)
    assert run_by_tests("tests/integration/examples/custom_adapter.py", "")
    assert not run_by_tests("examples/other.py", sources)
