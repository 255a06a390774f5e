"""Reading the package's own source in tests: ``ast.parse`` made safe on CPython 3.11."""

from __future__ import annotations

import ast
import gc
from pathlib import Path


def parse(source: str, filename: str = "<unknown>", tries: int = 3) -> ast.Module:
    """``ast.parse`` with the garbage collector held off, and again on CPython 3.11's spurious
    "AST constructor recursion depth mismatch": a SystemError raised when a collection runs
    finalizers (Python code) while the tree is being built, which moves the recursion counter
    the constructor checks."""
    for attempt in range(tries):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return ast.parse(source, filename)
        except SystemError:
            if attempt == tries - 1:
                raise
        finally:
            if enabled:
                gc.enable()
    raise AssertionError("unreachable")


def parse_file(path: Path) -> ast.Module:
    """:func:`parse` of the file at ``path``."""
    return parse(path.read_text(), str(path))
