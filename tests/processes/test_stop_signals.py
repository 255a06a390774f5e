"""``StopSignals``: a stop signal ends the main thread's wait, wherever the signal lands, and the
handler takes no lock (a handler that set a ``threading.Event`` once hung a SIGTERM'd worker whose
main thread held that event's lock when the signal came)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from schedule_sdk.entrypoints import stopping
from schedule_sdk.entrypoints.stopping import StopSignals
from tests.support.waiting import HANG


def test_a_signal_to_this_process_ends_the_wait_and_the_handlers_are_restored_after():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stop:
        assert not stop.wait(0.01) and not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait()
        assert stop.received is signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_that_arrives_during_the_wait_ends_it_at_once():
    with StopSignals() as stop:
        main = threading.main_thread().ident
        assert main is not None
        timer = threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGINT))
        timer.start()
        assert stop.wait(HANG)  # ended by the signal: a timeout would return False
        timer.join()
    assert stop.received is signal.SIGINT


def test_a_signal_the_kernel_hands_to_another_thread_ends_the_wait_within_a_slice():
    with StopSignals() as stop:
        other = threading.Thread(target=lambda: signal.pthread_kill(threading.get_ident(), signal.SIGTERM))
        other.start()
        assert stop.wait(HANG)  # ended by the signal: a timeout would return False
        other.join()


def test_an_unanswered_wait_returns_false_after_its_timeout():
    with StopSignals() as stop:
        started = time.monotonic()
        assert not stop.wait(0.2)
        assert time.monotonic() - started >= 0.2  # never before its timeout


@pytest.mark.timeout(120)
def test_a_process_hammering_its_wait_stops_on_every_sigterm():
    """A child whose main thread does nothing but wait, in very short slices, so a signal lands
    inside the wait's own code most of the time: every SIGTERM of 40 ends it."""
    child = "\n".join(
        [  # the module alone, without the package's imports: a child starts in milliseconds
            "import importlib.util, sys",
            f"spec = importlib.util.spec_from_file_location('stopping', {stopping.__file__!r})",
            "module = importlib.util.module_from_spec(spec)",
            "spec.loader.exec_module(module)",
            "with module.StopSignals() as stop:",
            "    print('ready', flush=True)",
            "    while not stop.wait(0.0001):",
            "        pass",
        ]
    )
    for trial in range(40):
        proc = subprocess.Popen(
            [sys.executable, "-c", child],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(trial % 7 * 0.003)  # lands at different points of the loop
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(10) == 0, trial
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
