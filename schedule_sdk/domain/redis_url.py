"""Which Redis a URL names: one server (``redis://``, ``rediss://``, ``unix://``) or a service
that Redis Sentinel fails over (``redis+sentinel://``).

The Sentinel form lists the Sentinels, then the service (the ``sentinel monitor`` name), then the
database number::

    redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]

``rediss+sentinel://`` reaches the Redis servers (not the Sentinels) over TLS. The user and
password, when given, authenticate to the Redis servers the Sentinels name; the Sentinels
themselves are asked without them. A URL is always shown masked
(:func:`~schedule_sdk.domain.text.masked_url`).

This module only reads the text; the clients are built where Redis is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from schedule_sdk.domain.errors import InvalidSetting
from schedule_sdk.domain.text import masked_url, without_secret

#: URL schemes of one Redis server, handed to redis-py as they are.
SERVER_SCHEMES = ("redis", "rediss", "unix")
#: URL schemes of a service found through Redis Sentinel.
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """A Redis service found through Sentinel: ask ``sentinels`` which server is the primary of
    ``service`` (and ask again after a failover)."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)  #: never shown
    ssl: bool = False

    def server_options(self) -> dict[str, Any]:
        """The options of a connection to the Redis servers (not the Sentinels): db, credentials
        and, for ``rediss+sentinel://``, TLS."""
        options: dict[str, Any] = {"db": self.db, "username": self.username, "password": self.password}
        if self.ssl:
            options["ssl"] = True
        return options


def sentinel_target(url: str) -> SentinelTarget | None:
    """The Sentinel service ``url`` names, or None when it names one server (``redis://``...).

    :raises InvalidSetting: a URL of neither form, or a Sentinel URL without Sentinels or service,
        with a bad port or database number (the URL shown masked).
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in SERVER_SCHEMES:
        return None
    shown = masked_url(url)
    if scheme not in SENTINEL_SCHEMES:
        raise InvalidSetting(
            f"bad Redis URL {shown!r}: use redis://host:port/db or "
            "redis+sentinel://host:port,host:port/service/db"
        )
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        userinfo, _, hosts = netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        sentinels = tuple(_host_port(item) for item in hosts.split(",") if item.strip())
        path = [unquote(p) for p in parts.path.split("/") if p]
        if len(path) > 1 and not path[1].isdigit():
            raise ValueError(f"the db must be a number, not {path[1]!r}")
        db = int(path[1]) if len(path) > 1 else 0
    except ValueError as error:
        raise InvalidSetting(f"bad Redis Sentinel URL {shown!r}: {without_secret(str(error), url)}") from None
    if not sentinels:
        raise InvalidSetting(f"bad Redis Sentinel URL {shown!r}: name at least one Sentinel host:port")
    if not path or len(path) > 2:
        raise InvalidSetting(f"bad Redis Sentinel URL {shown!r}: give the service, then the db: /service/0")
    return SentinelTarget(
        sentinels=sentinels,
        service=path[0],
        db=db,
        username=unquote(user) or None,
        password=unquote(password) or None,
        ssl=scheme == "rediss+sentinel",
    )


def _host_port(item: str) -> tuple[str, int]:
    host, sep, port = item.strip().rpartition(":")
    if not sep or not host:
        return item.strip(), 26379
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad port {port!r} of Sentinel {host!r}")
    number = int(port)
    return host.strip("[]"), number
