"""Who may call moim, and for which users.

Without proxy keys (`auth.keys`), moim is a pass-through: the client's `Authorization`
goes to the provider. With them, `Authorization: Bearer <proxy key>` is required on every
endpoint but health (a browser's CORS preflight, which carries none, goes through:
`is_preflight`); a key bound to a user speaks only for that user, a key with `users`
for those, and an unbound key or an admin key for any user the request names (CONTRACT.md:
the memory API has the same auth as chat). A request presenting no key is refused before
any comparison. Keys are compared in constant time and never logged. Without proxy keys, a
request a browser makes for a page from elsewhere is refused (`Origin`, `Host`), whatever the
bind: `docker run -p 127.0.0.1:8080:8080` binds 0.0.0.0 inside the container.

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


def sees_account_state(caller: Caller, config: Config) -> bool:
    """Whether a caller may reach what the provider account keeps for all users (files,
    batches, stored responses, conversations): anyone without proxy keys, an admin key, or
    every key with `auth.account_endpoints_for_all_keys`."""
    return caller.key is None or caller.key.admin or config.account_endpoints_for_all_keys


def authenticate(headers: Mapping[str, str], config: Config) -> Caller:
    """The caller of a request, or Unauthorized when proxy keys are configured and absent.

    A metrics key is refused here (403): it may read `/metrics` and nothing else.
    """
    authorization = headers.get("authorization")
    if not config.keys:
        _refuse_foreign_page(headers, config.host)
        return Caller(None, authorization)
    key = _matching_key(headers, config)
    if key.metrics_only:
        raise Forbidden("this key may only read /metrics", code="metrics_key_only")
    return Caller(key, authorization)


def is_preflight(method: str, headers: Mapping[str, str]) -> bool:
    """Whether a request is a browser's CORS preflight: `OPTIONS` with `Origin` and
    `Access-Control-Request-Method`, sent before a cross-origin call with an `Authorization`
    header. A browser never puts credentials on it (it asks whether it may send them), and it
    does nothing: with proxy keys it goes to the provider unauthenticated, so the provider's
    answer says what a browser app may call (`proxy/passthrough.py`), and the call that follows
    needs its key as any other. Without keys it is checked as any request is."""
    return (
        method == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers
    )


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


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` value, "" for another value or none.
    The scheme's name is case-insensitive (RFC 9110 §11.1): some clients send `bearer`."""
    if authorization and authorization[:7].lower() == "bearer ":
        return authorization[7:].strip()
    return ""


def _matching_key(headers: Mapping[str, str], config: Config) -> ProxyKey:
    """The configured key the request presents, or Unauthorized."""
    presented = bearer_token(headers.get("authorization"))
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


def _refuse_foreign_page(headers: Mapping[str, str], bind: str) -> None:
    """Refuse a browser's request made for a web page from elsewhere (403), as `/mcp` does.

    Without proxy keys, nothing else stops a page the user visits: a form, or `fetch` in
    `no-cors` mode, sends a POST to moim unasked (its answer is unreadable, but it is acted
    on: a fact planted, history imported, a chat sent on the configured provider key), and a
    page whose DNS name is rebound to moim's address reads the answers too (the whole memory,
    through `/v1/memory/export`: a same-origin GET carries no `Origin`). A browser names the
    page's origin in `Origin`, which must be a loopback name on any bind; other clients send
    none. The name it connected to is in `Host`: on a loopback bind it must be a loopback
    name, on any other one a name no public DNS answers (`_private_name`), since rebinding
    needs a name the page's owner resolves.
    """
    origin, host = headers.get("origin"), headers.get("host")
    if origin is not None and not _loopback_name(origin.strip()):
        raise Forbidden(
            "a request from a web page of another origin: without proxy keys, moim answers "
            "only pages served from loopback",
            code="foreign_origin",
        )
    if host is None:
        return
    name = _host_name("//" + host.strip())
    if is_loopback(bind) and not _loopback_name("//" + host.strip()):
        raise Forbidden(
            f"the host name {host!r} is not a loopback name: without proxy keys, moim on "
            "loopback answers requests for 127.0.0.1, localhost or [::1] only",
            code="foreign_host",
        )
    if not is_loopback(bind) and not (name == bind.lower() or _private_name(name)):
        raise Forbidden(
            f"the host name {host!r} is a public DNS name: without proxy keys, moim answers "
            "requests for an IP address, a name without a dot, a .local, .internal, "
            ".localhost or .home.arpa name, or its configured host only (set auth.keys to "
            "serve it by any name)",
            code="foreign_host",
        )


# Names no public DNS server answers (RFC 6761, 6762, 8375; ICANN's .internal): a page's owner
# cannot rebind them.
_PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa")


def _private_name(name: str) -> bool:
    """Whether a host name (lowercase, no port) is an IP address, a name without a dot (a
    container's or a machine's on its network) or one under a special-use suffix."""
    if not name:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return "." not in name.rstrip(".") or name.rstrip(".").endswith(_PRIVATE_SUFFIXES)


def _host_name(url: str) -> str:
    """The host `url` (an origin, or `//host:port`) names, lowercase; "" when none."""
    try:
        return urlsplit(url).hostname or ""  # "null" (a sandboxed page's origin) names none
    except ValueError:
        return ""


def _loopback_name(url: str) -> bool:
    """Whether `url` (an origin, or `//host:port`) names a loopback host."""
    host = _host_name(url)
    return host == "localhost" or is_loopback(host)


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable from this machine only (`localhost` included)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
