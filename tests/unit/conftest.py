"""Unit tests run no I/O and never sleep: time comes from fake clocks, stores are in memory.

Every test in this folder runs with the network, child processes, SQLite files and real sleeps
turned into errors, so a test that needs one of them fails here and belongs in
``tests/integration/`` or ``tests/processes/``. Reading the repository's own files (the import
rule, the reference pages) is allowed.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest


class UnitTestIO(AssertionError):
    """A unit test tried to do I/O or to sleep."""


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnitTestIO(
            f"unit tests may not {what}; move this test to tests/integration/ or tests/processes/"
        )

    return refuse


_real_asyncio_sleep = asyncio.sleep


def _no_sleep(seconds: float) -> None:
    if seconds > 0:
        raise UnitTestIO("unit tests may not sleep (time.sleep with a delay); drive a fake clock instead")


async def _yield_only(delay: float, result: Any = None) -> Any:
    if delay > 0:
        raise UnitTestIO("unit tests may not sleep (asyncio.sleep with a delay); drive a fake clock instead")
    return await _real_asyncio_sleep(0, result)


@pytest.fixture(autouse=True)
def no_io(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(time, "sleep", _no_sleep)
    monkeypatch.setattr(asyncio, "sleep", _yield_only)
    monkeypatch.setattr(socket.socket, "connect", _refuse("open network connections"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse("open network connections"))
    monkeypatch.setattr(socket, "create_connection", _refuse("open network connections"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("start processes"))
    monkeypatch.setattr(sqlite3, "connect", _refuse("open SQLite databases"))
    yield
