"""Request limits: request heads over `server.max_header_bytes` get a 431, bodies over
`server.max_body_bytes` a 413, bodies too slow a 408, all in OpenAI's error shape. A body
sent compressed (`Content-Encoding: gzip` or `deflate`, as some SDKs and proxies send it) is
read decompressed, the limit applying to what it decompresses to; another encoding is a 415.

uvicorn's HTTP parser refuses a request head still incomplete past its own limit with a
bare-text 400 (h11 by itself; httptools through moim's protocol, proxy/serving_httptools.py).
moim checks first, at a lower limit (16 KiB by default), in `HeaderLimit`, and answers like
the rest of its errors; `moim serve` sets the parser's limit to four times moim's so that only
absurd heads reach the plain refusal (a head's time limit is in proxy/serving.py). Every
handler that reads a body reads it through `read_body` (chat, `POST /v1/memory/facts`,
`POST /v1/memory/import`), which also bounds how long a body may take, and turns a client
that leaves mid-body into one log line instead of a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
import zlib
from collections.abc import Iterable

from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.errors import (
    BadRequest,
    ClientClosed,
    PayloadTooLarge,
    ProxyError,
    RequestTimeout,
    UnsupportedMediaType,
)

logger = logging.getLogger(__name__)

# A client's x-request-id longer than this is not echoed on a 431: it may be the oversized one.
MAX_REQUEST_ID = 256
# Past `server.body_timeout`, a body must have come at least this fast on average (bytes/s),
# as Apache's mod_reqtimeout asks of a body (MinRate); below it is a client holding a socket.
MIN_BODY_RATE = 1024


class HeadersTooLarge(ProxyError):
    status = 431
    type = "invalid_request_error"


def parser_limit(max_header_bytes: int) -> int:
    """The parser's limit to run uvicorn with, so moim's own check answers first."""
    return 4 * max_header_bytes


async def read_body(request: Request, limit: int, timeout: float, decode: bool = True) -> bytes:
    """The body, refusing more than `limit` bytes without reading it all; decompressed as its
    `Content-Encoding` says (`decode`; the pass-through relays the bytes as they came).

    A body must keep coming: a 408, and the connection closes, when no byte has come for
    `timeout` seconds, or when, `timeout` seconds in, fewer than `MIN_BODY_RATE` bytes a
    second have come on average (a client dripping a byte every few seconds is one that
    stopped). A slow link sending a large body at a steady pace above the rate goes on.
    """
    declared = request.headers.get("content-length")
    expected = int(declared) if declared and declared.isdigit() else None
    if expected is not None and expected > limit:
        raise PayloadTooLarge(f"request body is over {limit} bytes", code="payload_too_large")
    chunks, size = [], 0
    loop = asyncio.get_running_loop()  # moim serves on asyncio (uvicorn)
    started = loop.time()
    try:
        # asyncio's own timer: entered and left in ~4 µs, anyio's cancel scope in ~9-20
        async with asyncio.timeout(timeout) as scope:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(
                        f"request body is over {limit} bytes", code="payload_too_large"
                    )
                chunks.append(chunk)
                if expected is None or size < expected:  # more to wait for (not the last)
                    scope.reschedule(
                        min(loop.time() + timeout, started + timeout + size / MIN_BODY_RATE)
                    )
    except TimeoutError:
        waited = loop.time() - started
        raise RequestTimeout(
            f"the request body stopped arriving: {size} bytes in {waited:.0f} s"
            f" (server.body_timeout: {timeout:g} s)"
        ) from None
    except ClientDisconnect:
        raise _client_left(request, size) from None
    raw = b"".join(chunks)
    encoding = request.headers.get("content-encoding")
    return decoded(raw, encoding, limit) if decode and encoding else raw


# Content codings read (RFC 9110 §8.4.1): gzip and deflate (zlib's format; a raw deflate
# stream, which some clients send as "deflate", too). wbits 47 reads a gzip or zlib header.
_CODINGS = {"gzip": 47, "x-gzip": 47, "deflate": 47, "identity": None}


def decoded(raw: bytes, encoding: str, limit: int) -> bytes:
    """`raw` decompressed as `encoding` (a `Content-Encoding` value, codings in the order they
    were applied), refused past `limit` bytes decompressed, without inflating more than that."""
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    for coding in reversed(codings):
        if coding not in _CODINGS:
            raise UnsupportedMediaType(
                f"Content-Encoding {coding!r} is not supported: send the body as is, "
                "or compressed with gzip or deflate",
                code="unsupported_content_encoding",
            )
        wbits = _CODINGS[coding]
        if wbits is not None:
            raw = _inflate(raw, wbits, limit, coding)
    return raw


def _inflate(raw: bytes, wbits: int, limit: int, coding: str) -> bytes:
    for bits in (wbits, -zlib.MAX_WBITS) if coding == "deflate" else (wbits,):
        inflater = zlib.decompressobj(bits)
        try:
            data = inflater.decompress(raw, limit + 1)
        except zlib.error:
            continue
        if len(data) > limit or inflater.unconsumed_tail:
            raise PayloadTooLarge(
                f"request body is over {limit} bytes decompressed", code="payload_too_large"
            )
        if inflater.eof and not inflater.unused_data:
            return data
    raise BadRequest(
        f"the body is not valid {coding} data (Content-Encoding: {coding})",
        code="invalid_content_encoding",
    )


def _client_left(request: Request, size: int) -> ClientClosed:
    """A client gone mid-body: one log line (Starlette's ClientDisconnect went unhandled, and
    uvicorn logged a full traceback for every dropped upload)."""
    logger.info(
        "%s %s: the client left while sending its body (%d of %s bytes read)",
        request.method,
        request.url.path,
        size,
        request.headers.get("content-length", "?"),
    )
    return ClientClosed("the client closed the connection", code="client_closed")


class HeaderLimit:
    """Pure ASGI middleware: refuse HTTP requests whose headers total more than `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])
            if size > self.max_bytes:
                error = HeadersTooLarge(
                    f"request headers are {size} bytes, over the limit of {self.max_bytes}",
                    code="headers_too_large",
                )
                await _answer(send, error, _request_id(scope["headers"]))
                return
        await self.app(scope, receive, send)


def _request_id(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The client's `x-request-id` as chat echoes it, unless it is what is oversized."""
    for name, value in headers:
        if name == b"x-request-id" and 0 < len(value) <= MAX_REQUEST_ID:
            return value
    return uuid.uuid4().hex.encode()


async def _answer(send: Send, error: ProxyError, request_id: bytes) -> None:
    body = json.dumps(error.body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-request-id", request_id),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
