"""Who may see and act (cancel, pause, ...), the dashboard's session, its CSRF tokens, the login
throttle, the security headers and the bound on form bodies.

Acting needs an explicit decision by the application: an ``auth`` hook given the request, or an
access ``token``. With neither, nobody may act: the dashboard is read-only.

**Sessions.** Every browser gets a session cookie: a random id, its kind (anonymous, or logged in
with the token), its expiry and a MAC under a key derived from the dashboard's secret *and the
token*, so changing the token revokes every session. Logging in issues a new id (a session id
seen before the login is never promoted); logging out revokes the id (kept in a revocation list
until it would have expired anyway). The cookie is HttpOnly, SameSite=Strict, and Secure when the
request came over HTTPS (or as the ``secure_cookies`` setting says).

**CSRF.** Each form carries the MAC of the session id under the secret: a token only works with
the session cookie it was issued to, so another visitor's token is worthless. Requests that
authenticate with ``Authorization: Bearer`` (scripts; browsers never add that header on their own)
need no form token: CSRF applies to cookie sessions only.

**Logins** are throttled per client address: after :data:`LOGIN_FAILURES` failures in
:data:`LOGIN_WINDOW`, every attempt (a right token too) gets 429 until the window has passed.
A wrong ``Bearer`` token counts as a failure.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schedule_sdk.domain.errors import InvalidSetting
from schedule_sdk.ports import Clock


@dataclass(frozen=True, slots=True)
class TenantScope:
    """What an auth hook may return instead of a bool: the tenants this user may see and act on
    (jobs of other tenants, and jobs without a tenant, are neither listed nor shown nor
    steerable), and whether the user may act on them at all."""

    tenants: frozenset[str]
    act: bool = True

    def __init__(self, tenants: Iterable[str], act: bool = True) -> None:
        object.__setattr__(self, "tenants", frozenset(tenants))
        object.__setattr__(self, "act", act)


#: ``auth(request) -> bool | TenantScope``: True when this request may act on every job, False
#: when it may only look, or a :class:`TenantScope`. Called once per request.
AuthHook = Callable[[Request], "bool | TenantScope"]

SESSION_COOKIE = "schedule_dashboard_session"
#: Tokens must have at least this many bits by a plain estimate (length x log2 of the alphabet of
#: the character classes used), at least this many characters and distinct characters.
MIN_TOKEN_BITS = 128
MIN_TOKEN_LENGTH = 24
MIN_TOKEN_DISTINCT = 10
LOGIN_FAILURES = 10
LOGIN_WINDOW = timedelta(minutes=5)
#: The most client addresses whose failures are remembered (the oldest are forgotten first).
THROTTLE_CLIENTS = 10_000
#: Form bodies longer than this are refused (413) before any of it is parsed.
MAX_FORM_BYTES = 256 * 1024
MAX_FORM_FIELDS = 64


def check_token_strength(token: str) -> None:
    """Refuse a guessable access token.

    :raises InvalidSetting: the token is shorter than :data:`MIN_TOKEN_LENGTH`, has fewer than
        :data:`MIN_TOKEN_DISTINCT` distinct characters, or an estimated strength under
        :data:`MIN_TOKEN_BITS` bits (``python -c "import secrets; print(secrets.token_urlsafe(32))"``
        makes a good one).
    """
    alphabet = 0
    alphabet += 26 if any(c.islower() for c in token) else 0
    alphabet += 26 if any(c.isupper() for c in token) else 0
    alphabet += 10 if any(c.isdigit() for c in token) else 0
    alphabet += 33 if any(not c.isalnum() for c in token) else 0
    bits = len(token) * math.log2(alphabet) if alphabet else 0.0
    if len(token) < MIN_TOKEN_LENGTH or len(set(token)) < MIN_TOKEN_DISTINCT or bits < MIN_TOKEN_BITS:
        raise InvalidSetting(
            f"the dashboard's access token is too weak: it needs {MIN_TOKEN_LENGTH}+ characters, "
            f"{MIN_TOKEN_DISTINCT}+ distinct ones and about {MIN_TOKEN_BITS} bits "
            "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )


@dataclass(frozen=True, slots=True)
class Session:
    """The session a request's cookie names (``user``: logged in with the token)."""

    id: str
    kind: Literal["anonymous", "user"]
    expires: int  # epoch seconds


@dataclass(frozen=True, slots=True)
class Grant:
    """What this request may do: act or not, on which tenants (None: all), how it was
    authenticated (``bearer`` needs no form token), and its session."""

    can_act: bool
    tenants: frozenset[str] | None
    via: Literal["bearer", "session", "hook", "none"]
    session: Session
    new_session: bool

    def sees(self, tenant_id: str | None) -> bool:
        return self.tenants is None or (tenant_id is not None and tenant_id in self.tenants)


@dataclass
class LoginThrottle:
    """Failed logins per client address, in a sliding window."""

    clock: Clock
    failures: int = LOGIN_FAILURES
    window: timedelta = LOGIN_WINDOW
    _seen: OrderedDict[str, deque[datetime]] = field(default_factory=OrderedDict)

    def _recent(self, client: str) -> deque[datetime]:
        since = self.clock.now() - self.window
        times = self._seen.get(client, deque())
        while times and times[0] <= since:
            times.popleft()
        return times

    def retry_after(self, client: str) -> int:
        """Seconds until ``client`` may try again (0: now)."""
        times = self._recent(client)
        if len(times) < self.failures:
            return 0
        wait = times[len(times) - self.failures] + self.window - self.clock.now()
        return max(1, math.ceil(wait.total_seconds()))

    def failed(self, client: str) -> None:
        times = self._recent(client)
        times.append(self.clock.now())
        self._seen[client] = times
        self._seen.move_to_end(client)
        while len(self._seen) > THROTTLE_CLIENTS:
            self._seen.popitem(last=False)


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


class Access:
    """The dashboard's access decisions (one per dashboard app)."""

    def __init__(
        self,
        *,
        auth: AuthHook | None,
        token: str | None,
        clock: Clock,
        secret: bytes | None = None,
        session_ttl: timedelta = timedelta(hours=8),
        secure_cookies: bool | None = None,
    ) -> None:
        if token is not None:
            check_token_strength(token)
        if session_ttl <= timedelta(0):
            raise InvalidSetting("session_ttl must be positive")
        self._auth = auth
        self._token = token
        self._secret = secret or secrets.token_bytes(32)
        digest = hashlib.sha256((token or "").encode()).digest()
        self._session_key = hmac.new(self._secret, b"session:" + digest, hashlib.sha256).digest()
        self._clock = clock
        self._ttl = session_ttl
        self._secure = secure_cookies
        self._revoked: dict[str, int] = {}
        self.throttle = LoginThrottle(clock)

    @property
    def uses_token(self) -> bool:
        """Whether the login page applies (a token is set and no auth hook decides)."""
        return self._auth is None and self._token is not None

    # -- the request's grant --------------------------------------------------------------------

    def grant(self, request: Request) -> Grant:
        """What ``request`` may do (computed once per request)."""
        cached = request.scope.get("schedule_dashboard.grant")
        if isinstance(cached, Grant):
            return cached
        session = self._session_of(request)
        new = session is None
        if session is None:
            session = self._new_session("anonymous")
        grant = self._decide(request, session, new)
        request.scope["schedule_dashboard.grant"] = grant
        return grant

    def _decide(self, request: Request, session: Session, new: bool) -> Grant:
        bearer = _bearer(request)
        if self._auth is not None:
            decision = self._auth(request)
            via: Literal["bearer", "hook"] = "bearer" if bearer is not None else "hook"
            if isinstance(decision, TenantScope):
                return Grant(decision.act, decision.tenants, via, session, new)
            return Grant(bool(decision), None, via, session, new)
        if self._token is None:
            return Grant(False, None, "none", session, new)
        if bearer is not None:
            if self.bearer_wait(request):  # answered 429 by BearerThrottle before any page
                return Grant(False, None, "none", session, new)
            if self.check_token(bearer):
                return Grant(True, None, "bearer", session, new)
            self.throttle.failed(client_of(request))
            return Grant(False, None, "none", session, new)
        return Grant(session.kind == "user", None, "session", session, new)

    def bearer_wait(self, request: Request) -> int:
        """Seconds a ``Bearer`` request must wait (0: none is due, or it is no Bearer request the
        token decides): after :data:`LOGIN_FAILURES` failed logins from its address, every one
        waits, the right token too, and counts as no new failure."""
        if self._auth is not None or self._token is None or _bearer(request) is None:
            return 0
        return self.throttle.retry_after(client_of(request))

    def can_act(self, request: Request) -> bool:
        return self.grant(request).can_act

    def check_token(self, supplied: str) -> bool:
        return self._token is not None and hmac.compare_digest(
            hashlib.sha256(supplied.encode(errors="replace")).digest(),
            hashlib.sha256(self._token.encode()).digest(),
        )

    # -- sessions -------------------------------------------------------------------------------

    def _now(self) -> int:
        return int(self._clock.now().timestamp())

    def _new_session(self, kind: Literal["anonymous", "user"]) -> Session:
        return Session(secrets.token_urlsafe(24), kind, self._now() + int(self._ttl.total_seconds()))

    def _session_mac(self, sid: str, kind: str, expires: int) -> str:
        message = f"{sid}.{kind}.{expires}".encode()
        return hmac.new(self._session_key, message, hashlib.sha256).hexdigest()

    def _session_of(self, request: Request) -> Session | None:
        parts = request.cookies.get(SESSION_COOKIE, "").split(".")
        if len(parts) != 4 or parts[1] not in ("anonymous", "user") or not parts[2].isdigit():
            return None
        sid, kind, expires_text, mac = parts
        expires = int(expires_text)
        if not hmac.compare_digest(mac.encode(), self._session_mac(sid, kind, expires).encode()):
            return None
        if expires <= self._now() or sid in self._revoked:
            return None
        return Session(sid, "user" if kind == "user" else "anonymous", expires)

    def set_session(self, request: Request, response: Response, session: Session) -> None:
        mac = self._session_mac(session.id, session.kind, session.expires)
        value = f"{session.id}.{session.kind}.{session.expires}.{mac}"
        secure = self._secure if self._secure is not None else request.url.scheme == "https"
        response.set_cookie(
            SESSION_COOKIE,
            value,
            max_age=max(1, session.expires - self._now()),
            httponly=True,
            samesite="strict",
            secure=secure,
            path=_base(request) or "/",
        )

    def log_in(self, request: Request, response: Response) -> None:
        """Issue a new logged-in session (never the id the browser had before)."""
        old = self.grant(request).session
        self._revoke(old)
        self.set_session(request, response, self._new_session("user"))

    def log_out(self, request: Request, response: Response) -> None:
        """Revoke the request's session and give the browser a fresh anonymous one."""
        self._revoke(self.grant(request).session)
        self.set_session(request, response, self._new_session("anonymous"))

    def _revoke(self, session: Session) -> None:
        now = self._now()
        self._revoked = {sid: until for sid, until in self._revoked.items() if until > now}
        self._revoked[session.id] = session.expires

    # -- CSRF -----------------------------------------------------------------------------------

    def csrf_token(self, request: Request) -> str:
        """The form token of the request's session."""
        sid = self.grant(request).session.id
        return hmac.new(self._secret, b"csrf:" + sid.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, request: Request, token: str) -> bool:
        """Whether a POST may proceed: a Bearer-authenticated request needs no form token; a
        cookie session's form must carry the token of that very session."""
        grant = self.grant(request)
        if grant.via == "bearer" and grant.can_act:
            return True
        if grant.new_session:  # no valid session cookie came with it: nothing to bind to
            return False
        return hmac.compare_digest(token.encode(errors="replace"), self.csrf_token(request).encode())


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return None


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


#: The longest ``next`` a login returns to.
MAX_NEXT_LENGTH = 2000


def local_next(value: str | None) -> str | None:
    """The page a login returns to, if ``value`` is a path of this dashboard: it starts with one
    ``/`` (not ``//``, which a browser reads as another host), holds no backslash (``/\\host``
    is read so too), no scheme or host, no control character or space, and is at most
    :data:`MAX_NEXT_LENGTH` characters. Anything else is None: the login returns to the overview,
    never to another site."""
    if not value or len(value) > MAX_NEXT_LENGTH or not value.startswith("/") or value.startswith("//"):
        return None
    if "\\" in value or any(ord(c) <= 0x20 or 0x7F <= ord(c) <= 0x9F for c in value):
        return None
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return None
    return value


# -- form bodies --------------------------------------------------------------------------------


class FormRefused(Exception):
    """A form body the dashboard will not parse (the status to answer and why)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_form(request: Request, limit: int = MAX_FORM_BYTES) -> dict[str, str]:
    """The fields of a URL-encoded form body, read up to ``limit`` bytes and
    :data:`MAX_FORM_FIELDS` fields (the first value of a repeated name wins, except ``job``,
    whose values are joined with commas: the bulk actions' selection).

    :raises FormRefused: another content type (415), a longer body (413), bad encoding or too
        many fields (400).
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise FormRefused(413, f"the form is larger than {limit:,} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise FormRefused(413, f"the form is larger than {limit:,} bytes")
    if not body:
        return {}
    if kind != "application/x-www-form-urlencoded":
        raise FormRefused(415, "forms must be sent as application/x-www-form-urlencoded")
    try:
        pairs = parse_qsl(
            bytes(body).decode("ascii"),
            keep_blank_values=True,
            max_num_fields=MAX_FORM_FIELDS,
            encoding="utf-8",
            errors="strict",
        )
    except (ValueError, UnicodeError) as error:
        raise FormRefused(400, f"the form is not a valid URL-encoded body ({error})") from error
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name == "job" and name in fields:
            fields[name] += "," + value
        else:
            fields.setdefault(name, value)
    return fields


# -- headers ------------------------------------------------------------------------------------

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class BearerThrottle:
    """ASGI middleware: a ``Bearer`` request from a throttled address (:meth:`Access.bearer_wait`)
    is answered ``429 Too Many Requests`` with ``Retry-After``, before any page or action."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            wait = self.access.bearer_wait(Request(scope))
            if wait:
                refused = PlainTextResponse(
                    f"Too many failed logins: try again in {wait} s.\n",
                    status_code=429,
                    headers={"retry-after": str(wait)},
                )
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SecurityHeaders:
    """ASGI middleware: the security headers on every response, and ``Cache-Control: no-store``
    on every one but the static script (5 minutes) and the icon (a day): pages may show what
    only an authenticated operator should see, and hold form tokens."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        cache = b"public, max-age=86400" if path.endswith("/favicon.ico") else b"no-store"
        if path.endswith("/static/dashboard.js"):
            cache = b"public, max-age=300"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"cache-control"]
                headers.extend(SECURITY_HEADERS)
                headers.append((b"cache-control", cache))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


__all__ = [
    "MAX_FORM_BYTES",
    "Access",
    "AuthHook",
    "FormRefused",
    "local_next",
    "BearerThrottle",
    "Grant",
    "SecurityHeaders",
    "TenantScope",
    "check_token_strength",
    "read_form",
]
