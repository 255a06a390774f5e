"""What the ``schedule-sdk`` commands share: the exit codes, :class:`UsageError` and the
:class:`Context` every command gets. Light on purpose: nothing here imports the store or the
container, so ``schedule-sdk --help`` and ``schedule-sdk cron`` start at once.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from schedule_sdk.bootstrap.container import ScheduleContainer
    from schedule_sdk.bootstrap.settings import Settings

OK, ERROR, USAGE, NOT_FOUND, UNAVAILABLE = 0, 1, 2, 3, 4
UNHEALTHY = 5  # `health`: a check failed (no live worker, old backlog); `db current`: upgrade pending


class UsageError(Exception):
    """A configuration or usage problem the user must fix (exit code 2)."""


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

    def progress(self, text: str, *, final: bool = False) -> None:
        """A progress line on stderr (rewritten in place on a terminal)."""
        if self.args.quiet:
            return
        if self.err.isatty():
            self.err.write(f"\r\x1b[K{text}" + ("\n" if final else ""))
        else:
            self.err.write(text + "\n")
        self.err.flush()
