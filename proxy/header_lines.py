"""Which header lines cross moim, each way: the client's that go on to the provider, and the
provider's that come back to the client.

Both ways a line goes as it was sent, its bytes and its repeats kept: a value is not decoded
(a UTF-8 "Café" or "✓" survives), and a name sent twice stays two lines (two `Set-Cookie`
joined by ", " are one cookie broken at its `Expires` date). What stops at moim: the
connection's own lines (hop-by-hop, and those a `Connection` header names), what moim sets
itself (lengths, codings, its `x-request-id`, `x-memory-*`), and the credentials, which moim
chooses (`proxy.upstream.provider_key`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence

import httpx
from starlette.responses import Response

from proxy.upstream_errors import without_key

# Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, never the next one.
HOP_BY_HOP = frozenset(
    b"connection keep-alive proxy-connection transfer-encoding te trailer upgrade "
    b"proxy-authenticate proxy-authorization".split()
)
# Request headers the client's connection or moim itself owns. `host` and `content-length`
# are set for the upstream's connection; `expect` asks moim (uvicorn answered it); the
# provider key is moim's to choose; `accept-encoding: identity` keeps streams unbuffered.
NOT_FORWARDED = HOP_BY_HOP | {b"host", b"content-length", b"expect", b"accept-encoding"}
# On chat and the Responses API moim also sends its own body (JSON, not compressed) and the
# provider key it chose; `x-api-key` may be a proxy key, and `x-memory-*` are moim's.
NOT_FORWARDED_WITH_MEMORY = NOT_FORWARDED | {
    b"content-type",
    b"content-encoding",
    b"authorization",
    b"x-api-key",
}
# The client's pick of the provider account's organisation and project. With proxy keys the
# provider key is the operator's: a client does not choose which of its organisations or
# projects pays, and an OPENAI_ORG_ID the SDK reads from a developer's own environment would
# fail the call on a key outside that organisation.
CLIENT_ACCOUNT = frozenset({b"openai-organization", b"openai-project"})
# The provider's own request id, as moim relays it (`relayed_name`).
UPSTREAM_REQUEST_ID = b"x-upstream-request-id"
# Response headers never relayed: hop-by-hop, or recomputed by our server.
DROPPED_RESPONSE_HEADERS = frozenset(
    b"connection keep-alive transfer-encoding content-length content-encoding date server "
    b"proxy-connection upgrade".split()
)


def client_lines(
    lines: Iterable[tuple[bytes, bytes]], dropped: Collection[bytes]
) -> list[tuple[bytes, bytes]]:
    """The client's header lines that go on to the provider, duplicates and order kept: all
    but `dropped`, those the client's `Connection` names (hop-by-hop for its connection), and
    moim's own `x-memory-*`. A gateway between moim and the provider gets what the client
    sent it (Helicone-Auth, x-portkey-*, Azure's api-key, OpenRouter's HTTP-Referer)."""
    lines = list(lines)
    connection = {
        token.strip().lower()
        for name, value in lines
        if name == b"connection"
        for token in value.split(b",")
        if token.strip()
    }
    return [
        (name, value)
        for name, value in lines
        if name not in dropped and name not in connection and not name.startswith(b"x-memory-")
    ]


def relayed_lines(response: httpx.Response) -> list[tuple[bytes, bytes]]:
    """The provider's response header lines that the client should see, each as the provider
    sent it: its value's bytes (a UTF-8 value stays UTF-8; httpx would decode it, and "✓"
    could then not be sent at all), and a name sent twice as two lines (two `Set-Cookie`
    joined into one line are one broken cookie: an `Expires` date holds a comma)."""
    lines = provider_lines(response)
    return [(name, value) for name, value in lines if name not in DROPPED_RESPONSE_HEADERS]


def provider_lines(response: httpx.Response) -> Iterator[tuple[bytes, bytes]]:
    """Every header line of the provider's response, named as the client gets it, and the
    provider key moim sent masked in its value, should the provider quote it there (a
    `WWW-Authenticate` naming the token it refused)."""
    sent = response.request.headers.get("authorization")
    for name, value in response.headers.raw:
        yield relayed_name(name), without_key(value, sent)


def relayed_name(name: bytes) -> bytes:
    """A provider's response header's name as the client gets it: lower case, and its
    `x-request-id` as `x-upstream-request-id` (moim's own is `x-request-id`; the provider's is
    the one its support asks for, and the SDK's `_request_id` showed moim's)."""
    name = name.lower()
    return UPSTREAM_REQUEST_ID if name == b"x-request-id" else name


def with_provider_headers(answer: Response, upstream: httpx.Response) -> Response:
    """`answer` (moim's own headers set) with the provider's header lines added, but for the
    names moim sets itself (`x-request-id`, `x-memory-*`, the body's length)."""
    own = {name for name, _ in answer.raw_headers}
    answer.raw_headers.extend(line for line in relayed_lines(upstream) if line[0] not in own)
    return answer


def without_account(
    lines: Sequence[tuple[bytes, bytes]], proxy_keys: bool
) -> Sequence[tuple[bytes, bytes]]:
    """`lines` without the client's `CLIENT_ACCOUNT` headers when proxy keys are set."""
    if not proxy_keys:
        return lines
    return [(name, value) for name, value in lines if name not in CLIENT_ACCOUNT]
