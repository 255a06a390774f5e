"""The crash soak's checker (bench/soak_verdict.py) judges synthetic logs as the contract says:
lost, cancelled-before-due fired (with how many ms before due the cancel returned), early by the
event's fields and by the listener's clock, duplicates by what lies between the two fires, and
recovery from the fault."""

from __future__ import annotations

import math
from pathlib import Path

from bench.soak_verdict import judge, parse, pending, read_log

S = 1_000_000  # one second in the log's microseconds
T0 = 1_800_000_000 * S


def fire(job: str, due: int, seen: int, *, fired_at: int | None = None, occurrence: int = 1) -> str:
    return f"F {job} {occurrence} {due} {fired_at if fired_at is not None else seen} {seen} 4242"


def test_a_log_where_everything_fired_on_time_passes() -> None:
    log = parse([
        f"S a one {T0 + S}",
        f"S b interval {T0 + S},{T0 + 2 * S},{T0 + 3 * S}",
        fire("a", T0 + S, T0 + S + 500),
        *(fire("b", T0 + k * S, T0 + k * S + 300, occurrence=k) for k in (1, 2, 3)),
    ])  # fmt: skip
    verdict = judge(log, horizon=T0 + 10 * S)
    assert verdict.acknowledged == 4
    assert not verdict.failed
    assert (verdict.lost, verdict.cancelled_fired, verdict.early, verdict.duplicates) == ([], [], [], {})


def test_an_acknowledged_occurrence_that_never_fired_is_lost_unless_due_after_the_horizon() -> None:
    log = parse([f"S b interval {T0 + S},{T0 + 2 * S},{T0 + 30 * S}", fire("b", T0 + S, T0 + S + 10)])
    verdict = judge(log, horizon=T0 + 10 * S)
    assert verdict.acknowledged == 2
    assert verdict.lost == [("b", T0 + 2 * S)]
    assert verdict.failed
    assert pending(log, T0 + 10 * S) == 1


def test_a_fire_after_a_cancel_that_returned_before_due_is_counted_with_its_margin() -> None:
    due = T0 + S
    log = parse([
        f"S raced one {due}", f"X raced {due - 5_000}", f"C raced {due - 2_440}",
        fire("raced", due, due + 590),
        # a cancel that returned after the due instant may lose the race: not counted
        f"S late one {due}", f"X late {due - 1_000}", f"C late {due + 1_000}", fire("late", due, due + 300),
        # a cancel whose outcome is unknown (no C line): neither expected nor forbidden
        f"S torn one {due}", f"X torn {due - 50_000}",
    ])  # fmt: skip
    verdict = judge(log, horizon=T0 + 10 * S)
    assert verdict.cancelled_fired == [("raced", due, 2.44)]
    assert verdict.lost == []
    assert verdict.acknowledged == 0
    assert verdict.failed


def test_an_early_fire_is_caught_by_the_event_s_fields_and_by_the_listener_s_clock() -> None:
    due = T0 + S
    log = parse([
        f"S e one {due}", fire("e", due, seen=due + 1_200, fired_at=due - 240),
        f"S l one {due}", fire("l", due, seen=due - 100, fired_at=due),
    ])  # fmt: skip
    verdict = judge(log, horizon=T0 + 10 * S)
    assert sorted(verdict.early) == [("e", due, "event", 240), ("l", due, "listener", 100)]
    assert verdict.failed


def test_a_duplicate_is_explained_only_by_a_fault_between_the_two_fires() -> None:
    due = T0 + S
    killed = [f"S k one {due}", fire("k", due, due + 100), f"K {due + 200} kill", fire("k", due, due + 900)]
    unexplained = [f"S u one {due}", fire("u", due, due + 100), fire("u", due, due + 150)]
    assert judge(parse(killed), T0 + 10 * S).duplicates == {"kill": 1}
    assert not judge(parse(killed), T0 + 10 * S).failed
    verdict = judge(parse(killed + unexplained), T0 + 10 * S)
    assert verdict.duplicates == {"kill": 1, "unexplained": 1}
    assert verdict.failed
    # a fire during a restart (its outcome not recorded) repeated after it: the restart explains it
    restart = [
        f"S r one {due}", f"K {due - 100} pg-restart", fire("r", due, due + 50),
        f"Q {due + 3 * S} pg-restart", fire("r", due, due + 5 * S),
    ]  # fmt: skip
    assert judge(parse(restart), T0 + 10 * S).duplicates == {"pg-restart": 1}


def test_recovery_after_a_kill_runs_to_the_last_fire_of_what_was_due_before_the_new_worker_started() -> None:
    kill = T0 + 2 * S
    log = parse([
        f"S a one {T0 + S}", fire("a", T0 + S, T0 + S + 100),
        f"S b one {kill + 100_000}", f"S c one {kill + 300_000}", f"S d one {kill + 5 * S}",
        f"K {kill} kill", f"R {kill + 10_000}", f"I {kill + 400_000} 7", f"B {kill + 500_000} 7",
        fire("b", kill + 100_000, kill + 520_000), fire("c", kill + 300_000, kill + 700_000),
        fire("d", kill + 5 * S, kill + 5 * S + 100),
    ])  # fmt: skip
    verdict = judge(log, horizon=T0 + 10 * S)
    assert verdict.first_fire_s == 0.52
    assert verdict.back_s == 0.5
    assert verdict.cleared_s == 0.7
    assert verdict.phases_s == {"spawn": 0.01, "imports": 0.39, "ready": 0.1, "fire": 0.02}


def test_recovery_after_a_flush_runs_to_the_last_fire_more_than_a_second_late_or_never_ends() -> None:
    flush = T0 + 2 * S
    log_lines = [
        f"S a one {flush + S}", f"S b one {flush + 2 * S}", f"K {flush} flush",
        fire("a", flush + S, flush + S + 1_000), fire("b", flush + 2 * S, flush + 6 * S),
    ]  # fmt: skip
    log = parse(log_lines)
    verdict = judge(log, horizon=T0 + 10 * S)
    assert verdict.first_fire_s == 1.001
    assert verdict.cleared_s == 6.0
    never = judge(parse([*log_lines[:3], fire("a", flush + S, flush + S + 1_000)]), T0 + 10 * S)
    assert never.lost == [("b", flush + 2 * S)]
    assert never.cleared_s == math.inf


def test_with_a_live_peer_a_kill_s_backlog_is_what_the_dead_worker_held() -> None:
    kill = T0 + 2 * S
    lines = [
        "A 2", f"S held one {kill - 5_000}", f"S next one {kill + 100_000}",
        f"K {kill} kill", fire("next", kill + 100_000, kill + 100_200),
        fire("held", kill - 5_000, kill + 900_000), f"R {kill + 1_000}", f"B {kill + 2 * S} 8",
    ]  # fmt: skip
    verdict = judge(parse(lines), T0 + 10 * S)
    assert verdict.back_s == 0.0
    assert verdict.first_fire_s == 0.1002
    assert verdict.cleared_s == 0.9


def test_a_line_torn_by_a_kill_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "trial.log"
    path.write_text(f"S a one {T0 + S}\n{fire('a', T0 + S, T0 + S + 5)}\nF a 1 18")
    log = read_log(path)
    assert len(log.fires) == 1
    assert not judge(log, T0 + 10 * S).failed
