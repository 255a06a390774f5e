"""NATS JetStream adapters (``pip install 'schedule-sdk[nats]'``).

nats-py is asyncio-only, so :class:`NatsLoop` runs one event loop in a daemon thread and the
synchronous timer code submits coroutines to it. The client reconnects forever; while it is
disconnected a publish fails at once (the fire is retried by the core) and the consumer waits.

- :class:`JetStreamBus` publishes each envelope to the event subject with ``Nats-Msg-Id`` = the
  envelope id (JetStream drops a re-sent copy within the stream's duplicate window).
- :class:`JetStreamCommandSource` pulls ScheduleTimer commands through a durable consumer with
  explicit acks: a batch is persisted in one transaction, then each message is acked. A malformed
  or refused command is terminated (never redelivered), logged, counted, and copied to the
  dead-letter subject if one is configured; so is any command whose decoding raises anything at
  all, and, when persisting a batch fails for another reason than the store being unavailable,
  the one command that fails when the batch is retried one by one. A store failure naks the
  batch for redelivery with a growing delay, up to ``max_deliver`` deliveries: then the command
  is dead-lettered and terminated, so nothing is redelivered forever. The cap is the source's
  own (it reads each message's delivery count); the consumer's ``max_deliver`` on the server is
  kept :data:`SPARE_DELIVERIES` above it, as a backstop only, because a server can count a
  delivery the client never received (seen with nats-server 2.9 after a delayed nak: a message
  comes back in place of another). Were the two caps equal, a message whose last delivery went
  astray that way would be dropped by the server with no dead-letter copy; with the spare ones
  it comes back after ``ack_wait`` and is stored, or dead-lettered, as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import CancelledError, Future
from typing import Any, TypeVar

import nats
from nats.js.api import AckPolicy, ConsumerConfig, StorageType
from nats.js.errors import NotFoundError

from schedule_sdk.domain.backoff import retrying_async
from schedule_sdk.domain.errors import (
    BrokerUnavailable,
    InvalidSetting,
    ScheduleError,
    ScheduleUnavailable,
    ScheduleValidationError,
)
from schedule_sdk.domain.text import escaped, masked_url, without_secret
from schedule_sdk.domain.timers import Envelope, ScheduleTimer, as_refusal
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
            detail = without_secret(repr(error), self.url)
            raise BrokerUnavailable(f"cannot connect to NATS at {masked_url(self.url)}: {detail}") from error
        self.js = self.nc.jetstream()
        return self

    async def _connect(self) -> Any:
        async def disconnected() -> None:
            if not self._closing:
                logger.warning("disconnected from NATS %s; reconnecting", masked_url(self.url))

        async def reconnected() -> None:
            logger.warning("reconnected to NATS %s", masked_url(self.url))

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
        """Close the connection, end what still runs on the loop, stop the loop thread."""
        self._closing = True
        if self.nc is not None:
            try:
                self.run(self.nc.close(), 5)
            except Exception as error:  # closing a broken connection: nothing left to do
                logger.debug("closing NATS: %r", error)
        if self.loop.is_running():  # not after an earlier close
            try:
                self.run(_cancel_the_rest(), 5)
            except Exception as error:  # a task that would not end: stopping the loop strands it
                logger.debug("ending the tasks on the NATS loop: %r", error)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


async def _cancel_the_rest() -> None:
    """Cancel every other task of the running loop and wait for them to end: a task left pending
    on a stopped loop never ends, and whoever waits for it (a command source stopped after the
    connection was closed) would wait out its whole timeout."""
    this = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not this]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class JetStreamBus(MessageBus):
    def __init__(self, nats_loop: NatsLoop, *, stream: str, subject: str, timeout: float = 5.0) -> None:
        self._nats = nats_loop
        self._stream = stream
        self.subject = subject
        self._timeout = timeout

    def publish(self, envelope: Envelope) -> None:
        if not self._nats.connected:
            raise BrokerUnavailable(f"not connected to NATS at {masked_url(self._nats.url)}")
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
    """ScheduleTimer commands from a durable pull consumer; see the module docstring.

    One command must never hold up the others, whatever is wrong with it: decoding refuses a
    body on its own (any exception), a batch that fails to persist for a reason other than the
    store being unavailable is retried one command at a time, and a command the store keeps
    failing on is redelivered at most ``max_deliver`` times, then dead-lettered and terminated
    (the consumer's own ``max_deliver`` on the server is a few deliveries more, a backstop).
    """

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
        max_deliver: int = 20,
    ) -> None:
        if max_deliver < 1:
            raise InvalidSetting("max_deliver must be at least 1")
        if not ack_wait > 0:
            raise InvalidSetting("ack_wait must be positive")
        self._nats = nats_loop
        self._stream = stream
        self._subject = subject
        self._durable = durable
        self._batch = batch
        self._dead_letter = dead_letter_subject
        self._ack_wait = ack_wait
        self._max_deliver = max_deliver
        self._server_max_deliver = max_deliver + SPARE_DELIVERIES
        self._stopping = threading.Event()
        self._stopped = asyncio.Event()  # the same, for the loop: ends a retry delay at once
        self._task: Future[None] | None = None

    def start(self, sink: CommandSink) -> None:
        try:
            subscription = self._nats.run(self._subscribe(), 10)
        except Exception as error:
            raise BrokerUnavailable(f"cannot consume {self._stream}/{self._durable}: {error!r}") from error
        self._stopping.clear()
        self._stopped = asyncio.Event()
        self._task = self._nats.submit(self._consume(subscription, sink))

    async def _subscribe(self) -> Any:
        """Bind to the durable consumer, creating it, or updating its ``max_deliver`` and
        ``ack_wait`` when it was created with other values (``pull_subscribe`` only creates a
        missing consumer: an existing one, say from a release that redelivered forever, would
        keep its old config). Should the server refuse the update, the cap still holds: the
        source itself stops redelivering at ``max_deliver``."""
        config = ConsumerConfig(
            durable_name=self._durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self._ack_wait,
            max_deliver=self._server_max_deliver,
        )
        js = self._nats.js
        try:
            info = await js.consumer_info(self._stream, self._durable)
        except NotFoundError:
            info = None
        if info is not None and (
            info.config.max_deliver != self._server_max_deliver or info.config.ack_wait != self._ack_wait
        ):
            update = info.config.evolve(max_deliver=self._server_max_deliver, ack_wait=self._ack_wait)
            try:
                await js.add_consumer(self._stream, config=update)
            except Exception as error:  # an older server: the source's own cap still applies
                logger.warning("could not update consumer %s/%s: %r", self._stream, self._durable, error)
        return await js.pull_subscribe(
            self._subject, durable=self._durable, stream=self._stream, config=config
        )

    def stop(self) -> None:
        """Stop consuming: a retry delay ends at once; a fetch under way (a short long-poll) is let
        finish, and the commands it brought are persisted and acked before the consumer ends."""
        self._stopping.set()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs on it anymore
            self._nats.loop.call_soon_threadsafe(self._stopped.set)
        if self._task is not None:
            try:
                self._task.result(timeout=10)
            except CancelledError:
                pass  # the NATS loop was closed first and ended the consumer
            except Exception as error:
                logger.warning("command consumer stopped with %r", error)
            self._task = None

    async def _consume(self, subscription: Any, sink: CommandSink) -> None:
        async def step() -> float | None:
            try:
                messages = await subscription.fetch(self._batch, timeout=0.5)
            except (TimeoutError, nats.errors.TimeoutError):
                return None  # nothing to do
            try:
                await self._process(messages, sink)
            except Exception:  # never let the consumer die; unacked messages are redelivered
                logger.exception("processing %d ScheduleTimer commands failed", len(messages))
            return 0.0

        await retrying_async(
            step,
            stop=self._stopping,
            wait=self._pause,
            errors=(Exception,),  # disconnected, server restarting: wait and go on
            what="fetching ScheduleTimer commands",
            logger=logger,
        )

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or until the source is stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), seconds)

    async def _process(self, messages: list[Any], sink: CommandSink) -> None:
        commands: list[ScheduleTimer] = []
        accepted: list[Any] = []
        for message in messages:
            try:
                commands.append(ScheduleTimer.from_json(message.data))
                accepted.append(message)
            except Exception as error:  # whatever the body does to the decoder, it is refused alone
                refusal = as_refusal(error, "decoding the command")
                if refusal is not error:
                    logger.error("decoding a ScheduleTimer command raised %r", error, exc_info=error)
                sink.malformed(refusal, message.data)
                await self._refuse(message, refusal)
        if not commands:
            return
        try:
            results = await self._persist(sink, commands)
        except ScheduleUnavailable as error:
            await self._store_failed(list(zip(accepted, commands, strict=True)), sink, error)
            return
        except Exception as error:  # not the store being down: one of the commands is at fault
            logger.warning(
                "persisting %d ScheduleTimer commands failed (%r); one by one", len(commands), error
            )
            await self._one_by_one(list(zip(accepted, commands, strict=True)), sink)
            return
        for message, result in zip(accepted, results, strict=True):
            await self._settle(message, result)

    async def _persist(self, sink: CommandSink, commands: list[ScheduleTimer]) -> Sequence[object]:
        return await asyncio.get_running_loop().run_in_executor(None, sink.handle_each, commands)

    async def _settle(self, message: Any, result: object) -> None:
        if isinstance(result, ScheduleValidationError):
            await self._refuse(message, result)
        else:
            await _quietly(message.ack(), "ack")

    async def _one_by_one(self, pending: list[tuple[Any, ScheduleTimer]], sink: CommandSink) -> None:
        """Persist each command alone: the one that fails alone is refused, the others are acked."""
        for message, command in pending:
            try:
                (result,) = await self._persist(sink, [command])
            except ScheduleUnavailable as error:
                await self._store_failed([(message, command)], sink, error)
                continue
            except Exception as error:
                result = as_refusal(error, "persisting the command")
                sink.malformed(result, message.data)
            await self._settle(message, result)

    async def _store_failed(
        self, pending: list[tuple[Any, ScheduleTimer]], sink: CommandSink, error: ScheduleUnavailable
    ) -> None:
        """The store failed. The batch is redelivered after a delay that doubles per delivery (up
        to :data:`MAX_NAK_DELAY`), until a command's last delivery: then, when several commands
        failed together, each is first tried alone (a command that made the store fail must not
        take the others with it), and one that still fails is dead-lettered and terminated."""
        last = [item for item in pending if _deliveries(item[0]) >= self._max_deliver]
        if last and len(pending) > 1:
            await self._one_by_one(pending, sink)
            return
        for message, _ in pending:
            delivered = _deliveries(message)
            if delivered >= self._max_deliver:
                logger.error(
                    "ScheduleTimer command not persisted after %d deliveries (%s); giving up: %r",
                    delivered,
                    error,
                    message.data[:200],
                )
                await self._refuse(message, error, f"not persisted after {delivered} deliveries: {error}")
            else:
                await _quietly(message.nak(delay=_nak_delay(delivered)), "nak")
        if len(pending) > len(last):
            logger.warning(
                "persisting %d ScheduleTimer commands failed (%s); redelivering", len(pending), error
            )

    async def _refuse(self, message: Any, error: ScheduleError, reason: str | None = None) -> None:
        """Copy ``message`` to the dead-letter subject (if any) with the reason, then terminate it.
        If the copy cannot be published (disconnected), the message is nak'd instead, to be
        refused again at its next delivery rather than terminated without its copy."""
        if self._dead_letter:
            headers = {
                "Timer-Error-Code": error.code,
                "Timer-Error": escaped(" ".join((reason or str(error)).split()))[:500],
                "Timer-Source-Subject": str(message.subject),
            }
            try:
                await self._nats.nc.publish(self._dead_letter, message.data, headers=headers)
            except Exception as publish_error:
                logger.warning(
                    "dead-lettering a ScheduleTimer command failed (%r); redelivering", publish_error
                )
                await _quietly(message.nak(delay=1.0), "nak")
                return
        await _quietly(message.term(), "term")


#: Deliveries the consumer's ``max_deliver`` on the server allows beyond the source's own cap
#: (see the module docstring): the server is a backstop, never the one to give up first.
SPARE_DELIVERIES = 3

#: Longest delay before a command the store failed on is redelivered, in seconds.
MAX_NAK_DELAY = 30.0


def _nak_delay(delivered: int) -> float:
    """Seconds before the next delivery after the ``delivered``-th failed: 1, 2, 4, ... up to
    :data:`MAX_NAK_DELAY` (the exponent is bounded first: a float power overflows)."""
    return min(2.0 ** min(delivered - 1, 16), MAX_NAK_DELAY)


def _deliveries(message: Any) -> int:
    """How many times JetStream has delivered ``message``, this time included (1 if unknown)."""
    try:
        return int(message.metadata.num_delivered)
    except Exception:  # not a JetStream message (no ack subject to read it from)
        return 1


async def _quietly(settle: Coroutine[Any, Any, Any], what: str) -> None:
    """Ack, nak or term one message; a failure (disconnected) only leaves that message to be
    redelivered after ``ack_wait``, so it must not stop the others of the batch being settled."""
    try:
        await settle
    except Exception as error:
        logger.warning("could not %s a ScheduleTimer command: %r", what, error)
