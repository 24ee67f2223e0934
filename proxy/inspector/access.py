"""Who may use the inspector, for which users, and the cookie and CSRF tokens that say so.

Guarded like the memory API. With proxy keys (`auth.keys`), a browser logs in once with a
key (`proxy.auth.authenticate` judges it, as it judges an API call), and gets a cookie: the
key's SHA-256 digest (never the key), a random browser-session id and an expiry, signed with
HMAC-SHA256 under `inspector.secret` (or a random per-process secret), HttpOnly,
SameSite=Strict, Path=/ui, Secure over HTTPS. Each page finds the configured key by that
digest again, so a key removed from the config stops working at the next start. An admin or
an unbound key sees every user (the memory API lets it act for any); a key bound to a user,
or with a `users` list, sees only those.

Without proxy keys, the inspector answers only clients on loopback, asking for a loopback
host name too (a page elsewhere that rebinds its DNS name to 127.0.0.1 sends its own name),
unless `inspector.allow_remote`; the browser still gets a signed cookie with no key in it.

Every form carries a CSRF token, an HMAC of the cookie's browser-session id, and every POST
is refused (403) unless the token matches the cookie's; logging in starts a new id, and
logging out ends the old one on the server too (`Signer.end`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from proxy.auth import authenticate
from proxy.config import Config, ProxyKey
from proxy.errors import ProxyError
from proxy.identity import user_namespace

COOKIE = "moim_ui"
LIFETIME = 12 * 3600  # seconds a login lasts
MAX_ENDED = 100_000  # logged-out browser sessions remembered until their cookies expire


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking: their proxy key and their browser-session id.

    `key` is None before a login (with keys: sees no user) and without proxy keys (`open`:
    sees every user).
    """

    key: ProxyKey | None
    session: str
    open: bool = False

    @property
    def only(self) -> tuple[str, ...] | None:
        """The users (their namespaces, as stored) this viewer may see; None for any.

        A key names users as clients send them (`john smith`); the store, the page paths and
        the API's checks use their namespaces (`~john%20smith`, `proxy.identity`).
        """
        if self.key is None:
            return None if self.open else ()
        if self.key.admin:
            return None
        if self.key.user_id is not None:
            return (user_namespace(self.key.user_id),)
        return tuple(map(user_namespace, self.key.users)) or None

    def may_see(self, user_id: str) -> bool:
        only = self.only
        return only is None or user_id in only


class Signer:
    """Signs and opens cookie values; makes and checks CSRF tokens; remembers the browser
    sessions logged out (`end`) until their cookies would have expired, so a copy of a cookie
    kept from before a logout opens nothing."""

    def __init__(self, secret: str | None) -> None:
        self._key = secret.encode() if secret is not None else os.urandom(32)
        self._ended: dict[str, float] = {}  # browser-session id -> when its cookie expires

    def _mac(self, purpose: str, data: str) -> str:
        digest = hmac.new(self._key, f"{purpose}\n{data}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def cookie(self, key: ProxyKey | None, now: float | None = None) -> tuple[str, str]:
        """A new signed cookie value for `key`, and its browser-session id."""
        session = secrets.token_urlsafe(18)
        expires = int((time.time() if now is None else now) + LIFETIME)
        payload = {"s": session, "k": key_digest(key.key) if key else "", "e": expires}
        data = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
        return f"{data}.{self._mac('cookie', data)}", session

    def open(self, value: str | None) -> dict[str, Any] | None:
        """The payload of a cookie this signer made and that has not expired, else None."""
        if not value or value.count(".") != 1:
            return None
        data, mac = value.split(".")
        if not hmac.compare_digest(mac.encode(), self._mac("cookie", data).encode()):
            return None
        try:
            payload = json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)))
        except ValueError:
            return None
        if not isinstance(payload, dict) or not isinstance(payload.get("e"), int):
            return None
        if payload.get("s") in self._ended:
            return None
        return payload if payload["e"] > time.time() else None

    def end(self, session: str) -> None:
        """Log a browser session out: its cookie opens nothing from now on (in this process:
        another replica sharing `inspector.secret` does not hear of it). At most `MAX_ENDED`
        are remembered, those whose cookies expire last."""
        now = time.time()
        self._ended = {s: until for s, until in self._ended.items() if until > now}
        self._ended[session] = now + LIFETIME
        if len(self._ended) > MAX_ENDED:
            del self._ended[min(self._ended, key=self._ended.__getitem__)]

    def csrf(self, session: str) -> str:
        return self._mac("csrf", session)

    def csrf_ok(self, session: str, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self.csrf(session).encode())


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class Refused(Exception):
    """The inspector will not answer: `status` and a message for the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LoginNeeded(Exception):
    """No valid login cookie while proxy keys are configured: go to the login page."""


def viewer_of(
    request: Request, config: Config, signer: Signer, login_page: bool = False
) -> Viewer | None:
    """The viewer a request's cookie names; None when it has no valid cookie (and may get one).

    Raises `Refused` for a client the inspector does not answer, `LoginNeeded` when keys are
    configured and the cookie names none of them (on the login page: a viewer with no key).
    """
    if not config.keys:
        if not config.inspector.allow_remote and not _loopback(request):
            raise Refused(403, "the inspector answers only loopback clients without proxy keys")
        payload = signer.open(request.cookies.get(COOKIE))
        return Viewer(None, payload["s"], open=True) if payload else None
    payload = signer.open(request.cookies.get(COOKIE))
    key = _configured_key(payload["k"], config) if payload else None
    if key is not None and payload is not None:
        return Viewer(key, payload["s"])
    if not login_page:
        raise LoginNeeded()
    return Viewer(None, payload["s"]) if payload else None


def login(key_text: str, config: Config) -> ProxyKey:
    """The configured key a login form presents; `Refused` (401) for any other."""
    try:
        caller = authenticate({"authorization": f"Bearer {key_text.strip()}"}, config)
    except ProxyError:
        raise Refused(401, "that key is not a moim key that may use the inspector") from None
    assert caller.key is not None  # keys are configured: authenticate returned one
    return caller.key


def _configured_key(digest: Any, config: Config) -> ProxyKey | None:
    if not isinstance(digest, str) or not digest:
        return None
    found = None
    for key in config.keys:  # every key, always: timing says nothing about which matched
        if hmac.compare_digest(key_digest(key.key).encode(), digest.encode()):
            found = key
    return None if found is None or found.metrics_only else found


def _loopback(request: Request) -> bool:
    """A loopback client that names a loopback host (not a rebound DNS name)."""
    client = request.client.host if request.client else ""
    host = request.url.hostname or ""
    return _is_loopback(client) and (host == "localhost" or _is_loopback(host))


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def cookie_header(value: str, request: Request, max_age: int = LIFETIME) -> str:
    """The Set-Cookie value: HttpOnly, SameSite=Strict, Path=/ui, Secure over HTTPS."""
    secure = "; Secure" if request.url.scheme == "https" else ""
    return f"{COOKIE}={value}; Max-Age={max_age}; Path=/ui; HttpOnly; SameSite=Strict{secure}"
