"""Two commits (or the working tree and a commit) side by side on bench/independent.py's harness,
alternating, several runs each. Prints each run, the medians and the ratios (head / base).

Run:  flock /tmp/cpu.lock .venv/bin/python bench/compare.py --base main [--head WORKTREE]
          [--workload W2] [--system pg] [--runs 3] [--workers 1]

``--base`` and ``--head`` name a commit (anything ``git rev-parse`` takes) or ``WORKTREE`` (this
checkout as it is, uncommitted changes included; the default head). Each commit is checked out with
``git worktree add --detach`` in a temporary directory (removed at the end) and its producer and
worker processes import that tree's ``schedule_sdk`` (``PYTHONPATH``), with this checkout's
virtualenv and harness. Runs alternate base, head, base, head... so both see the same machine.

A regression shows as a ratio: ``fires/s`` below 1, ``p99`` above 1. Run it before a change to a hot
path lands, e.g. ``--base main --workload W2 --system pg`` and ``--workload W3 --system sqlite``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from independent import ROOT, SYSTEMS, WORKLOADS, Harness, Result  # bench/ is on sys.path

WORKTREE = "WORKTREE"


class Tree:
    """A checkout of ``rev`` (or this one, for ``WORKTREE``)."""

    def __init__(self, rev: str) -> None:
        self.rev = rev
        if rev == WORKTREE:
            self.path, self.label, self.temporary = ROOT, "working tree", False
            return
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        self.path = Path(tempfile.mkdtemp(prefix="sdk-compare-")) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(self.path), commit],
            check=True, capture_output=True,
        )  # fmt: skip
        self.label, self.temporary = f"{rev} ({commit[:10]})", True

    def remove(self) -> None:
        if self.temporary:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(self.path)], check=False
            )
            shutil.rmtree(self.path.parent, ignore_errors=True)


def medians(results: list[Result]) -> dict[str, float]:
    return {
        "fires/s": statistics.median(r.drain for r in results),
        "p50 ms": statistics.median(r.p(50) for r in results),
        "p99 ms": statistics.median(r.p(99) for r in results),
        "max ms": statistics.median(max(r.late, default=0) for r in results),
        "RSS MB": statistics.median(r.rss_mb for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True)
    parser.add_argument("--head", default=WORKTREE)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="W2")
    parser.add_argument("--system", choices=[s for s in SYSTEMS if s not in ("aps", "celery")], default="pg")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    trees = {"base": Tree(args.base), "head": Tree(args.head)}
    results: dict[str, list[Result]] = {"base": [], "head": []}
    harness = Harness(ROOT, args.workers)
    try:
        for run in range(1, args.runs + 1):
            for side, tree in trees.items():
                harness.tree = tree.path
                result = harness.run(args.system, args.workload)
                results[side].append(result)
                print(f"run {run} {side:4} {result.line()}; load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        harness.close()
        for tree in trees.values():
            tree.remove()
    base, head = medians(results["base"]), medians(results["head"])
    print(
        f"{args.workload} on {args.system}, {args.workers} worker(s), {args.runs} alternating runs (medians):"
    )
    print(f"  base: {trees['base'].label}\n  head: {trees['head'].label}")
    for name in base:
        ratio = head[name] / base[name] if base[name] else float("nan")
        print(f"  {name:8} base {base[name]:>10,.1f}   head {head[name]:>10,.1f}   head/base {ratio:5.2f}")
    lost = {side: sum(r.lost for r in values) for side, values in results.items()}
    early = {side: sum(r.early for r in values) for side, values in results.items()}
    print(f"  lost base {lost['base']} head {lost['head']}; early base {early['base']} head {early['head']}")


if __name__ == "__main__":
    main()
