"""What the ``schedule-sdk`` commands share: the exit codes, :class:`UsageError` and the
:class:`Context` every command gets. Light on purpose: nothing here imports the store or the
container, so ``schedule-sdk --help`` and ``schedule-sdk cron`` start at once.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from schedule_sdk.domain.text import escaped, shown

if TYPE_CHECKING:
    from schedule_sdk.bootstrap.container import ScheduleContainer
    from schedule_sdk.bootstrap.settings import Settings

OK, ERROR, USAGE, NOT_FOUND, UNAVAILABLE = 0, 1, 2, 3, 4
UNHEALTHY = 5  # `health`: a check failed (no live worker, old backlog); `db current`: upgrade pending


class UsageError(Exception):
    """A configuration or usage problem the user must fix (exit code 2)."""


def one_line(error: BaseException) -> str:
    """``error`` as one line of at most 400 characters (its type's name if it says nothing)."""
    text = escaped(" ".join(str(error).split())) or type(error).__name__
    return text if len(text) <= 400 else text[:397] + "..."


def import_listener_modules(modules: Sequence[str]) -> None:
    """Import the worker's listener modules, with the working directory first on the import path
    (as ``celery -A`` and ``rq worker`` do: ``schedule-sdk worker --listeners mymod`` run from the
    project's folder finds ``mymod.py``, which a console script's path would not).

    :raises UsageError: a module cannot be imported.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise UsageError(f"cannot import listener module {shown(module)}: {one_line(error)}") from error


@dataclass
class Context:
    """What every command gets: parsed options, the container, and where to write.

    ``held`` is None for a command that needs no container (``cron``); :attr:`container` is the
    container of every other command."""

    args: argparse.Namespace
    held: ScheduleContainer | None
    out: TextIO
    err: TextIO

    @property
    def container(self) -> ScheduleContainer:
        if self.held is None:
            raise RuntimeError(f"the {self.args.command!r} command runs without a container")
        return self.held

    @property
    def settings(self) -> Settings:
        settings: Settings = self.container.settings()
        return settings

    def notice(self, text: str) -> None:
        """A status line of a long-running command (a worker's start and stop) on stderr: one JSON
        object with ``--log-format json`` (an INFO record of the ``schedule_sdk.cli`` logger, as
        every other line), else ``schedule-sdk: <text>``; nothing with ``-q``."""
        if self.args.quiet:
            return
        if getattr(self.args, "log_format", "text") == "json":
            from schedule_sdk.entrypoints.logs import JsonFormatter

            record = logging.LogRecord("schedule_sdk.cli", logging.INFO, __file__, 0, text, None, None)
            self.err.write(JsonFormatter().format(record) + "\n")
        else:
            self.err.write(f"schedule-sdk: {text}\n")
        self.err.flush()

    def progress(self, text: str, *, final: bool = False) -> None:
        """A progress line on stderr (rewritten in place on a terminal)."""
        if self.args.quiet:
            return
        if self.err.isatty():
            self.err.write(f"\r\x1b[K{text}" + ("\n" if final else ""))
        else:
            self.err.write(text + "\n")
        self.err.flush()
