"""The :class:`~schedule_sdk.ports.DelayIndex` contract, as tests any delay index must pass.

::

    from schedule_sdk.testing.contracts.delay_index import DelayIndexContract

    class TestMyIndex(DelayIndexContract):
        def open_index(self):
            return MyDelayIndex(...)    # a fresh, empty index (its own names), once per test

Override ``close_index`` to release what ``open_index`` opened (and delete what it left). The
tests run on the real clock (due instants in epoch ms around now) and wait a few hundred ms at
most (an interrupted pop: until it returns). Needs pytest only; no fixtures.
"""

from __future__ import annotations

import threading
import time
import uuid

from schedule_sdk.domain.ids import new_id
from schedule_sdk.ports import DelayIndex, ReleasedBatch, WakeUps

#: Seconds an interrupted pop may take to return (its own timeout is far longer): only a hang fails.
INTERRUPT_DEADLINE = 10.0


def entry_key() -> str:
    """A new occurrence key (``<job id>_<occurrence>_<attempt>``)."""
    return f"{new_id()}_1_1"


def now_ms() -> float:
    return time.time() * 1000.0


def token(worker_id: str) -> str:
    """A releaser token of ``worker_id``: ``<worker id>/<32 hex digits>``."""
    return f"{worker_id}/{uuid.uuid4().hex}"


def woken(wakeups: WakeUps, within: float) -> bool:
    """Whether a wake-up comes within ``within`` seconds (``wait`` may return early without one)."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        if wakeups.wait(left):
            return True
    return False


class DelayIndexContract:
    _index: DelayIndex | None = None

    @property
    def index(self) -> DelayIndex:
        """The current test's index, opened by :meth:`open_index` on first use."""
        if self._index is None:
            self._index = self.open_index()
        return self._index

    def open_index(self) -> DelayIndex:
        raise NotImplementedError("a contract subclass returns its index from open_index()")

    def close_index(self) -> None:
        """Release the index (after each test that opened one)."""

    def setup_method(self, method: object) -> None:
        self._index = None

    def teardown_method(self, method: object) -> None:
        if self._index is not None:
            self.close_index()
        self._index = None

    def pop_all(self, expected: int, timeout: float = 1.0) -> list[ReleasedBatch]:
        """Pop released batches until ``expected`` entries came (or ``timeout`` passed)."""
        batches: list[ReleasedBatch] = []
        deadline = time.monotonic() + timeout
        while sum(len(b.members) for b in batches) < expected and time.monotonic() < deadline:
            batches += self.index.pop_released(100, 0.1)
        return batches

    # -- delayed and released entries ------------------------------------------------------------

    def test_an_empty_index_has_no_plan_and_releases_nothing(self) -> None:
        assert isinstance(self.index.queue_name, str) and self.index.queue_name
        assert self.index.plan() is None
        assert self.index.release(now_ms() + 3_600_000, 10) == ([], None)
        assert self.index.pop_released(10, 0.1) == []

    def test_plan_is_the_earliest_due_instant(self) -> None:
        now = now_ms()
        self.index.activate([(entry_key(), now + 60_000), (entry_key(), now + 30_000.5)])
        assert self.index.plan() == now + 30_000.5

    def test_release_takes_due_entries_earliest_first_never_one_due_later(self) -> None:
        now = now_ms()
        a, b, c, later = entry_key(), entry_key(), entry_key(), entry_key()
        self.index.activate([(c, now - 10), (a, now - 30), (b, now - 20), (later, now + 60_000)])
        released, left = self.index.release(now, 2)
        assert released == [a, b]
        assert left == now - 10
        released, left = self.index.release(now, 10)
        assert released == [c] and left == now + 60_000
        assert self.index.release(now, 10) == ([], now + 60_000)  # released once only

    def test_released_entries_are_popped_once_with_their_members(self) -> None:
        now = now_ms()
        keys = [entry_key() for _ in range(3)]
        self.index.activate([(k, now - 5) for k in keys])
        assert sorted(self.index.release(now, 10)[0]) == sorted(keys)
        batches = self.pop_all(3)
        assert sorted(m for b in batches for m in b.members) == sorted(keys)
        assert all(b.due_ms is None or b.due_ms <= now for b in batches)
        assert self.index.pop_released(10, 0.1) == []

    def test_entries_released_ahead_of_their_due_instant_carry_it(self) -> None:
        due = now_ms() + 200.0
        key = entry_key()
        self.index.activate([(key, due)])
        assert self.index.release(due, 10)[0] == [key]
        [batch] = self.pop_all(1)
        assert batch.members == [key] and batch.due_ms == due

    def test_activating_an_entry_again_moves_it(self) -> None:
        now = now_ms()
        key = entry_key()
        self.index.activate([(key, now + 60_000)])
        self.index.activate([(key, now - 1)])
        assert self.index.release(now, 10) == ([key], None)

    def test_restore_puts_released_entries_back_due_now(self) -> None:
        now = now_ms()
        key = entry_key()
        self.index.activate([(key, now - 1)])
        assert self.index.release(now, 10)[0] == [key]
        self.pop_all(1)
        self.index.restore([key])
        assert self.index.release(now_ms() + 1, 10)[0] == [key]
        self.pop_all(1)

    def test_forget_removes_every_trace_and_never_raises(self) -> None:
        now = now_ms()
        kept, gone = entry_key(), entry_key()
        self.index.activate([(kept, now + 60_000), (gone, now - 1)])
        self.index.forget([gone, entry_key()])
        self.index.forget([])
        assert self.index.release(now, 10) == ([], now + 60_000)

    def test_done_and_touch_accept_released_entries(self) -> None:
        now = now_ms()
        key = entry_key()
        self.index.activate([(key, now - 1)])
        self.index.release(now, 10)
        self.index.touch([key])
        [batch] = self.pop_all(1)
        self.index.done(batch.members)
        self.index.done([])
        self.index.touch([])
        assert self.index.pop_released(10, 0.1, done=[key]) == []

    # -- the releaser lease ------------------------------------------------------------------------

    def test_an_interrupt_ends_the_consumers_waiting_pop_or_its_next_one(self) -> None:
        """A pop waiting far longer than the test's deadline returns ``[]`` once its consumer is
        interrupted (from another thread, as a stop does); an interrupt that came first ends the
        consumer's next pop."""
        popped: list[list[ReleasedBatch]] = []
        waiting = threading.Thread(
            target=lambda: popped.append(self.index.pop_released(10, 30.0, consumer="a")), daemon=True
        )
        waiting.start()
        self.index.interrupt("a")  # in the wait, or just before it: either way it ends that pop
        waiting.join(INTERRUPT_DEADLINE)
        assert popped == [[]]
        self.index.interrupt("b")
        started = time.monotonic()
        assert self.index.pop_released(10, 30.0, consumer="b") == []
        assert time.monotonic() - started < INTERRUPT_DEADLINE

    def test_one_token_holds_the_lease_and_renews_it(self) -> None:
        first, second = token("w-1"), token("w-2")
        assert self.index.lead(first, 5.0)
        assert not self.index.lead(second, 5.0)
        assert self.index.lead(first, 5.0)  # renewed
        self.index.resign(second)  # not the holder: nothing happens
        assert not self.index.lead(second, 5.0)
        self.index.resign(first)
        assert self.index.lead(second, 5.0)
        self.index.resign(second)

    def test_an_unrenewed_lease_ends_after_its_ttl(self) -> None:
        assert self.index.lead(token("w-1"), 0.1)
        time.sleep(0.25)
        other = token("w-2")
        assert self.index.lead(other, 5.0)
        self.index.resign(other)

    def test_depose_deletes_the_lease_of_a_named_worker_only(self) -> None:
        holder = token("w-1")
        assert self.index.lead(holder, 5.0)
        assert not self.index.depose([])
        assert not self.index.depose(["w", "w-12", "1"])  # no prefix or suffix match
        assert not self.index.lead(token("w-2"), 5.0)
        assert self.index.depose(["w-0", "w-1"])
        assert not self.index.depose(["w-1"])  # nothing left to delete
        other = token("w-2")
        assert self.index.lead(other, 5.0)
        self.index.resign(other)

    # -- wake-ups ----------------------------------------------------------------------------------

    def test_an_entry_earlier_than_the_plan_wakes_the_releaser(self) -> None:
        now = now_ms()
        self.index.activate([(entry_key(), now + 60_000)])
        wakeups = self.index.wakeups()
        try:
            assert self.index.plan() == now + 60_000
            assert not woken(wakeups, 0.2)
            self.index.activate([(entry_key(), now + 120_000)])  # later than the plan: no wake-up
            assert not woken(wakeups, 0.2)
            self.index.activate([(entry_key(), now + 30_000)])
            assert woken(wakeups, 1.0)
        finally:
            wakeups.close()

    def test_a_nudge_wakes_the_releaser(self) -> None:
        wakeups = self.index.wakeups()
        try:
            self.index.nudge()
            assert woken(wakeups, 1.0)
        finally:
            wakeups.close()
        wakeups.close()  # twice is harmless
