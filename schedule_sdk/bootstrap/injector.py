"""dependency-injector's ``containers`` and ``providers``, imported without the web frameworks.

``dependency_injector.wiring`` (which ``containers`` imports) imports FastAPI, Starlette, Werkzeug
and FastDepends when they are installed, only to recognise their parameter markers and request
classes while wiring. This package wires nothing, so those imports would cost every process
start-up for nothing. Here they are blocked (``sys.modules[name] = None``) for the duration of the
first import of dependency-injector, then restored, and wiring gets recognisers that test the same
classes once their module is loaded by whoever uses them: an object can only be an instance of a
class of a module that was imported, so an application's own wiring (FastAPI
``Depends(Provide[...])`` and the rest) behaves as before.

If dependency-injector was imported before (by the application), nothing is blocked.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

#: The optional modules ``dependency_injector.wiring`` tries at import time.
_OPTIONAL = ("fastapi", "fast_depends", "starlette", "werkzeug")
#: Where FastDepends keeps its marker class (3.x, then 2.x).
_FAST_DEPENDS = (("fast_depends.dependencies.model", "Dependant"), ("fast_depends.dependencies", "Depends"))
_lock = threading.Lock()


def _blocked() -> list[str]:
    return [name for name in _OPTIONAL if name not in sys.modules]


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
        try:
            import dependency_injector.containers  # noqa: F401
            from dependency_injector import wiring
        finally:
            for name in blocked:
                if name in sys.modules and sys.modules[name] is None:
                    del sys.modules[name]
        if set(_OPTIONAL) & set(blocked):
            _recognise_later(wiring)


_import()

from dependency_injector import containers, providers  # noqa: E402

__all__ = ["containers", "providers"]
