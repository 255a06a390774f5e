"""Who may act (cancel, pause, ...) and the CSRF token every action form carries.

Acting needs an explicit decision by the application: an ``auth`` callable given the request, or
an access ``token`` (sent as ``Authorization: Bearer <token>``, or entered once on the login page,
which sets an HttpOnly cookie holding a MAC of the token, never the token). With neither, nobody
may act: the dashboard is read-only.

CSRF: a random nonce in a ``SameSite=Strict`` cookie, and in each form the nonce with its HMAC
under a per-dashboard secret; a POST must carry a form token whose nonce equals the cookie's and
whose MAC verifies.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response

#: ``auth(request) -> bool``: True when this request may act (cancel, pause, resume, trigger,
#: reschedule). Called for every page (to show or hide the buttons) and every action.
AuthHook = Callable[[Request], bool]

CSRF_COOKIE = "schedule_dashboard_csrf"
LOGIN_COOKIE = "schedule_dashboard_login"


class Access:
    """The dashboard's access decisions (one per dashboard app)."""

    def __init__(self, *, auth: AuthHook | None, token: str | None, secret: bytes | None = None) -> None:
        if token is not None and len(token) < 16:
            raise ValueError("the dashboard's access token must be at least 16 characters")
        self._auth = auth
        self._token = token
        self._secret = secret or secrets.token_bytes(32)

    @property
    def uses_token(self) -> bool:
        """Whether the login page applies (a token is set and no auth hook decides)."""
        return self._auth is None and self._token is not None

    def can_act(self, request: Request) -> bool:
        if self._auth is not None:
            return bool(self._auth(request))
        if self._token is None:
            return False
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer ") and hmac.compare_digest(
            header[7:].strip().encode(), self._token.encode()
        ):
            return True
        cookie = request.cookies.get(LOGIN_COOKIE, "")
        return hmac.compare_digest(cookie.encode(), self._login_mac().encode())

    def check_token(self, supplied: str) -> bool:
        return self._token is not None and hmac.compare_digest(supplied.encode(), self._token.encode())

    def _login_mac(self) -> str:
        assert self._token is not None
        return hmac.new(self._token.encode(), b"schedule-dashboard-login", hashlib.sha256).hexdigest()

    def log_in(self, response: Response, path: str) -> None:
        response.set_cookie(LOGIN_COOKIE, self._login_mac(), httponly=True, samesite="strict", path=path)

    @staticmethod
    def log_out(response: Response, path: str) -> None:
        response.delete_cookie(LOGIN_COOKIE, path=path)

    # -- CSRF -----------------------------------------------------------------------------------

    def _mac(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()

    def csrf_nonce(self, request: Request) -> tuple[str, bool]:
        """The request's CSRF nonce, and whether it is new (then set it with :meth:`set_csrf`)."""
        nonce = request.cookies.get(CSRF_COOKIE, "")
        if len(nonce) == 32 and all(c in "0123456789abcdef" for c in nonce):
            return nonce, False
        return secrets.token_hex(16), True

    def csrf_token(self, nonce: str) -> str:
        return f"{nonce}.{self._mac(nonce)}"

    @staticmethod
    def set_csrf(response: Response, nonce: str, path: str) -> None:
        response.set_cookie(CSRF_COOKIE, nonce, httponly=True, samesite="strict", path=path)

    def csrf_ok(self, request: Request, token: str) -> bool:
        nonce, _, mac = token.partition(".")
        cookie = request.cookies.get(CSRF_COOKIE, "")
        return (
            bool(nonce)
            and hmac.compare_digest(nonce.encode(), cookie.encode())
            and hmac.compare_digest(mac.encode(), self._mac(nonce).encode())
        )
