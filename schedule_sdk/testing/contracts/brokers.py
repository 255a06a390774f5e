"""The timer's broker contracts: :class:`~schedule_sdk.ports.MessageBus` (where
DueTimeReached envelopes go) and :class:`~schedule_sdk.ports.CommandSource` (where
ScheduleTimer commands come from), as tests any broker adapter must pass.

::

    from schedule_sdk.testing.contracts.brokers import CommandSourceContract, MessageBusContract

    class TestMyBus(MessageBusContract):
        def open_bus(self):
            return MyBus(...)
        def published(self, count, timeout):
            return [...]           # the first ``count`` envelopes a subscriber received, in order

    class TestMySource(CommandSourceContract):
        def open_source(self):
            return MySource(...)   # started by the suite with a recording sink
        def send(self, raw):
            ...                    # deliver one raw message (bytes) to the source, as a producer would

Needs pytest only; no fixtures. Each test closes what it opened (``close`` hooks).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from schedule_sdk.domain.errors import InvalidTimerCommand, ScheduleValidationError
from schedule_sdk.domain.timers import Envelope, ScheduleTimer, TimerEntry, TimerOutcome
from schedule_sdk.ports import CommandSource, MessageBus

T0 = datetime(2030, 3, 30, 12, 0, 0, 250_000, tzinfo=UTC)


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; return the last answer."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def envelope(tenant: str = "t1", call: str = "sc1", seconds: float = 0.0) -> Envelope:
    due = TimerEntry(
        tenant_id=tenant,
        service_call_id=call,
        correlation_id=f"corr-{call}",
        due_at=T0,
        registered_at=T0 - timedelta(minutes=1),
    )
    return Envelope.due_time_reached(due, T0 + timedelta(seconds=seconds))


class MessageBusContract:
    _bus: MessageBus | None = None

    @property
    def bus(self) -> MessageBus:
        if self._bus is None:
            self._bus = self.open_bus()
        return self._bus

    def open_bus(self) -> MessageBus:
        raise NotImplementedError("a contract subclass returns its bus from open_bus()")

    def published(self, count: int, timeout: float) -> list[Envelope]:
        """The first ``count`` envelopes a subscriber of the bus received (fewer after ``timeout``)."""
        raise NotImplementedError("a contract subclass reads what was published")

    def setup_method(self, method: object) -> None:
        self._bus = None

    def teardown_method(self, method: object) -> None:
        if self._bus is not None:
            self._bus.close()
        self._bus = None

    def test_published_envelopes_reach_a_subscriber_whole_and_in_order(self) -> None:
        sent = [envelope(call=f"sc{n}", seconds=n) for n in range(3)]
        for e in sent:
            self.bus.publish(e)  # returns once accepted
        assert self.published(3, timeout=10.0) == sent

    def test_each_publish_is_its_own_message(self) -> None:
        first, again = envelope(), envelope()  # one timer published twice (a retried fire)
        assert first.id != again.id
        self.bus.publish(first)
        self.bus.publish(again)
        assert [e.id for e in self.published(2, timeout=10.0)] == [first.id, again.id]


class RecordingSink:
    """A :class:`~schedule_sdk.ports.CommandSink` that records what it is handed; it
    refuses commands whose serviceCallId starts with ``refuse`` (as validation would)."""

    def __init__(self) -> None:
        self.handled: list[ScheduleTimer] = []
        self.malformed_messages: list[bytes | str] = []
        self.lock = threading.Lock()

    def handle_each(self, commands: Sequence[ScheduleTimer]) -> Sequence[object]:
        results: list[object] = []
        with self.lock:
            for command in commands:
                self.handled.append(command)
                if command.service_call_id.startswith("refuse"):
                    results.append(InvalidTimerCommand("refused by the sink"))
                else:
                    results.append(TimerOutcome.CREATED)
        return results

    def malformed(self, error: ScheduleValidationError, raw: bytes | str) -> None:
        with self.lock:
            self.malformed_messages.append(raw)


def command(call: str = "sc1") -> ScheduleTimer:
    return ScheduleTimer(tenant_id="t1", service_call_id=call, due_at=T0)


class CommandSourceContract:
    sink: RecordingSink
    _source: CommandSource | None = None

    def open_source(self) -> CommandSource:
        raise NotImplementedError("a contract subclass returns its source from open_source()")

    def send(self, raw: bytes) -> None:
        """Deliver one message to the source, as a producer would (errors a direct call reports
        to its caller are the caller's, not the source's: swallow them)."""
        raise NotImplementedError("a contract subclass delivers messages to its source")

    def close_source(self) -> None:
        """Release what ``open_source`` opened (after the source is stopped)."""

    @property
    def source(self) -> CommandSource:
        if self._source is None:
            self._source = self.open_source()
            self._source.start(self.sink)
        return self._source

    def setup_method(self, method: object) -> None:
        self.sink = RecordingSink()
        self._source = None

    def teardown_method(self, method: object) -> None:
        if self._source is not None:
            self._source.stop()
            self.close_source()
        self._source = None

    def handled(self) -> list[str]:
        with self.sink.lock:
            return [c.service_call_id for c in self.sink.handled]

    def test_a_valid_command_reaches_the_sink_once(self) -> None:
        assert self.source is not None
        self.send(command("sc1").to_json())
        self.send(command("sc2").to_json())
        assert wait_for(lambda: sorted(self.handled()) == ["sc1", "sc2"])
        time.sleep(0.5)  # an acknowledged command is not handed over again
        assert sorted(self.handled()) == ["sc1", "sc2"]

    def test_a_malformed_message_goes_to_malformed_never_to_handle_each(self) -> None:
        assert self.source is not None
        self.send(b'{"tenantId": "t1", "dueAt": "not a time"}')
        self.send(command("after").to_json())
        assert wait_for(lambda: self.handled() == ["after"] and len(self.sink.malformed_messages) == 1)
        time.sleep(0.5)  # refused for good: never redelivered
        assert len(self.sink.malformed_messages) == 1 and self.handled() == ["after"]

    def test_a_command_the_sink_refuses_is_not_handed_over_again(self) -> None:
        assert self.source is not None
        self.send(command("refuse-1").to_json())
        assert wait_for(lambda: self.handled() == ["refuse-1"])
        time.sleep(0.5)
        assert self.handled() == ["refuse-1"]
