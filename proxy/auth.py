"""Who may call moim, and for which users.

Without proxy keys (`auth.keys`), moim is a pass-through: the client's `Authorization`
goes to the provider. With them, `Authorization: Bearer <proxy key>` is required on every
endpoint but health; a key bound to a user speaks only for that user, a key with `users`
for those, and an unbound key or an admin key for any user the request names (CONTRACT.md:
the memory API has the same auth as chat). A request presenting no key is refused before
any comparison. Keys are compared in constant time and never logged. Without proxy keys on
loopback, a request a browser sends for a page of another origin is refused (`Origin`).

`/metrics` counts every user's traffic, so with proxy keys only an admin key or a metrics key
(`auth.metrics_keys`, good for nothing else) reads it, unless `server.metrics_public` opens
it; without proxy keys it is open like everything else.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from proxy.config import Config, ProxyKey
from proxy.errors import Forbidden, Unauthorized
from proxy.identity import user_namespace


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated caller: its proxy key (None in pass-through) and raw header."""

    key: ProxyKey | None
    authorization: str | None

    @property
    def bound_user(self) -> str | None:
        return self.key.user_id if self.key is not None else None

    def check_user(self, user_id: str) -> None:
        """Refuse a user (a namespace, as `identify` gives it) this key may not act for."""
        if self.key is None or self.key.admin or self.key.user_id is not None:
            return
        if self.key.users and user_id not in map(user_namespace, self.key.users):
            raise Forbidden(f"this key may not act for user {user_id!r}", code="user_not_allowed")


def authenticate(headers: Mapping[str, str], config: Config) -> Caller:
    """The caller of a request, or Unauthorized when proxy keys are configured and absent.

    A metrics key is refused here (403): it may read `/metrics` and nothing else.
    """
    authorization = headers.get("authorization")
    if not config.keys:
        if is_loopback(config.host):
            _refuse_foreign_origin(headers)
        return Caller(None, authorization)
    key = _matching_key(headers, config)
    if key.metrics_only:
        raise Forbidden("this key may only read /metrics", code="metrics_key_only")
    return Caller(key, authorization)


def authorize_metrics(headers: Mapping[str, str], config: Config) -> None:
    """Refuse a `/metrics` reader that is neither an admin key nor a metrics key."""
    if not config.keys or config.metrics_public:
        return
    key = _matching_key(headers, config)
    if not (key.admin or key.metrics_only):
        raise Forbidden(
            "reading /metrics needs an admin key or a metrics key (auth.metrics_keys)",
            code="metrics_not_allowed",
        )


def _matching_key(headers: Mapping[str, str], config: Config) -> ProxyKey:
    """The configured key the request presents, or Unauthorized."""
    authorization = headers.get("authorization")
    presented = ""
    if authorization and authorization[:7].lower() == "bearer ":
        presented = authorization[7:].strip()
    if not presented:
        presented = (headers.get("x-api-key") or "").strip()
    if not presented:  # before comparing: no configured key, however empty, matches nothing
        raise Unauthorized("a moim proxy key is required", code="invalid_api_key")
    match = None
    for key in config.keys:
        # compare against every key, always, so timing says nothing about which matched
        if hmac.compare_digest(key.key.encode(), presented.encode()):
            match = key
    if match is None:
        raise Unauthorized("a valid moim proxy key is required", code="invalid_api_key")
    return match


def _refuse_foreign_origin(headers: Mapping[str, str]) -> None:
    """Refuse a browser's request sent by a page from elsewhere (403).

    Without proxy keys on loopback, nothing else stops a web page the user visits from
    writing to moim: a form, or `fetch` in `no-cors` mode, sends a POST to 127.0.0.1 without
    asking (its answer is not readable, but it is acted on: a fact planted, history imported,
    a chat sent on the configured provider key). A browser names the page's origin in `Origin`;
    other clients send none. A page served from loopback itself is let through, as for `/mcp`.
    """
    origin = headers.get("origin")
    if origin is None:
        return
    try:
        host = urlsplit(origin.strip()).hostname or ""  # "null" (a sandboxed page) has none
    except ValueError:
        host = ""
    if not (host == "localhost" or is_loopback(host)):
        raise Forbidden(
            "a request from a web page of another origin: without proxy keys, moim answers "
            "only pages served from loopback",
            code="foreign_origin",
        )


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable from this machine only (`localhost` included)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
