"""Start-up cost, the working tree against a base commit, alternating in one run: the wall time of
a fresh process that imports ``schedule_sdk``, imports ``apscheduler`` (the yardstick), and runs
``schedule-sdk --help``, ``schedule-sdk cron '*/5 * * * *' --tz UTC`` and
``schedule-sdk jobs list --help``. Prints each case's median per tree and the ratio (head / base).

Run:  flock /tmp/cpu.lock .venv/bin/python bench/startup.py --base main [--head WORKTREE] [--rounds 9]

``--base`` and ``--head`` name a commit (anything ``git rev-parse`` takes) or ``WORKTREE`` (this
checkout as it is, uncommitted changes included; the default head). A commit is checked out with
``git worktree add --detach`` in a temporary directory (removed at the end) and run with this
checkout's virtualenv, its tree first on ``PYTHONPATH``. Each round runs every case on both trees,
in turn (base first on odd rounds, head first on even ones), so both see the same machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare import WORKTREE  # bench/ is on sys.path when run as a script
from compare import Tree as Checkout

CLI = "import sys; from schedule_sdk.entrypoints.cli import main; sys.exit(main(sys.argv[1:]))"

#: name -> the arguments of ``python`` (the CLI as its console script runs it).
CASES: dict[str, list[str]] = {
    "import schedule_sdk": ["-c", "import schedule_sdk"],
    "import apscheduler": ["-c", "import apscheduler"],
    "schedule-sdk --help": ["-c", CLI, "--help"],
    "schedule-sdk cron": ["-c", CLI, "cron", "*/5 * * * *", "--tz", "UTC"],
    "schedule-sdk jobs list --help": ["-c", CLI, "jobs", "list", "--help"],
}


class Tree(Checkout):
    """A checkout of ``rev`` (:class:`compare.Tree`) whose processes import its ``schedule_sdk``."""

    def env(self) -> dict[str, str]:
        path = os.pathsep.join(filter(None, [str(self.path), os.environ.get("PYTHONPATH")]))
        return {**os.environ, "PYTHONPATH": path}

    def check(self) -> None:
        """Fail unless this tree's ``schedule_sdk`` is the one its processes import."""
        found = subprocess.run(
            [sys.executable, "-c", "import schedule_sdk; print(schedule_sdk.__file__)"],
            env=self.env(), check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
        ).stdout.strip()  # fmt: skip
        if not Path(found).resolve().is_relative_to(self.path.resolve()):
            raise SystemExit(f"{self.label}: imports {found}, not its own tree")


def wall(tree: Tree, args: list[str]) -> float:
    """Seconds for one fresh process (its exit status must be 0)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], env=tree.env(), check=True, stdout=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
    )  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--base", required=True)
    parser.add_argument("--head", default=WORKTREE)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    trees = {"base": Tree(args.base), "head": Tree(args.head)}
    times: dict[str, dict[str, list[float]]] = {side: {case: [] for case in CASES} for side in trees}
    try:
        for tree in trees.values():
            tree.check()
            for case_args in CASES.values():
                wall(tree, case_args)  # warm the bytecode caches and the page cache
        for round_ in range(1, args.rounds + 1):
            order = list(trees) if round_ % 2 else list(reversed(trees))
            for case, case_args in CASES.items():
                for side in order:
                    times[side][case].append(wall(trees[side], case_args))
            print(f"round {round_}/{args.rounds}; load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    finally:
        for tree in trees.values():
            tree.remove()
    print(f"start-up wall time, {args.rounds} alternating rounds (medians, seconds):")
    print(f"  base: {trees['base'].label}\n  head: {trees['head'].label}")
    width = max(map(len, CASES))
    print(f"  {'case':{width}}  {'base':>7}  {'head':>7}  {'head/base':>9}")
    for case in CASES:
        base, head = (statistics.median(times[side][case]) for side in ("base", "head"))
        print(f"  {case:{width}}  {base:7.3f}  {head:7.3f}  {head / base:9.2f}")


if __name__ == "__main__":
    main()
