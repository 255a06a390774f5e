"""Old import paths kept for one release: a deprecated module's ``__getattr__`` that finds each name
in the module's new home and warns (``DeprecationWarning``) where it lives now."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def moved(old: str, *new: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for the deprecated module ``old``: each name is looked up
    in the modules ``new``, in order, with a ``DeprecationWarning`` naming where it lives now."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        for path in new:
            module = importlib.import_module(path)
            if hasattr(module, name):
                warnings.warn(
                    f"{old} is deprecated: import {name} from {path}", DeprecationWarning, stacklevel=2
                )
                return getattr(module, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return __getattr__
