"""The timer's port contracts (schedule_sdk/testing/contracts/) on every adapter of the SDK: the
timer store on SQLite, PostgreSQL and the test kit's in-memory fake; the message bus and the
command source in-process and on NATS JetStream."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from schedule_sdk.adapters.brokers.inprocess import InProcessBus, InProcessCommandSource
from schedule_sdk.adapters.brokers.nats import JetStreamBus, JetStreamCommandSource, NatsLoop
from schedule_sdk.adapters.memory import MemoryJobStore
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.adapters.sql.timers import SQLAlchemyTimerStore
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import CommandSource, JobStore, MessageBus, TimerStore
from schedule_sdk.testing import MemoryTimerStore
from schedule_sdk.testing.contracts.brokers import CommandSourceContract, MessageBusContract
from schedule_sdk.testing.contracts.timer_store import TimerStoreContract
from schedule_sdk.timer import Envelope
from tests.support.timer_fixtures import store_engine
from tests.support.timer_probe import Probe

# -- the timer store -----------------------------------------------------------------------------


class TestMemoryTimerStore(TimerStoreContract):
    def open_stores(self) -> tuple[JobStore, TimerStore]:
        jobs = MemoryJobStore()
        return jobs, MemoryTimerStore(jobs)


class TestSQLTimerStore(TimerStoreContract):
    """SQLite and PostgreSQL (``timer_db``), migrated as the timer migrates them."""

    @pytest.fixture(autouse=True)
    def _database(self, timer_db: str) -> None:
        self.db_path = timer_db

    def open_stores(self) -> tuple[JobStore, TimerStore]:
        engine = store_engine(self.db_path)
        schema.upgrade(engine)
        return SQLAlchemyJobStore(engine), SQLAlchemyTimerStore(engine)


# -- the message bus -----------------------------------------------------------------------------


class TestInProcessBus(MessageBusContract):
    def open_bus(self) -> MessageBus:
        bus = InProcessBus()
        self.received: list[Envelope] = []
        bus.subscribe(self.received.append)
        return bus

    def published(self, count: int, timeout: float) -> list[Envelope]:
        return self.received[:count]


class _JetStream:
    """This test's own streams and subjects, and the adapters' NATS connection."""

    @pytest.fixture(autouse=True)
    def _names(self, nats_names: dict[str, str]) -> Iterator[None]:
        self.names = nats_names
        self.probe = Probe(nats_names)
        self.probe.ensure_streams()
        self.loop = NatsLoop(nats_names["broker_url"], name="timer-contract").connect()
        yield
        self.probe.close()
        with contextlib.suppress(ScheduleError):
            self.loop.close()


class TestJetStreamBus(_JetStream, MessageBusContract):
    def open_bus(self) -> MessageBus:
        self.probe.listen()
        n = self.names
        return JetStreamBus(self.loop, stream=n["event_stream"], subject=n["event_subject"])

    def published(self, count: int, timeout: float) -> list[Envelope]:
        from schedule_sdk.testing.contracts.brokers import wait_for

        wait_for(lambda: len(self.probe.envelopes) >= count, timeout)
        return self.probe.envelopes[:count]


# -- the command source --------------------------------------------------------------------------


class TestInProcessCommandSource(CommandSourceContract):
    def open_source(self) -> CommandSource:
        self.direct = InProcessCommandSource()
        return self.direct

    def send(self, raw: bytes) -> None:
        with contextlib.suppress(ScheduleError):  # a refusal is the caller's answer
            self.direct.send(raw)


class TestJetStreamCommandSource(_JetStream, CommandSourceContract):
    def open_source(self) -> CommandSource:
        n = self.names
        return JetStreamCommandSource(
            self.loop,
            stream=n["command_stream"],
            subject=n["command_subject"],
            durable=n["consumer"],
            batch=16,
        )

    def send(self, raw: bytes) -> None:
        self.probe.send(raw)
