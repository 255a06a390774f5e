#!/usr/bin/env bash
# THE test command (README set-up step 2; .ci/run calls exactly it): make sure the services the
# suite needs run (scripts/ensure-services.sh installs and starts what is missing), create .venv if
# missing, install the package with its dev extra, then lint, check formatting, type-check and run
# pytest, stopping at the first failure. Extra arguments go to pytest, e.g.
# `bash scripts/test.sh -k store -x`. Works with no stdin and with CI=true.
#
# SDK_TEST_WORKERS: pytest-xdist workers (default 3); SDK_TEST_JUNIT: also write a JUnit report there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

step() { printf '\n==> %s\n' "$*"; }

step "services: scripts/ensure-services.sh"
bash scripts/ensure-services.sh

step "venv: .venv"
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys' 2>/dev/null; then
    python3 -m venv .venv
    echo "created .venv ($(.venv/bin/python --version))"
else
    echo "using .venv ($(.venv/bin/python --version))"
fi

step "install: pip install -e '.[dev]'"
.venv/bin/pip install -q -e '.[dev]' </dev/null

step "lint: ruff check schedule_sdk tests examples bench"
.venv/bin/ruff check schedule_sdk tests examples bench

step "format: ruff format --check schedule_sdk tests"
.venv/bin/ruff format --check schedule_sdk tests

step "types: mypy"
.venv/bin/mypy

# Three workers on two cores: most tests wait on servers, timers and child processes, not on the CPU.
# Each worker is a test run of its own (databases, Redis db, stream names); `-n 0` runs one process.
workers="${SDK_TEST_WORKERS:-3}"
junit=()
if [ -n "${SDK_TEST_JUNIT:-}" ]; then
    junit=(--junitxml="$SDK_TEST_JUNIT")
fi
step "tests: pytest -n $workers ${junit[*]} $*"
status=0
.venv/bin/python -m pytest -n "$workers" "${junit[@]}" "$@" </dev/null || status=$?
if [ "$status" -eq 5 ]; then
    echo "ERROR: pytest collected no tests (exit 5); a run that tests nothing fails." >&2
fi
exit "$status"
