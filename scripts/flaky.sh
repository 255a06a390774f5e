#!/usr/bin/env bash
# The flake finder: runs the test suite, or the part of it that the pytest arguments name, N times
# with CPU hogs beside it, then prints each test that failed with its failure count.
#
#   bash scripts/flaky.sh [--hogs K] [--fresh] N [pytest arguments...]
#
#   N         how many rounds
#   --hogs K  busy-looping processes beside each round (default 2, one per core of a project machine)
#   --fresh   each round is `CI=true bash .ci/run` in a fresh clone of HEAD, exactly as CI runs it
#             (install, services, ruff, mypy and the whole suite); pytest arguments are not allowed
#
# Without --fresh a round is pytest in this checkout, as scripts/test.sh runs it (run that once
# first: it makes .venv). Examples:
#   bash scripts/flaky.sh 5 tests/processes/test_rq_crash_points.py
#   bash scripts/flaky.sh 20 -k "slot_frees" tests/integration/behaviour/test_concurrency.py
#   bash scripts/flaky.sh --fresh 3
#
# Each round's JUnit report and log stay in the folder printed at the start. Exits 0 only when every
# round passed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

HOGS=2
FRESH=0
while [ $# -gt 0 ]; do
    case "$1" in
        --hogs) HOGS="$2"; shift 2 ;;
        --fresh) FRESH=1; shift ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ] || ! [[ "$1" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: bash scripts/flaky.sh [--hogs K] [--fresh] N [pytest arguments...]" >&2
    exit 2
fi
ROUNDS="$1"
shift
if [ "$FRESH" -eq 1 ] && [ $# -gt 0 ]; then
    echo "flaky.sh: --fresh runs the whole suite as CI does; it takes no pytest arguments" >&2
    exit 2
fi
if [ "$FRESH" -eq 0 ] && [ ! -x .venv/bin/python ]; then
    echo "flaky.sh: no .venv here; run 'bash scripts/test.sh' once first" >&2
    exit 2
fi

OUT="$(mktemp -d "${TMPDIR:-/tmp}/flaky.XXXXXX")"
HOG_PIDS=()
stop_hogs() {
    if [ "${#HOG_PIDS[@]}" -gt 0 ]; then
        kill "${HOG_PIDS[@]}" 2>/dev/null || true
        wait "${HOG_PIDS[@]}" 2>/dev/null || true
    fi
    HOG_PIDS=()
}
trap stop_hogs EXIT

echo "flaky.sh: $ROUNDS round(s), $HOGS CPU hog(s) beside each; reports in $OUT"
failed_rounds=0
for round in $(seq 1 "$ROUNDS"); do
    for _ in $(seq 1 "$HOGS"); do
        python3 -c 'while True: pass' &
        HOG_PIDS+=("$!")
    done
    junit="$OUT/round-$round.xml"
    log="$OUT/round-$round.log"
    started=$SECONDS
    status=0
    if [ "$FRESH" -eq 1 ]; then
        clone="$OUT/clone-$round"
        git clone -q . "$clone"
        # the clone's own test command, with a JUnit report where this script reads it
        (cd "$clone" && CI=true SDK_TEST_JUNIT="$junit" bash .ci/run </dev/null) >"$log" 2>&1 || status=$?
        rm -rf "$clone"
    else
        SDK_TEST_PYTEST_ONLY=1 SDK_TEST_JUNIT="$junit" bash scripts/test.sh -p no:cacheprovider "$@" \
            </dev/null >"$log" 2>&1 || status=$?
    fi
    stop_hogs
    summary="$(grep -E '^(=+ )?[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$log" | tail -n 1 || true)"
    printf 'round %d: exit %d in %d s: %s\n' "$round" "$status" "$((SECONDS - started))" "${summary:-no summary}"
    if [ "$status" -ne 0 ]; then
        failed_rounds=$((failed_rounds + 1))
    fi
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import collections
import pathlib
import sys
import xml.etree.ElementTree as ET

out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
failures: collections.Counter[str] = collections.Counter()
ran = 0
for report in sorted(out.glob("round-*.xml")):
    for case in ET.parse(report).getroot().iter("testcase"):
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failures[f"{case.get('classname')}::{case.get('name')}"] += 1
reports = len(list(out.glob("round-*.xml")))
print(f"\n{ran} test results in {reports} report(s) of {rounds} round(s)")
if reports < rounds:
    print(f"{rounds - reports} round(s) wrote no report (see their logs)")
if not failures:
    print("failures per test: none")
for name, count in failures.most_common():
    print(f"{count}/{rounds} {name}")
PY

exit $((failed_rounds > 0))
