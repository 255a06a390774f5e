"""The tables bench/soak.py prints at the end of a run."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _stats import percentile


def _p50_max(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{percentile(values, 50):.2f}/{max(values):.2f}"


def _firsts(verdicts: list[Any]) -> list[float]:
    return [v.first_fire_s for v in verdicts if v.first_fire_s is not None]


def _cleared(verdicts: list[Any]) -> list[float]:
    return [v.cleared_s for v in verdicts if v.cleared_s is not None]


def _duplicates(by_cause: dict[str, int]) -> str:
    if not by_cause:
        return "0"
    return f"{sum(by_cause.values())} (" + ", ".join(f"{k} {n}" for k, n in sorted(by_cause.items())) + ")"


def _row(cells: Sequence[object], widths: list[int]) -> str:
    return "  ".join(
        str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )


HEAD = ["backend", "trials", "acknowledged", "lost", "cancelled fired", "early", "duplicates",
        "first fire p50/max s", "recovery p50/max s", "store early", "cancel not kept"]  # fmt: skip


def backend_rows(trials: list[Any]) -> list[list[object]]:
    by: dict[str, list[Any]] = defaultdict(list)
    for t in trials:
        by[t.backend].append(t)
    rows: list[list[object]] = []
    for backend, group in by.items():
        v = [t.verdict for t in group]
        dups: dict[str, int] = defaultdict(int)
        for one in v:
            for cause, n in one.duplicates.items():
                dups[cause] += n
        rows.append([
            backend, len(group), sum(x.acknowledged for x in v), sum(len(x.lost) for x in v),
            sum(len(x.cancelled_fired) for x in v), sum(len(x.early) for x in v),
            _duplicates(dups), _p50_max(_firsts(v)), _p50_max(_cleared(v)),
            sum(t.store_early for t in group), sum(t.cancel_not_kept for t in group),
        ])  # fmt: skip
    return rows


def print_report(trials: list[Any], folder: Path) -> None:
    if not trials:
        print("no trials ran")
        return
    rows = backend_rows(trials)
    table: list[Sequence[object]] = [HEAD, *rows]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(HEAD))]
    print("\n" + _row(HEAD, widths))
    for row in rows:
        print(_row(row, widths))
    print(
        "\nrecovery by fault, p50/max s from the fault to: its service back (a new worker started, the"
        " server answering), the first fire after it, the backlog cleared:"
    )
    by_fault: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for t in trials:
        by_fault[(t.backend, t.fault)].append(t.verdict)
    for (backend, fault), v in sorted(by_fault.items()):
        back = [x.back_s for x in v if x.back_s is not None]
        print(f"  {backend:14s} {fault:10s} n={len(v):3d}  back {_p50_max(back):>11s}"
              f"  first {_p50_max(_firsts(v)):>11s}  cleared {_p50_max(_cleared(v)):>11s}")  # fmt: skip
    _print_phases(trials)
    _print_cancels(trials)
    _print_details(trials)
    print(f"\nlogs: {folder}")


STEPS = {
    "spawn": "kill -> new process spawned",
    "imports": "-> its imports done",
    "ready": "-> its worker started",
    "fire": "-> its first fire",
}


def _print_phases(trials: list[Any]) -> None:
    phases: dict[str, list[float]] = defaultdict(list)
    for t in trials:
        for name, seconds in t.verdict.phases_s.items():
            phases[name].append(seconds)
    if phases:
        print("\nafter a kill, each step from the one before (median / max s): "
              + ", ".join(f"{STEPS[n]} {statistics.median(v):.2f}/{max(v):.2f}"
                          for n, v in phases.items()))  # fmt: skip


def _print_cancels(trials: list[Any]) -> None:
    racing = [ms for t in trials for ms in t.verdict.cancels_before_due_ms if ms <= 10.0]
    fired = [(t.backend, ms) for t in trials for _, _, ms in t.verdict.cancelled_fired]
    print(f"\ncancels that returned 0-10 ms before a due instant: {len(racing)}; of their occurrences fired: "
          f"{sum(ms <= 10.0 for _, ms in fired)}; fired after a cancel that returned > 10 ms before due: "
          f"{sum(ms > 10.0 for _, ms in fired)}")  # fmt: skip
    if fired:
        print(
            "  cancelled fired (backend: ms before due the cancel returned): "
            + ", ".join(f"{b}: {ms:.2f}" for b, ms in sorted(fired))
        )


def _print_details(trials: list[Any]) -> None:
    for t in trials:
        v = t.verdict
        if v.lost:
            print(f"  LOST {t.backend} {t.fault}: {v.lost[:5]}{' ...' if len(v.lost) > 5 else ''}")
        for job, due, clock, early_us in v.early[:5]:
            print(
                f"  EARLY {t.backend} {t.fault}: {job} due {due} by the {clock}'s clock, {early_us} us early"
            )
        if v.duplicates.get("unexplained"):
            print(f"  UNEXPLAINED DUPLICATES {t.backend} {t.fault}: {v.duplicates['unexplained']}")
        if v.stray:
            print(f"  STRAY {t.backend} {t.fault}: {v.stray} fires of occurrences no schedule named")
