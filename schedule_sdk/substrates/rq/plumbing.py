"""Redis plumbing shared by the ``rq`` substrate: key names, connections, error translation, scripts.

Per RQ queue ``q`` the SDK keeps, next to RQ's own keys:

- ``schedule_sdk:{q}:staged``   ZSET occurrence key -> ms when staged (written inside the SQL
  transaction; an entry here is not released until the transaction committed);
- ``schedule_sdk:{q}:delay``    ZSET occurrence key -> due instant in epoch ms (exact float);
- ``schedule_sdk:{q}:released`` ZSET occurrence key -> ms when the pump handed it to RQ (renewed
  while a consumer waits for room to claim it);
- ``schedule_sdk:{q}:next``     the pump's planned wake-up (ms), so a commit only publishes a
  wake-up on ``schedule_sdk:{q}:wake`` when it adds an earlier entry;
- ``schedule_sdk:{q}:pump``     the releaser lease: the pump leadership lock (SET NX PX, renewed);
- ``schedule_sdk:{q}:interrupt:<consumer>`` a LIST a consumer's pop waits on beside RQ's queue:
  a push ends the wait of that consumer (its stop); it expires after ``INTERRUPT_TTL`` seconds.

What entries and released jobs carry (no Redis) is in :mod:`~schedule_sdk.substrates.rq.entries`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import RedisError, ResponseError
from redis.sentinel import Sentinel

from schedule_sdk.domain.errors import QueueUnavailable
from schedule_sdk.domain.redis_url import sentinel_target


@dataclass(frozen=True, slots=True)
class Keys:
    queue: str

    def _key(self, name: str) -> str:
        return f"schedule_sdk:{{{self.queue}}}:{name}"

    @property
    def staged(self) -> str:
        return self._key("staged")

    @property
    def delay(self) -> str:
        return self._key("delay")

    @property
    def released(self) -> str:
        return self._key("released")

    @property
    def next(self) -> str:
        return self._key("next")

    @property
    def wake(self) -> str:
        return self._key("wake")

    @property
    def pump(self) -> str:
        return self._key("pump")

    def interrupt(self, consumer: str) -> str:
        """What ends a waiting pop of ``consumer`` (:meth:`RQExecutionQueue.interrupt`)."""
        return self._key(f"interrupt:{consumer}")

    @property
    def refused(self) -> str:
        """The RQ jobs set aside unexecuted (undecodable, or not a fire of this queue): newest
        first, at most :data:`MAX_REFUSED` kept, for an operator to look at."""
        return self._key("refused")


#: Seconds an interrupt no pop took stays (a consumer that stopped before it waited again).
INTERRUPT_TTL = 60

#: The most refused RQ jobs kept under :attr:`Keys.refused`.
MAX_REFUSED = 1000


def connect(url: str, *, timeout: float = 5.0) -> redis.Redis:
    """A client with bounded connect/socket timeouts (a dead server fails fast, never hangs).

    For a ``redis+sentinel://`` URL (:mod:`~schedule_sdk.domain.redis_url`) the client asks the
    Sentinels for the service's primary, and asks again whenever its connection to it breaks or
    the server it reaches was demoted to a replica: after a failover the next command (after the
    caller's retry) goes to the new primary."""
    options: dict[str, Any] = {
        "socket_connect_timeout": timeout,
        "socket_timeout": timeout,
        "health_check_interval": 30,
    }
    target = sentinel_target(url)
    if target is None:
        return redis.Redis.from_url(url, **options)
    sentinels = Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels), sentinel_kwargs={"socket_connect_timeout": timeout, "socket_timeout": timeout}
    )
    client: redis.Redis = sentinels.master_for(  # type: ignore[no-untyped-call]
        target.service, **options, **target.server_options()
    )
    return client


#: The ``maxmemory-policy`` values under which Redis may evict the SDK's keys: its entries and
#: RQ's jobs carry no TTL, so only the ``allkeys-*`` policies can pick them (``volatile-*`` ones
#: evict keys with a TTL only: the pump lock, whose loss costs one lock period).
EVICTING_POLICIES = ("allkeys-lru", "allkeys-lfu", "allkeys-random")


def eviction_risks(client: redis.Redis) -> list[str]:
    """One line if the server's ``maxmemory-policy`` could evict the SDK's keys (an entry evicted
    is a job that fires only once the reconciler finds it missing), else none. Read from
    ``INFO memory`` (allowed where ``CONFIG`` is not, as on managed Redis).

    :raises redis.RedisError: the server did not answer.
    """
    memory: dict[str, Any] = client.info("memory")
    policy = str(memory.get("maxmemory_policy", "noeviction"))
    if policy not in EVICTING_POLICIES:
        return []
    return [
        (
            f"Redis maxmemory-policy is {policy}: under memory pressure it evicts the SDK's entries "
            "(they carry no TTL), which then fire only once the reconciler re-enqueues them; "
            "set noeviction (or a volatile-* policy)"
        )
    ]


def run_id(client: redis.Redis) -> str | None:
    """The run id of the server the client reaches (a new one after a failover or a restart), or
    None where ``INFO`` is not allowed.

    :raises redis.RedisError: the server did not answer.
    """
    try:
        server: dict[str, Any] = client.info("server")
    except ResponseError:  # INFO renamed or refused (some managed services)
        return None
    found = server.get("run_id")
    return None if found is None else str(found)


@contextlib.contextmanager
def unavailable_as(message: str) -> Iterator[None]:
    """Translate any Redis failure into :class:`QueueUnavailable` (the driver error is the cause)."""
    try:
        yield
    except RedisError as error:
        raise QueueUnavailable(f"{message}: {error}") from error


# Move committed entries from staged to the delay index; publish a wake-up only when an entry is
# earlier than the pump's planned wake-up. KEYS: staged, delay, next, wake. ARGV: key, ms, key, ms...
ACTIVATE = """
local earliest = nil
for i = 1, #ARGV, 2 do
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i])
  redis.call('ZREM', KEYS[1], ARGV[i])
  local score = tonumber(ARGV[i + 1])
  if earliest == nil or score < earliest then earliest = score end
end
if earliest ~= nil then
  local planned = redis.call('GET', KEYS[3])
  if (not planned) or earliest < tonumber(planned) then
    redis.call('SET', KEYS[3], tostring(earliest))
    redis.call('PUBLISH', KEYS[4], tostring(earliest))
  end
end
return 0
"""

# The pump's plan: the earliest due score (or nil), recorded as the planned wake-up atomically
# with reading it, so no commit can slip between the read and the record. KEYS: delay, next.
PLAN = """
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first == 0 then redis.call('DEL', KEYS[2]) return false end
redis.call('SET', KEYS[2], first[2])
return first[2]
"""

# Drop stranded entries from staged and released, each only if it is still at most the cutoff
# score (an entry handed over again meanwhile has a newer one). KEYS: staged, released.
# ARGV: cutoff ms, key, key...
DISCARD = """
local cutoff = tonumber(ARGV[1])
for i = 2, #ARGV do
  for k = 1, 2 do
    local score = redis.call('ZSCORE', KEYS[k], ARGV[i])
    if score and tonumber(score) <= cutoff then redis.call('ZREM', KEYS[k], ARGV[i]) end
  end
end
return 0
"""

# Which occurrences have no entry (for the reconciler): not in the delay index, and neither staged
# nor released since the cutoff (an older mark is a process that died mid-step). KEYS: delay,
# staged, released. ARGV: cutoff ms, key, key... Returns the positions (1-based) of those keys.
MISSING = """
local fresh = tonumber(ARGV[1])
local found = {}
for i = 2, #ARGV do
  if not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    local staged = redis.call('ZSCORE', KEYS[2], ARGV[i])
    if (not staged) or tonumber(staged) < fresh then
      local released = redis.call('ZSCORE', KEYS[3], ARGV[i])
      if (not released) or tonumber(released) < fresh then found[#found + 1] = i - 1 end
    end
  end
end
return found
"""

# Renew the lock only if we still hold it. KEYS: lock. ARGV: token, ttl ms.
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# Delete the pump lock if a worker declared dead holds it: the value is "<worker id>/<32 hex>".
# KEYS: lock. ARGV: the dead workers' ids.
DROP_LOCK_OF = """
local holder = redis.call('GET', KEYS[1])
if not holder then return 0 end
local owner = string.sub(holder, 1, -34)
for _, id in ipairs(ARGV) do
  if owner == id then return redis.call('DEL', KEYS[1]) end
end
return 0
"""

# Release the lock only if we still hold it. KEYS: lock. ARGV: token.
UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def as_text(value: Any) -> str:
    """A Redis reply (bytes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)
