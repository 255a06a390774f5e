"""A test-side JetStream client: publishes ScheduleTimer commands and collects DueTimeReached
envelopes (with their headers) and dead letters, on the project's own NatsLoop."""

from __future__ import annotations

import threading
from typing import Any

from schedule_sdk.adapters.brokers.nats import NatsLoop
from schedule_sdk.timer import Envelope, ScheduleTimer


class Probe:
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.nats = NatsLoop(names["broker_url"], name="timer-test-probe").connect()
        self.envelopes: list[Envelope] = []
        self.headers: list[dict[str, str]] = []
        self.dead: list[tuple[bytes, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._subs: list[Any] = []

    def ensure_streams(self) -> None:
        n = self.names
        self.nats.ensure_stream(n["command_stream"], [n["command_subject"]])
        self.nats.ensure_stream(n["event_stream"], [n["event_subject"]])

    def listen(self) -> Probe:
        """Consume every DueTimeReached (ordered ephemeral consumer from the stream's start)."""
        self.ensure_streams()

        async def on_event(msg: Any) -> None:
            with self._lock:
                self.envelopes.append(Envelope.from_json(msg.data))
                self.headers.append(dict(msg.headers or {}))

        async def on_dead(msg: Any) -> None:
            with self._lock:
                self.dead.append((msg.data, dict(msg.headers or {})))

        n = self.names
        self._subs.append(
            self.nats.run(
                self.nats.js.subscribe(n["event_subject"], stream=n["event_stream"], cb=on_event), 10
            )
        )
        self._subs.append(self.nats.run(self.nats.nc.subscribe(n["dead_letter_subject"], cb=on_dead), 10))
        return self

    def send(self, command: ScheduleTimer | bytes) -> None:
        data = command if isinstance(command, bytes) else command.to_json()
        self.nats.run(self.nats.js.publish(self.names["command_subject"], data), 10)

    def send_many(self, commands: list[ScheduleTimer | bytes]) -> None:
        """Publish all of ``commands`` in one burst (the consumer sees them in one fetch, or few)."""

        async def publish_all() -> None:
            bodies = [c if isinstance(c, bytes) else c.to_json() for c in commands]
            futures = [await self.nats.js.publish_async(self.names["command_subject"], b) for b in bodies]
            for future in futures:
                await future

        self.nats.run(publish_all(), 120)

    def keys(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(e.tenant_id, e.payload.service_call_id) for e in self.envelopes]

    def close(self) -> None:
        self.nats.close()


def read_all(names: dict[str, str], timeout: float = 10.0) -> list[tuple[Envelope, dict[str, str]]]:
    """Every DueTimeReached in the event stream, read by a fresh consumer (survives NATS restarts)."""
    client = NatsLoop(names["broker_url"], name="timer-test-reader").connect()

    async def fetch_all() -> list[tuple[Envelope, dict[str, str]]]:
        info = await client.js.stream_info(names["event_stream"])
        wanted = info.state.messages
        sub = await client.js.pull_subscribe(names["event_subject"], stream=names["event_stream"])
        found: list[tuple[Envelope, dict[str, str]]] = []
        while len(found) < wanted:
            for msg in await sub.fetch(min(500, wanted - len(found)), timeout=timeout):
                found.append((Envelope.from_json(msg.data), dict(msg.headers or {})))
                await msg.ack()
        await sub.unsubscribe()
        return found

    try:
        return client.run(fetch_all(), timeout * 3)
    finally:
        client.close()
