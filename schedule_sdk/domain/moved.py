"""Old import paths kept for one release: a deprecated module's ``__getattr__`` that finds each name
in the module's new home and warns (``DeprecationWarning``) where it lives now."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def moved(old: str, *new: str, names: frozenset[str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for the deprecated module ``old``: each name is looked up
    in the modules ``new``, in order, with a ``DeprecationWarning`` naming where it lives now.
    ``names``: only these moved (``old`` is a live module that lost them); None: every name. The
    new home is imported by name when a moved name is first used, so a room may point at one it
    does not import."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__") or (names is not None and name not in names):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        for path in new:
            module = importlib.import_module(path)
            if hasattr(module, name):
                what = old if names is None else f"{old}.{name}"
                warnings.warn(
                    f"{what} is deprecated: import {name} from {path}", DeprecationWarning, stacklevel=2
                )
                return getattr(module, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return __getattr__
