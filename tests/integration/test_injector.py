"""``schedule_sdk.bootstrap.injector``: dependency-injector without the web frameworks its wiring
would import, and an application's FastAPI wiring still working afterwards (fresh interpreters)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_container_loads_no_web_framework() -> None:
    out = run(
        """
        import sys
        import schedule_sdk.bootstrap.container
        print(sorted({m.split(".")[0] for m in sys.modules} & {"fastapi", "starlette", "werkzeug", "flask"}))
        """
    )
    assert out == "[]"


WIRED_APP = """
    from dependency_injector import containers, providers
    from dependency_injector.wiring import Provide, inject
    from fastapi import Depends
    from starlette.requests import Request


    class App(containers.DeclarativeContainer):
        greeting = providers.Object("hello")


    @inject
    def handler(request: Request, greeting: str = Depends(Provide[App.greeting])) -> str:
        return greeting


    container = App()
    container.wire(modules=[__name__])
    print(handler(Request({"type": "http"})))
"""


@pytest.mark.parametrize("first", ["import schedule_sdk.bootstrap.injector", "import fastapi"])
def test_an_applications_fastapi_wiring_still_resolves(first: str) -> None:
    pytest.importorskip("fastapi")
    assert run(f"{first}\n{textwrap.dedent(WIRED_APP)}") == "hello"


FROM_PYDANTIC = """
    import sys
    from dependency_injector import providers
    try:
        providers.Configuration().from_pydantic(object())
    except Exception as error:
        print(type(error).__name__, error)
    print("pydantic loaded:", "pydantic" in sys.modules)
"""


def test_the_container_loads_no_pydantic_and_from_pydantic_answers_as_before() -> None:
    """With pydantic 2 and no ``pydantic_settings``, dependency-injector imports pydantic for
    nothing: the injector refuses it to that import, and ``from_pydantic`` says what it said."""
    stock = run(FROM_PYDANTIC).splitlines()
    ours = run(f"import schedule_sdk.bootstrap.container\n{textwrap.dedent(FROM_PYDANTIC)}").splitlines()
    assert stock[-1] == "pydantic loaded: True"  # the stock import, on this environment
    assert ours[-1] == "pydantic loaded: False"
    assert ours[:-1] == stock[:-1]
    assert (
        run("import schedule_sdk.bootstrap.container, pydantic; print(pydantic.BaseModel.__name__)")
        == "BaseModel"
    )
