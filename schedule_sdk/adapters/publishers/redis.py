"""``RedisEventPublisher``: the "one-adapter swap" for many app instances (``SCHEDULE_EVENTS=redis``).

``publish`` runs this process's listeners (a failure fails the fire, which is then retried, as
with the in-process publisher) and broadcasts the event as JSON on a Redis pub/sub channel.
Every other process that created the publisher receives it on a subscriber thread and runs its
own listeners (a failure there is logged: pub/sub cannot report back). Each instance ignores its
own messages, so every instance's listeners see each fire once (at least once across crashes;
pub/sub drops messages while an instance is disconnected).

Create the publisher in every app instance that has listeners, e.g. ``container.publisher()`` at
startup (a worker creates it anyway).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import Any

import redis
from redis.exceptions import RedisError
from redis.sentinel import Sentinel

from schedule_sdk.domain.backoff import Reconnect, retrying
from schedule_sdk.domain.errors import BrokerUnavailable, ListenerFailed
from schedule_sdk.domain.events import (
    ScheduleArrivedEvent,
    ScheduleEvent,
    ScheduleFailedEvent,
    ScheduleMissedEvent,
)
from schedule_sdk.domain.redis_url import sentinel_target
from schedule_sdk.ports import EventPublisher, Listeners

logger = logging.getLogger(__name__)

DEFAULT_CHANNEL = "schedule_sdk:events"


def _connect(url: str, **options: Any) -> redis.Redis:
    """A client of the server ``url`` names, or of the primary of the Sentinel service it names
    (``redis+sentinel://``; asked again after a failover, see :mod:`~schedule_sdk.domain.redis_url`)."""
    target = sentinel_target(url)
    if target is None:
        return redis.Redis.from_url(url, **options)
    timeouts = {k: v for k, v in options.items() if k.startswith("socket_")}
    sentinels = Sentinel(list(target.sentinels), sentinel_kwargs=timeouts)  # type: ignore[no-untyped-call, unused-ignore]
    client: redis.Redis = sentinels.master_for(  # type: ignore[no-untyped-call, unused-ignore]
        target.service, **options, **target.server_options()
    )
    return client


class RedisEventPublisher(EventPublisher):
    def __init__(
        self,
        *,
        registry: Listeners,
        redis_url: str | None,
        channel: str = DEFAULT_CHANNEL,
    ) -> None:
        if not redis_url:
            raise ValueError("the redis event publisher needs redis_url (SCHEDULE_REDIS_URL)")
        self.registry = registry
        self.channel = channel
        self.origin = uuid.uuid4().hex
        self._redis = _connect(redis_url, socket_connect_timeout=5, socket_timeout=5)
        self._subscriber = _connect(redis_url, socket_connect_timeout=5, health_check_interval=10)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="schedule-sdk-events", daemon=True)
        self._thread.start()
        self._ready.wait(5)

    def publish(self, event: ScheduleArrivedEvent) -> int:
        """Run this process's listeners and broadcast; return how many listeners ran here plus
        how many other instances received the broadcast (each may have listeners of the topic:
        pub/sub cannot tell, so an instance that received it counts as one that heard it)."""
        return self._broadcast(event)

    def publish_missed(self, event: ScheduleMissedEvent) -> None:
        self._broadcast(event)

    def publish_failed(self, event: ScheduleFailedEvent) -> None:
        self._broadcast(event)

    def _broadcast(self, event: ScheduleEvent) -> int:
        failure: ListenerFailed | None = None
        heard = 1
        try:
            heard = self.registry.deliver(event)
        except ListenerFailed as failed:
            failure = failed
        body = {"origin": self.origin, "event": event.to_dict()}
        if isinstance(event, ScheduleMissedEvent):
            body["kind"] = "missed"
        elif isinstance(event, ScheduleFailedEvent):
            body["kind"] = "failed"
        message = json.dumps(body)
        try:
            receivers = int(self._redis.publish(self.channel, message))
        except RedisError as error:
            raise BrokerUnavailable(f"could not publish the event to Redis: {error}") from error
        if failure is not None:
            raise failure
        # Every instance's subscriber receives it, this one's too (which ignores its own).
        return heard + max(0, receivers - 1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=3)
        self._redis.close()
        self._subscriber.close()

    def _listen(self) -> None:
        backoff = Reconnect()
        retrying(
            lambda: self._subscribe(backoff),
            stop=self._stop,
            backoff=backoff,
            errors=(RedisError,),
            what="event subscriber",
            logger=logger,
        )

    def _subscribe(self, backoff: Reconnect) -> float:
        """Subscribe; receive the other instances' events until stop."""
        pubsub: Any = self._subscriber.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call, unused-ignore]
        try:
            pubsub.subscribe(self.channel)
            self._ready.set()
            backoff.reset()  # connected: a later drop retries after the first delay again
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=0.5)
                if message is not None:
                    self._receive(message["data"])
        finally:
            try:
                pubsub.close()
            except Exception:
                pass
        return 0.0

    def _receive(self, data: Any) -> None:
        try:
            body = json.loads(data)
            if body.get("origin") == self.origin:
                return
            kind = body.get("kind")
            event: ScheduleEvent = (
                ScheduleMissedEvent.from_dict(body["event"])
                if kind == "missed"
                else ScheduleFailedEvent.from_dict(body["event"])
                if kind == "failed"
                else ScheduleArrivedEvent.from_dict(body["event"])
            )
        except (ValueError, KeyError, TypeError) as error:
            logger.error("ignoring a malformed event message: %s", error)
            return
        try:
            self.registry.deliver(event)
        except ListenerFailed:
            pass  # deliver logged each failure; a remote instance cannot fail the fire
