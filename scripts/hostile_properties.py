"""The property suite of hostile input, run long: many more generated examples than CI's budget,
new ones each run.

    python scripts/hostile_properties.py [--examples N] [--same] [pytest args...]

Runs tests/integration/hostile (the public API on every backend, sync and async; the dashboard's
read-only pages; the JetStream intake) with ``SCHEDULE_HOSTILE_EXAMPLES=N`` (default 1000; the
JetStream property takes a fifth as many, each waits on a broker round trip) and, unless
``--same``, ``SCHEDULE_HOSTILE_SEED=random``. Needs the services the suite needs (PostgreSQL,
Redis, NATS). A failure prints the smallest failing input Hypothesis found.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000, help="examples per property (default 1000)")
    parser.add_argument("--same", action="store_true", help="CI's derandomized examples, not new ones")
    options, pytest_args = parser.parse_known_args()
    env = {**os.environ, "SCHEDULE_HOSTILE_EXAMPLES": str(options.examples)}
    if not options.same:
        env["SCHEDULE_HOSTILE_SEED"] = "random"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--timeout=0"]
    command += ["tests/integration/hostile", *pytest_args]
    print("running:", " ".join(command), f"(SCHEDULE_HOSTILE_EXAMPLES={options.examples})")
    return subprocess.call(command, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
