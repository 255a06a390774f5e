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
- ``schedule_sdk:{q}:marker``   a random token, set (``SET NX``) at each look of a worker's heartbeat:
  missing, the database was flushed or the server restarted without its data (:func:`identity`);
- ``schedule_sdk:{q}:healing``  while a worker hands over again the entries Redis lost: when the loss
  was found and why (JSON, with a TTL renewed as the heal goes on, so a heal whose worker died ages out);
- ``schedule_sdk:{q}:healed``   the last heal: when the loss was found, why, how many entries it handed
  over again and how long it took (JSON), for the health check (:func:`heal_notes`);
- ``schedule_sdk:{q}:interrupt:<consumer>`` a LIST a consumer's pop waits on beside RQ's queue:
  a push ends the wait of that consumer (its stop); it expires after ``INTERRUPT_TTL`` seconds.

What entries and released jobs carry (no Redis) is in :mod:`~schedule_sdk.substrates.rq.entries`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
from redis.exceptions import RedisError
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
    def marker(self) -> str:
        return self._key("marker")

    @property
    def healing(self) -> str:
        return self._key("healing")

    @property
    def healed(self) -> str:
        return self._key("healed")

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
    sentinels = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
        list(target.sentinels), sentinel_kwargs={"socket_connect_timeout": timeout, "socket_timeout": timeout}
    )
    client: redis.Redis = sentinels.master_for(  # type: ignore[no-untyped-call, unused-ignore]
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


def identity(client: redis.Redis, keys: Keys, token: str) -> tuple[str | None, str]:
    """The run id of the server the client reaches (None where ``INFO`` is refused) and the
    namespace's marker token, in one round trip: ``INFO server``, ``SET marker token NX`` (a
    no-op, not replicated, while the marker is there) and ``GET marker``. A marker that changed
    since a look is one that went missing (a ``FLUSHDB``, a ``FLUSHALL``, a restart without
    persistence) and was set again, by this look or a peer's; a changed run id is a failover
    or a restart. Each is O(1), whatever the number of entries.

    :raises redis.RedisError: the server did not answer.
    """
    pipe = client.pipeline(transaction=False)
    pipe.info("server")
    pipe.set(keys.marker, token, nx=True)
    pipe.get(keys.marker)
    server, was_set, marker = pipe.execute(raise_on_error=False)  # an INFO refused: no run id
    for reply in (was_set, marker):
        if isinstance(reply, Exception):
            raise reply
    found = server.get("run_id") if isinstance(server, dict) else None
    return (None if found is None else str(found)), as_text(marker)


def heal_notes(client: redis.Redis, keys: Keys) -> tuple[list[str], list[str]]:
    """What the health check says of lost entries, in one round trip: warnings (the marker is
    missing: the entries are gone and no worker has looked since; or a heal is under way) and
    notes (the last heal: when, why, how many entries, how long).

    :raises redis.RedisError: the server did not answer.
    """
    pipe = client.pipeline(transaction=False)
    pipe.exists(keys.marker)
    pipe.get(keys.healing)
    pipe.get(keys.healed)
    marker, healing, healed = pipe.execute()
    warnings: list[str] = []
    if healing is not None:
        record = _record(healing)
        warnings.append(
            f"degraded: healing since {_when(record.get('lost_at'))}: {record.get('reason', '?')}; "
            f"{int(record.get('healed', 0))} entries handed over again so far"
        )
    elif not marker:
        warnings.append(
            "degraded: the SDK's marker key is missing: Redis was flushed or restarted without its "
            "data (or no worker has started on this queue yet); a live worker hands the lost entries "
            "over again at its next beat"
        )
    notes: list[str] = []
    if healed is not None:
        record = _record(healed)
        took = float(record.get("took", 0.0))
        notes.append(
            f"last loss {_when(record.get('lost_at'))}: {record.get('reason', '?')}; "
            f"{int(record.get('healed', 0))} entries handed over again in {took:.2f}s"
        )
    return warnings, notes


def note_heal(client: redis.Redis, keys: Keys, record: dict[str, Any], *, done: bool, ttl: float) -> None:
    """Record a heal for :func:`heal_notes` and :func:`heal_of`: under way (the ``healing`` key,
    expiring after ``ttl`` seconds unless noted again), or ``done`` (``healed`` replaces the last
    one, and ``healing`` goes if it was this heal's, by its ``for``: the incarnation it heals).

    :raises redis.RedisError: the server did not answer.
    """
    if done:
        client.eval(HEALED, 2, keys.healing, keys.healed, json.dumps(record), str(record.get("for", "")))
    else:
        client.set(keys.healing, json.dumps(record), px=max(1, int(ttl * 1000)))


def heal_of(client: redis.Redis, keys: Keys, incarnation: str) -> str | None:
    """``"done"`` when the last heal noted (:func:`note_heal`) healed ``incarnation``,
    ``"under way"`` when a heal of it is noted under way, else None. One round trip.

    :raises redis.RedisError: the server did not answer.
    """
    pipe = client.pipeline(transaction=False)
    pipe.get(keys.healed)
    pipe.get(keys.healing)
    healed, healing = pipe.execute()
    if healed is not None and _record(healed).get("for") == incarnation:
        return "done"
    if healing is not None and _record(healing).get("for") == incarnation:
        return "under way"
    return None


def _record(raw: Any) -> dict[str, Any]:
    try:
        found = json.loads(as_text(raw))
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _when(epoch: Any) -> str:
    """An epoch-seconds instant as UTC ISO 8601 to the millisecond ("?" if not a number)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int | float):
        return "?"
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


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

# Record a heal done: replace the last heal's record, and drop the note of a heal under way if it
# is this heal's (another worker may be healing a later loss). KEYS: healing, healed.
# ARGV: the record (JSON), the incarnation it healed.
HEALED = """
local under_way = redis.call('GET', KEYS[1])
if under_way then
  local ok, note = pcall(cjson.decode, under_way)
  if (not ok) or type(note) ~= 'table' or note['for'] == ARGV[2] then redis.call('DEL', KEYS[1]) end
end
redis.call('SET', KEYS[2], ARGV[1])
return 0
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
