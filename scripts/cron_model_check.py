"""Compare schedule_sdk's cron with an independent model of Debian cron's minute loop.

    .venv/bin/python scripts/cron_model_check.py [--cases 50000] [--seed 1] [--jobs 2]

Random (expression, zone, start) cases within two days of real UTC-offset changes in the zones of
tests/unit/cron_cases.py (and a synthetic zone with changes at the daemon's thresholds); prints
the number of cases and of disagreements (each described), and exits 1 if there is any. The
normal test suite runs a quick slice of the same comparison (tests/unit/test_cron_model.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.cron_cases import ZONES, check, transitions


def _chunk(args: tuple[int, int]) -> tuple[int, list[str]]:
    count, seed = args
    return check(count, seed)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = parser.parse_args()
    started = time.monotonic()
    count = sum(len(transitions(name)) for name in ZONES)
    say(f"zones: {len(ZONES)}, transitions: {count}, cases: {args.cases}, seed: {args.seed}")
    chunks = 100
    size, extra = divmod(args.cases, chunks)
    work = [(size + (i < extra), args.seed * 1_000 + i) for i in range(chunks)]
    cases, found = 0, []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for done, problems in pool.map(_chunk, work):
            cases += done
            found.extend(problems)
    for problem in found[:50]:
        say(problem)
    say(f"cases: {cases}, disagreements: {len(found)} ({time.monotonic() - started:.0f} s)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
