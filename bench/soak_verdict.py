"""The checker of bench/soak.py: reads one trial's append-only log and judges it. Pure functions,
no I/O beyond :func:`read_log` (tests/unit/test_soak_verdict.py feeds it synthetic logs).

The log is written by the soak's app processes (bench/soak_app.py: ``S``, ``X``, ``C``, ``F``,
``I``, ``B``, ``E`` lines) and by the soak itself (``K``, ``R``, ``Q`` lines), one ``write`` per
line, fsynced. Every time is an integer of microseconds since the epoch, read from this host's
clock (the store's clock too: the stores of a soak run on this host).

- ``S <job> <kind> <due,due,...>``: ``schedule_*`` returned; the job's due instants (its
  ``scheduled_for`` and, for a repeat, the ones after it up to its ``limit``);
- ``X <job> <t>``: ``cancel`` was called; ``C <job> <t>``: it returned at ``t``;
- ``F <job> <occurrence> <scheduled_for> <fired_at> <listener clock> <pid>``: a listener ran;
- ``I <t> <pid>`` / ``B <t> <pid>``: an app process finished its imports / its worker started;
- ``E <t> <what>``: a call failed (the job was not acknowledged, or the cancel is uncertain);
- ``K <t> <fault>``: the soak applied a fault (``kill``, ``pg-restart``, ``flush``, ``failover``);
- ``R <t>``: the soak spawned a new app process; ``Q <t> <fault>``: the fault's service is back;
  ``H <t>``: the trial's horizon (occurrences due by then must have fired); ``A <n>``: the trial
  runs ``n`` app processes side by side (a kill leaves ``n - 1`` live workers).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

#: A fire more than this late (microseconds) counts as part of a fault's backlog.
LATE_US = 1_000_000


@dataclass
class Fire:
    job: str
    occurrence: int
    due: int
    fired_at: int
    seen: int
    pid: int


@dataclass
class Log:
    #: job -> (kind, due instants)
    scheduled: dict[str, tuple[str, list[int]]] = field(default_factory=dict)
    cancel_called: dict[str, int] = field(default_factory=dict)
    cancel_returned: dict[str, int] = field(default_factory=dict)
    fires: list[Fire] = field(default_factory=list)
    #: (time, fault) in log order
    faults: list[tuple[int, str]] = field(default_factory=list)
    back: list[tuple[int, str]] = field(default_factory=list)
    spawned: list[int] = field(default_factory=list)
    imported: list[int] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)
    errors: int = 0
    #: the trial's horizon (``H`` line), if it was written
    horizon: int | None = None
    #: app processes the trial ran side by side (``A`` line; default 1)
    apps: int = 1


#: The lines that carry one time: kind -> the list of the log they go to.
_TIMES = {"R": "spawned", "I": "imported", "B": "ready"}


def _line(log: Log, kind: str, rest: list[str]) -> None:
    if kind == "S" and len(rest) == 3:
        log.scheduled[rest[0]] = (rest[1], [int(v) for v in rest[2].split(",") if v])
    elif kind in ("X", "C"):
        (log.cancel_called if kind == "X" else log.cancel_returned).setdefault(rest[0], int(rest[1]))
    elif kind == "F" and len(rest) == 6:
        job, occurrence, due, fired_at, seen, pid = rest
        log.fires.append(Fire(job, int(occurrence), int(due), int(fired_at), int(seen), int(pid)))
    elif kind in ("K", "Q"):
        (log.faults if kind == "K" else log.back).append((int(rest[0]), rest[1]))
    elif kind in _TIMES:
        getattr(log, _TIMES[kind]).append(int(rest[0]))
    elif kind == "E":
        log.errors += 1
    elif kind == "H":
        log.horizon = int(rest[0])
    elif kind == "A":
        log.apps = int(rest[0])


def parse(lines: list[str]) -> Log:
    log = Log()
    for line in lines:
        parts = line.split()
        if parts:
            _line(log, parts[0], parts[1:])
    return log


def read_log(path: Path) -> Log:
    """The parsed log; a torn last line (a process killed mid-write) is skipped."""
    text = path.read_text() if path.exists() else ""
    lines = text.splitlines()
    if text and not text.endswith("\n"):
        lines = lines[:-1]
    return parse(lines)


@dataclass
class Verdict:
    acknowledged: int = 0
    lost: list[tuple[str, int]] = field(default_factory=list)
    #: (job, due, how many ms before due the cancel returned)
    cancelled_fired: list[tuple[str, int, float]] = field(default_factory=list)
    #: (job, due, "event" | "listener", microseconds early)
    early: list[tuple[str, int, str, int]] = field(default_factory=list)
    #: extra fires of one occurrence, by what lies between the first fire and the extra one
    duplicates: dict[str, int] = field(default_factory=dict)
    #: fires of an occurrence no ``S`` line names (a job acknowledged with other due instants)
    stray: int = 0
    #: cancels that returned before the due instant they raced, and how many ms before
    cancels_before_due_ms: list[float] = field(default_factory=list)
    #: seconds from the first fault to the first fire after it / to its backlog cleared (see _recovery)
    first_fire_s: float | None = None
    cleared_s: float | None = None
    #: seconds from the first fault to its service back (see _back)
    back_s: float | None = None
    #: the steps of the recovery from the last kill: the new process spawned, its imports done,
    #: its worker started, its first fire (seconds each, from the step before)
    phases_s: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.cancelled_fired or self.early or self.duplicates.get("unexplained"))


def _expected(log: Log, horizon: int) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """The occurrences that must fire (due by ``horizon``, job not cancelled) and those that must
    not (due after a cancel of their job returned)."""
    must: set[tuple[str, int]] = set()
    must_not: set[tuple[str, int]] = set()
    for job, (_, dues) in log.scheduled.items():
        called = log.cancel_called.get(job)
        returned = log.cancel_returned.get(job)
        for due in dues:
            if returned is not None and due > returned:
                must_not.add((job, due))
            elif called is None and due <= horizon:
                must.add((job, due))
    return must, must_not


def _fault_windows(log: Log) -> list[tuple[int, int, str]]:
    """Each fault from its ``K`` line to its service back (its ``Q`` line; a kill or a flush:
    the instant itself)."""
    windows = []
    for at, fault in log.faults:
        end = min((t for t, name in log.back if name == fault and t >= at), default=at)
        windows.append((at, end, fault))
    return windows


def _duplicate_cause(log: Log, first: int, extra: int) -> str:
    """What lies between an occurrence's first fire and a repeat of it (a fault whose window
    overlaps the two): a kill, another fault, or nothing (``unexplained``)."""
    between = [fault for start, end, fault in _fault_windows(log) if start <= extra and first <= end]
    if "kill" in between:
        return "kill"
    return between[0] if between else "unexplained"


def _back(log: Log) -> int:
    """When the fault's service was back: the last new app's worker started (a kill of the only
    app), the server answered again (``Q``), else the fault's own instant (a flush; a kill with
    a live peer)."""
    start = log.faults[0][0]
    if any(fault == "kill" for _, fault in log.faults) and log.apps == 1:
        last_kill = max(at for at, fault in log.faults if fault == "kill")
        return next((t for t in log.ready if t >= last_kill), start)
    return max((t for t, _ in log.back if t >= start), default=start)


def _recovery(log: Log, first_fires: dict[tuple[str, int], Fire], verdict: Verdict) -> None:
    """From the (first) fault: to the first fire after it, and to the backlog cleared: the last
    first fire, after the fault, of an occurrence due before the service was back, or of one
    more than :data:`LATE_US` late (whichever is later); never (infinity) if one was lost."""
    if not log.faults:
        return
    start, back = log.faults[0][0], _back(log)
    verdict.back_s = (back - start) / 1e6
    after = sorted(f.seen for f in log.fires if f.seen >= start)
    if after:
        verdict.first_fire_s = (after[0] - start) / 1e6
    backlog = [
        f.seen
        for f in first_fires.values()
        if f.seen >= start and (f.due <= back or f.seen - f.due > LATE_US)
    ]
    verdict.cleared_s = (max(backlog) - start) / 1e6 if backlog else 0.0
    if verdict.lost:
        verdict.cleared_s = math.inf
    kills = [at for at, fault in log.faults if fault == "kill"]
    if kills:
        _kill_phases(log, kills[-1], after, verdict)


def _kill_phases(log: Log, start: int, after: list[int], verdict: Verdict) -> None:
    spawned = next((t for t in log.spawned if t >= start), None)
    imported = next((t for t in log.imported if spawned is not None and t >= spawned), None)
    ready = next((t for t in log.ready if imported is not None and t >= imported), None)
    first = next((t for t in after if ready is not None and t >= ready), None)
    points = [("kill", start), ("spawn", spawned), ("imports", imported), ("ready", ready), ("fire", first)]
    for (_, a), (name, b) in zip(points, points[1:], strict=False):
        if a is None or b is None:
            break
        verdict.phases_s[name] = (b - a) / 1e6


def judge(log: Log, horizon: int) -> Verdict:
    """The verdict on a trial whose occurrences due by ``horizon`` (microseconds) must have fired."""
    verdict = Verdict()
    must, must_not = _expected(log, horizon)
    verdict.acknowledged = len(must)
    known = {(job, due) for job, (_, dues) in log.scheduled.items() for due in dues}
    by_occurrence: dict[tuple[str, int], list[Fire]] = defaultdict(list)
    for fire in log.fires:
        by_occurrence[(fire.job, fire.due)].append(fire)
        if fire.job in log.scheduled and (fire.job, fire.due) not in known:
            verdict.stray += 1
        if fire.fired_at < fire.due:
            verdict.early.append((fire.job, fire.due, "event", fire.due - fire.fired_at))
        elif fire.seen < fire.due:
            verdict.early.append((fire.job, fire.due, "listener", fire.due - fire.seen))
    verdict.lost = sorted(must - set(by_occurrence))
    for job, due in sorted(must_not & set(by_occurrence)):
        verdict.cancelled_fired.append((job, due, (due - log.cancel_returned[job]) / 1e3))
    for job, returned in log.cancel_returned.items():
        upcoming = [due for due in log.scheduled.get(job, ("", []))[1] if due > returned]
        if upcoming:
            verdict.cancels_before_due_ms.append((min(upcoming) - returned) / 1e3)
    first_fires: dict[tuple[str, int], Fire] = {}
    for key, fires in by_occurrence.items():
        fires.sort(key=lambda f: f.seen)
        first_fires[key] = fires[0]
        for extra in fires[1:]:
            cause = _duplicate_cause(log, fires[0].seen, extra.seen)
            verdict.duplicates[cause] = verdict.duplicates.get(cause, 0) + 1
    _recovery(log, {k: v for k, v in first_fires.items() if k in must}, verdict)
    return verdict


def pending(log: Log, horizon: int) -> int:
    """How many occurrences that must fire by ``horizon`` have not fired yet (the soak's wait)."""
    must, _ = _expected(log, horizon)
    return len(must - {(f.job, f.due) for f in log.fires})
