#!/usr/bin/env bash
# THE test command (README set-up step 2; .ci/run calls exactly it): make sure the services the
# suite needs run (scripts/ensure-services.sh installs and starts what is missing), create .venv if
# missing, install the package with its dev extra, then lint, check formatting, type-check and run
# pytest, stopping at the first failure. Extra arguments go to pytest, e.g.
# `bash scripts/test.sh -k store -x`. Works with no stdin and with CI=true.
#
# SDK_TEST_WORKERS: pytest-xdist workers (default 5); SDK_TEST_JUNIT: also write a JUnit report there;
# SDK_TEST_PYTEST_ONLY=1: only the pytest step (scripts/flaky.sh's rounds; .venv must exist).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

step() { printf '\n==> %s\n' "$*"; }

run_pytest() {
    # Five workers on two cores: most tests wait on servers, timers and child processes, not on the
    # CPU. Tests are handed out a few at a time in their collected order (tests/conftest.py puts the
    # long process tests first), so no worker is left with a long one at the end; a module marked
    # xdist_group goes to one worker whole (its module fixtures start once). Each worker is a
    # test run of its own (databases, Redis db, stream names); `-n 0` runs one process.
    local workers="${SDK_TEST_WORKERS:-5}" junit=()
    if [ -n "${SDK_TEST_JUNIT:-}" ]; then
        junit=(--junitxml="$SDK_TEST_JUNIT")
    fi
    step "tests: pytest -n $workers --dist loadgroup ${junit[*]} $*"
    local status=0
    .venv/bin/python -m pytest -n "$workers" --dist loadgroup "${junit[@]}" "$@" </dev/null ||
        status=$?
    if [ "$status" -eq 5 ]; then
        echo "ERROR: pytest collected no tests (exit 5); a run that tests nothing fails." >&2
    fi
    return "$status"
}

if [ "${SDK_TEST_PYTEST_ONLY:-}" = 1 ]; then
    status=0
    run_pytest "$@" || status=$?
    exit "$status"
fi

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

status=0
run_pytest "$@" || status=$?
exit "$status"
