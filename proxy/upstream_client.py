"""The pooled client moim forwards with: httpx's API over aiohttp's connections.

Every upstream call goes through one `httpx.AsyncClient` (`AppState.client`), whose transport
is `AiohttpTransport` (proxy/aiohttp_transport.py: aiohttp's C parser and pool, about half the
event loop's CPU of httpx's own transport a request). When the environment names a proxy
(HTTP_PROXY, HTTPS_PROXY, ALL_PROXY), httpx's own transport is kept, since it is httpx that
reads those (and NO_PROXY) as users of httpx expect.

`send` is how a request goes out on the client: once more, on a new connection, when a pooled
one turns out to be stale.

httpx logs each request's URL at INFO; credentials a base URL carries (`user:password@`) are
taken out of that line (`_NoUrlCredentials`), as the banner takes them out of the upstream it
names. httpcore's DEBUG lines, which hold every response's headers, are not logged.
"""

from __future__ import annotations

import logging
import os
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from proxy.aiohttp_transport import AiohttpTransport
from proxy.config import Config

logger = logging.getLogger(__name__)


class _NoUrlCredentials(logging.Filter):
    """httpx's "HTTP Request: POST <url>" line without the URL's `user:password@`: a base URL
    may carry a gateway's credentials, and the line is logged at INFO, the default level."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                arg.copy_with(userinfo=b"") if isinstance(arg, httpx.URL) and arg.userinfo else arg
                for arg in record.args
            )
        return True


logging.getLogger("httpx").addFilter(_NoUrlCredentials())
# httpcore (httpx's own transport: a proxy in the environment, the embedding service) logs each
# response's header lines at DEBUG, a provider's Set-Cookie among them: it logs from WARNING up
# whatever `--log-level` says, as litellm's loggers do (proxy/upstream.py).
_HEADER_LINES = logging.getLogger("httpcore")
_HEADER_LINES.setLevel(max(_HEADER_LINES.getEffectiveLevel(), logging.WARNING))

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
MAX_CONNECTIONS = 1000


def upstream_client(config: Config) -> httpx.AsyncClient:
    """The one client every upstream call goes through (`AppState.client`)."""
    timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)
    return _client(timeout, on_aiohttp=not proxy_in_environment(os.environ))


def _client(timeout: httpx.Timeout, on_aiohttp: bool, keep_alive: bool = True) -> httpx.AsyncClient:
    """httpx over `AiohttpTransport`, or over its own transport (which reads the environment's
    proxy); without `keep_alive`, a new connection for each request, kept by none."""
    if on_aiohttp:
        transport = AiohttpTransport(
            ssl_context=httpx.create_ssl_context(),
            max_connections=MAX_CONNECTIONS,
            keep_alive=keep_alive,
        )
        return httpx.AsyncClient(timeout=timeout, transport=transport, cookies=no_cookies())
    kept = 100 if keep_alive else 0
    limits = httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=kept)
    return httpx.AsyncClient(timeout=timeout, limits=limits, cookies=no_cookies())


def proxy_in_environment(env: os._Environ[str] | dict[str, str]) -> bool:
    """Whether the environment routes outgoing requests through a proxy (httpx reads it)."""
    return any(env.get(name) or env.get(name.upper()) for name in _PROXY_VARIABLES)


# Failures of a connection before any answer came: what a kept-alive connection the server
# closed at the moment it was reused looks like (a reset, or an end of stream).
STALE_CONNECTION = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


async def send(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """`client.send(request, stream=True)`, sent once more on a new connection when the first
    attempt failed before any response header arrived (`STALE_CONNECTION`).

    A server's keep-alive timeout can close an idle pooled connection just as it is reused:
    the request was written, the server answered with a reset or an end of stream (1 request
    in ~1,800 under `bench/load.py` with httpx's pool). Browsers and proxies retry such a
    request once on a fresh connection; so does moim, so a client never sees a 502 for it.
    The pool would hand the retry another idle connection, possibly as stale, so it goes on a
    one-shot client without keep-alive: a new connection, closed when the response is.
    Connect errors and timeouts are not retried: the upstream is down or slow, and a second
    wait would only double the first. The request's body must be bytes (sent twice).
    """
    try:
        return await client.send(request, stream=True)
    except STALE_CONNECTION as exc:
        logger.info("upstream connection failed (%s); retrying on a new one", type(exc).__name__)
    fresh = _one_shot(client)
    try:
        return await fresh.send(request, stream=True)
    except BaseException:
        await fresh.aclose()  # no response will close it
        raise


def _one_shot(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """A client like `client` that opens a new connection and keeps none. httpx's own goes
    through the environment's proxy as `client` does (a transport given to httpx would not)."""
    on_aiohttp = isinstance(client._transport, AiohttpTransport)
    return _client(client.timeout, on_aiohttp, keep_alive=False)


def no_cookies() -> CookieJar:
    """A cookie jar that keeps nothing. One client serves every user: a cookie a provider
    sets on one user's answer (a load balancer's, a session's) would otherwise go out with
    every later request of every user. The client still gets the provider's Set-Cookie."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))
