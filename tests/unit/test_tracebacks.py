"""The traceback a failed attempt's history entry keeps: each listener's, the tail within the cap."""

from __future__ import annotations

from schedule_sdk.core.firing import traceback_of
from schedule_sdk.domain.errors import ListenerFailed, UnheardFire
from schedule_sdk.domain.history import MAX_TRACEBACK_BYTES, capped_traceback


def _raised(error: Exception) -> Exception:
    try:
        raise error
    except Exception as caught:
        return caught


def test_a_short_traceback_is_kept_whole() -> None:
    assert capped_traceback("Traceback\nValueError: x\n") == "Traceback\nValueError: x\n"


def test_a_long_one_keeps_its_tail_in_whole_lines_within_the_cap_and_says_what_was_cut() -> None:
    lines = [f"  frame {n} é" for n in range(2000)]
    text = "\n".join(lines) + "\nValueError: the end\n"
    kept = capped_traceback(text)
    assert len(kept.encode()) <= MAX_TRACEBACK_BYTES
    assert kept.endswith("\nValueError: the end\n")
    head, first, *_ = kept.splitlines()
    assert head.startswith("[... ") and head.endswith(" bytes cut ...]")
    assert first in lines  # starts at a whole line
    cut = int(head.split()[1])
    assert cut == len(text.encode()) - len(kept.encode()) + len(head) + 1


def test_each_listeners_error_is_in_the_traceback_of_a_listener_failure() -> None:
    def first_listener() -> None:
        raise KeyError("a")

    def second_listener() -> None:
        raise ValueError("b")

    errors = []
    for listener in (first_listener, second_listener):
        try:
            listener()
        except Exception as error:
            errors.append(error)
    text = traceback_of(ListenerFailed(errors))
    assert text is not None
    assert text.index("in first_listener") < text.index("KeyError: 'a'") < text.index("in second_listener")
    assert text.rstrip().endswith("ValueError: b")


def test_an_error_that_was_never_raised_has_no_traceback() -> None:
    assert traceback_of(UnheardFire("t")) is None
    assert traceback_of(ListenerFailed([])) is None
    assert traceback_of(_raised(RuntimeError("x"))) is not None  # a publisher's own error
