"""The SQLite WAL checkpointer's schedule: after ``every`` commits, and once writes go quiet."""

from __future__ import annotations

import threading
import time

from schedule_sdk.adapters.sql.checkpoints import Checkpointer


def test_a_checkpoint_runs_after_every_commits_and_not_before() -> None:
    ran = threading.Event()
    calls: list[int] = []

    def checkpoint() -> None:
        calls.append(1)
        ran.set()

    checkpointer = Checkpointer(checkpoint, every=3, idle=3600)  # quiet never comes in this test
    try:
        checkpointer.committed()
        checkpointer.committed()
        assert not ran.wait(0.05) and calls == []
        checkpointer.committed()
        assert ran.wait(5), "no checkpoint after `every` commits"
        assert calls == [1]
    finally:
        checkpointer.close()


def test_a_quiet_spell_checkpoints_what_was_committed_then_nothing_more() -> None:
    ran = threading.Event()
    calls: list[int] = []

    def checkpoint() -> None:
        calls.append(1)
        ran.set()

    checkpointer = Checkpointer(checkpoint, every=1000, idle=0.01)
    try:
        checkpointer.committed()
        assert ran.wait(5), "no checkpoint once writes went quiet"
        ran.clear()
        assert not ran.wait(0.1)  # nothing committed since: no more checkpoints
        assert calls == [1]
    finally:
        checkpointer.close()


def test_a_failed_checkpoint_is_tried_again_and_a_closed_checkpointer_starts_nothing() -> None:
    attempts: list[int] = []
    done = threading.Event()

    def checkpoint() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("disk busy")
        done.set()

    checkpointer = Checkpointer(checkpoint, every=1000, idle=0.01)
    checkpointer.committed()
    assert done.wait(5), "a failed checkpoint was not tried again"
    checkpointer.close()
    closed = Checkpointer(checkpoint, every=1, idle=0.01)
    closed.close()
    closed.committed()
    assert closed._thread is None


def test_the_thread_ends_once_quiet_and_the_next_commit_starts_another() -> None:
    done: list[threading.Event] = [threading.Event(), threading.Event()]
    calls: list[int] = []

    threads: list[threading.Thread] = []

    def checkpoint() -> None:
        threads.append(threading.current_thread())
        calls.append(1)
        done[len(calls) - 1].set()

    checkpointer = Checkpointer(checkpoint, every=1000, idle=0.01)
    try:
        checkpointer.committed()
        assert done[0].wait(5)
        threads[0].join(5)  # the thread ends once quiet: a store never closed leaves none
        assert not threads[0].is_alive() and checkpointer._thread is None
        checkpointer.committed()
        assert done[1].wait(5), "a commit after the thread ended was never checkpointed"
    finally:
        checkpointer.close()


def test_light_commits_alone_start_no_thread_until_the_linger_passes() -> None:
    ran = threading.Event()
    calls: list[int] = []

    def checkpoint() -> None:
        calls.append(1)
        ran.set()

    checkpointer = Checkpointer(checkpoint, every=1000, idle=0.01, linger=0.5)
    try:
        started = time.monotonic()
        checkpointer.committed(light=True)
        checkpointer.committed(light=True)
        assert checkpointer._thread is None, "a heartbeat's commit started a thread"
        assert not ran.wait(0.6), "a heartbeat's commit was checkpointed without a commit past the linger"
        checkpointer.committed(light=True)  # the first is now older than the linger
        assert ran.wait(5), "light commits past the linger were never checkpointed"
        assert time.monotonic() - started >= 0.5 and calls == [1]
    finally:
        checkpointer.close()


def test_a_full_commit_among_light_ones_is_checkpointed_after_a_quiet_spell() -> None:
    ran = threading.Event()

    checkpointer = Checkpointer(ran.set, every=1000, idle=0.01, linger=3600)
    try:
        checkpointer.committed(light=True)
        assert not ran.wait(0.1)  # light: due in an hour
        checkpointer.committed()
        assert ran.wait(5), "a full commit did not end the light commits' linger"
    finally:
        checkpointer.close()


def test_every_light_commits_are_checkpointed_at_once() -> None:
    ran = threading.Event()

    checkpointer = Checkpointer(ran.set, every=3, idle=0.01, linger=3600)
    try:
        checkpointer.committed(light=True)
        checkpointer.committed(light=True)
        assert not ran.wait(0.1)
        checkpointer.committed(light=True)
        assert ran.wait(5), "`every` light commits were not checkpointed"
    finally:
        checkpointer.close()


def _checkpointer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "schedule-sdk-sqlite-checkpoint" and t.is_alive()]


def test_rest_ends_the_thread_at_once_and_the_next_commit_starts_another() -> None:
    """A stopping worker's store rests its checkpointer: no thread is left, and checkpoints go on
    with the next commit."""
    ran = threading.Event()
    before = set(_checkpointer_threads())
    checkpointer = Checkpointer(ran.set, every=1000, idle=3600, park=3600)  # never ends by itself
    try:
        checkpointer.committed()
        assert set(_checkpointer_threads()) - before
        checkpointer.rest()
        assert not set(_checkpointer_threads()) - before
        checkpointer.committed()
        checkpointer.committed()
        assert len(set(_checkpointer_threads()) - before) == 1
        checkpointer.every = 1
        checkpointer.committed()
        assert ran.wait(5), "no checkpoint after the rest"
    finally:
        checkpointer.close()
