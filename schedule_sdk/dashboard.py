"""The web dashboard's public face: :func:`create_dashboard`, the :data:`AuthHook` it takes and the
:class:`TenantScope` such a hook may return.

The pages, actions and their guard live in :mod:`schedule_sdk.entrypoints.dashboard`; needs the
``dashboard`` extra (``pip install 'schedule-sdk[dashboard]'``). The names are imported from there
on first use, so importing this module loads no web framework until one of them is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schedule_sdk.entrypoints.dashboard import AuthHook, TenantScope, create_dashboard

_HOME = "schedule_sdk.entrypoints.dashboard"


if not TYPE_CHECKING:  # checkers see the names above, and no other

    def __getattr__(name: str) -> object:
        if name in __all__:
            value = getattr(importlib.import_module(_HOME), name)
            globals()[name] = value
            return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))


__all__ = ["AuthHook", "TenantScope", "create_dashboard"]
