"""NATS JetStream adapters (``pip install 'schedule-sdk[nats]'``).

nats-py is asyncio-only, so :class:`NatsLoop` runs one event loop in a daemon thread and the
synchronous timer code submits coroutines to it. The client reconnects forever; while it is
disconnected a publish fails at once (the fire is retried by the core) and the consumer waits.

- :class:`JetStreamBus` publishes each envelope to the event subject with ``Nats-Msg-Id`` = the
  envelope id (JetStream drops a re-sent copy within the stream's duplicate window).
- :class:`JetStreamCommandSource` pulls ScheduleTimer commands through a durable consumer with
  explicit acks: a batch is persisted in one transaction, then each message is acked. A malformed
  or refused command is terminated (never redelivered), logged, counted, and copied to the
  dead-letter subject if one is configured. A store failure naks the batch for redelivery.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import nats
from nats.js.api import AckPolicy, ConsumerConfig, StorageType
from nats.js.errors import NotFoundError

from schedule_sdk.domain.backoff import Reconnect
from schedule_sdk.domain.errors import (
    BrokerUnavailable,
    InvalidTimerCommand,
    ScheduleError,
    ScheduleValidationError,
)
from schedule_sdk.domain.timers import Envelope, ScheduleTimer
from schedule_sdk.ports import CommandSink, CommandSource, MessageBus

logger = logging.getLogger(__name__)
T = TypeVar("T")


class NatsLoop:
    """A NATS connection on its own asyncio loop thread."""

    def __init__(self, url: str, *, name: str = "schedule-sdk-timer", connect_timeout: float = 5.0) -> None:
        self.url = url
        self._name = name
        self._connect_timeout = connect_timeout
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="schedule-sdk-nats", daemon=True)
        self._thread.start()
        self.nc: Any = None
        self.js: Any = None
        self._closing = False

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return self.submit(coro).result(timeout)

    @property
    def connected(self) -> bool:
        return self.nc is not None and bool(self.nc.is_connected)

    def connect(self) -> NatsLoop:
        """Connect (raises :class:`BrokerUnavailable` if the server cannot be reached)."""
        try:
            self.nc = self.run(self._connect(), self._connect_timeout * 3)
        except Exception as error:
            raise BrokerUnavailable(f"cannot connect to NATS at {self.url}: {error!r}") from error
        self.js = self.nc.jetstream()
        return self

    async def _connect(self) -> Any:
        async def disconnected() -> None:
            if not self._closing:
                logger.warning("disconnected from NATS %s; reconnecting", self.url)

        async def reconnected() -> None:
            logger.warning("reconnected to NATS %s", self.url)

        async def error(e: Exception) -> None:
            logger.debug("NATS client error: %r", e)

        return await nats.connect(
            self.url,
            name=self._name,
            connect_timeout=self._connect_timeout,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
            error_cb=error,
        )

    def ensure_stream(self, name: str, subjects: Sequence[str]) -> None:
        """Create stream ``name`` on ``subjects`` (file storage) unless it exists."""
        self.run(self._ensure_stream(name, list(subjects)), self._connect_timeout * 2)

    async def _ensure_stream(self, name: str, subjects: list[str]) -> None:
        try:
            await self.js.stream_info(name)
        except NotFoundError:
            await self.js.add_stream(name=name, subjects=subjects, storage=StorageType.FILE)

    def close(self) -> None:
        self._closing = True
        if self.nc is not None:
            try:
                self.run(self.nc.close(), 5)
            except Exception as error:  # closing a broken connection: nothing left to do
                logger.debug("closing NATS: %r", error)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


class JetStreamBus(MessageBus):
    def __init__(self, nats_loop: NatsLoop, *, stream: str, subject: str, timeout: float = 5.0) -> None:
        self._nats = nats_loop
        self._stream = stream
        self.subject = subject
        self._timeout = timeout

    def publish(self, envelope: Envelope) -> None:
        if not self._nats.connected:
            raise BrokerUnavailable(f"not connected to NATS at {self._nats.url}")
        publish = self._nats.js.publish(
            self.subject,
            envelope.to_json(),
            timeout=self._timeout,
            stream=self._stream,
            headers={"Nats-Msg-Id": envelope.id},
        )
        try:
            self._nats.run(publish, self._timeout + 1)
        except Exception as error:
            raise BrokerUnavailable(f"JetStream did not accept {envelope.id}: {error!r}") from error


class JetStreamCommandSource(CommandSource):
    def __init__(
        self,
        nats_loop: NatsLoop,
        *,
        stream: str,
        subject: str,
        durable: str,
        batch: int = 256,
        dead_letter_subject: str = "",
        ack_wait: float = 30.0,
    ) -> None:
        self._nats = nats_loop
        self._stream = stream
        self._subject = subject
        self._durable = durable
        self._batch = batch
        self._dead_letter = dead_letter_subject
        self._ack_wait = ack_wait
        self._stopping = threading.Event()
        self._task: Future[None] | None = None

    def start(self, sink: CommandSink) -> None:
        config = ConsumerConfig(
            durable_name=self._durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=self._ack_wait, max_deliver=-1
        )
        subscribe = self._nats.js.pull_subscribe(
            self._subject, durable=self._durable, stream=self._stream, config=config
        )
        try:
            subscription = self._nats.run(subscribe, 10)
        except Exception as error:
            raise BrokerUnavailable(f"cannot consume {self._stream}/{self._durable}: {error!r}") from error
        self._stopping.clear()
        self._task = self._nats.submit(self._consume(subscription, sink))

    def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            try:
                self._task.result(timeout=10)
            except Exception as error:
                logger.warning("command consumer stopped with %r", error)
            self._task = None

    async def _consume(self, subscription: Any, sink: CommandSink) -> None:
        backoff = Reconnect()
        while not self._stopping.is_set():
            try:
                messages = await subscription.fetch(self._batch, timeout=0.5)
            except (TimeoutError, nats.errors.TimeoutError):
                continue  # nothing to do
            except Exception as error:  # disconnected, server restarting: wait and go on
                delay = backoff.next()
                logger.warning("fetching ScheduleTimer commands failed (%r); retrying in %.2fs", error, delay)
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            try:
                await self._process(messages, sink)
            except Exception:  # never let the consumer die; unacked messages are redelivered
                logger.exception("processing %d ScheduleTimer commands failed", len(messages))

    async def _process(self, messages: list[Any], sink: CommandSink) -> None:
        commands: list[ScheduleTimer] = []
        accepted: list[Any] = []
        for message in messages:
            try:
                commands.append(ScheduleTimer.from_json(message.data))
                accepted.append(message)
            except InvalidTimerCommand as error:
                sink.malformed(error, message.data)
                await self._refuse(message, error)
        if not commands:
            return
        try:
            results = await asyncio.get_running_loop().run_in_executor(None, sink.handle_each, commands)
        except ScheduleError as error:
            logger.warning(
                "persisting %d ScheduleTimer commands failed (%s); redelivering", len(commands), error
            )
            for message in accepted:
                await message.nak(delay=1.0)
            return
        for message, result in zip(accepted, results, strict=True):
            if isinstance(result, ScheduleValidationError):
                await self._refuse(message, result)
            else:
                await message.ack()

    async def _refuse(self, message: Any, error: ScheduleValidationError) -> None:
        if self._dead_letter:
            headers = {
                "Timer-Error-Code": error.code,
                "Timer-Error": " ".join(str(error).split())[:500],
                "Timer-Source-Subject": str(message.subject),
            }
            await self._nats.nc.publish(self._dead_letter, message.data, headers=headers)
        await message.term()
