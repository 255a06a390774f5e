"""dependency-injector's ``containers`` and ``providers``, imported without the web frameworks.

``dependency_injector.wiring`` (which ``containers`` imports) imports FastAPI, Starlette, Werkzeug
and FastDepends when they are installed, only to recognise their parameter markers and request
classes while wiring. This package wires nothing, so those imports would cost every process
start-up for nothing. Here they are blocked (``sys.modules[name] = None``) for the duration of the
first import of dependency-injector, then restored, and wiring gets recognisers that test the same
classes once their module is loaded by whoever uses them: an object can only be an instance of a
class of a module that was imported, so an application's own wiring (FastAPI
``Depends(Provide[...])`` and the rest) behaves as before.

Its ``providers`` also imports pydantic, to read pydantic 1's ``BaseSettings`` when
``pydantic_settings`` is absent; with pydantic 2 (``pydantic_core`` installed) it does nothing with
it. In that case pydantic is refused to that one import too (a finder on ``sys.meta_path`` raising
``ModuleNotFoundError``: the compiled module reads a ``None`` in ``sys.modules`` as the module), so
``Configuration.from_pydantic`` behaves as it did: it needs ``pydantic_settings`` either way.

If dependency-injector was imported before (by the application), nothing is blocked.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

#: The optional modules ``dependency_injector.wiring`` tries at import time.
_OPTIONAL = ("fastapi", "fast_depends", "starlette", "werkzeug")
#: Where FastDepends keeps its marker class (3.x, then 2.x).
_FAST_DEPENDS = (("fast_depends.dependencies.model", "Dependant"), ("fast_depends.dependencies", "Depends"))
_lock = threading.Lock()


def _blocked() -> list[str]:
    return [name for name in _OPTIONAL if name not in sys.modules]


def _unused_pydantic() -> bool:
    """Whether dependency-injector would import pydantic for nothing: pydantic 2 without
    ``pydantic_settings`` (and nobody imported pydantic yet)."""
    if "pydantic" in sys.modules or "pydantic_settings" in sys.modules:
        return False
    return (
        importlib.util.find_spec("pydantic_settings") is None
        and importlib.util.find_spec("pydantic_core") is not None
    )


class _Refuse(importlib.abc.MetaPathFinder):
    """Refuses ``names`` (and their submodules) while it is on ``sys.meta_path``."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"{fullname} is not imported with dependency-injector", name=fullname)
        return None


def _recognise_later(wiring: Any) -> None:
    """The recognisers ``wiring`` would have registered, testing the class when its module is loaded."""

    def fastapi_marker(param: Any) -> Any:
        params = sys.modules.get("fastapi.params")
        return param.dependency if params is not None and isinstance(param, params.Depends) else None

    def fast_depends_marker(param: Any) -> Any:
        for module, name in _FAST_DEPENDS:
            cls = getattr(sys.modules.get(module), name, None)
            if isinstance(cls, type) and isinstance(param, cls):
                marker: Any = param
                return marker.dependency
        return None

    def is_starlette_request_cls(obj: Any) -> bool:
        requests = sys.modules.get("starlette.requests")
        if requests is None or not isinstance(obj, type):
            return False
        try:
            return issubclass(obj, requests.Request)
        except TypeError:
            return False

    def is_werkzeug_local_proxy(obj: Any) -> bool:
        local = sys.modules.get("werkzeug.local")
        return local is not None and isinstance(obj, local.LocalProxy)

    wiring.MARKER_EXTRACTORS.extend([fastapi_marker, fast_depends_marker])
    wiring.INSPECT_EXCLUSION_FILTERS.extend([is_starlette_request_cls, is_werkzeug_local_proxy])


def _import() -> None:
    with _lock:
        if "dependency_injector.containers" in sys.modules:
            return
        blocked = _blocked()
        for name in blocked:
            sys.modules[name] = None  # type: ignore[assignment]  # "import name" raises ImportError
        refuse = _Refuse({"pydantic"} if _unused_pydantic() else set())
        sys.meta_path.insert(0, refuse)
        try:
            import dependency_injector.containers  # noqa: F401
            from dependency_injector import wiring
        finally:
            sys.meta_path.remove(refuse)
            for name in blocked:
                if name in sys.modules and sys.modules[name] is None:
                    del sys.modules[name]
        if set(_OPTIONAL) & set(blocked):
            _recognise_later(wiring)


_import()

from dependency_injector import containers, providers  # noqa: E402

__all__ = ["containers", "providers"]
