"""A fake OpenAI-compatible embeddings server, served for real on a free local port.

moim's tests cannot reach an embedding provider, so `memory.embedder` points at this one
(STYLE.md point 17: a stand-in at moim's edge, everything else real). It answers
``POST /v1/embeddings`` as OpenAI does, deterministically: each text is a hashed bag of its
words in ``dimensions`` dimensions (``DIMENSIONS`` by default, not MiniLM's 384), so texts
that share words have a high cosine and recall through it finds them. It records every call
(the JSON body and the ``Authorization`` header), and can be told to fail:

- ``status`` (e.g. 503) answers every call with that status and an OpenAI-shaped error, or
  with ``error_body`` (any JSON) when that is set;
- ``fail_next`` answers that many next calls with 503, then works again (a retry test);
- ``refuse`` (a word) answers a call with a text holding it with a 400, as a provider refuses
  one input (too long, flagged), and every other call as ever;
- ``padding`` adds that many bytes to each answer (a field OpenAI's has not): a body too
  big to hold;
- ``stop()`` ends the server: calls then find nothing listening.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

DIMENSIONS = 96
_WORD = re.compile(r"[a-z0-9]+")


def bag_of_words(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The fake model: each word adds ±1 at a dimension its hash picks (not normalised)."""
    vector = np.zeros(dimensions, dtype=np.float64)
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "little") % dimensions] += 1.0 if digest[4] & 1 else -1.0
    if not vector.any():
        vector[0] = 1.0
    return [float(x) for x in vector]


@dataclass(frozen=True, slots=True)
class EmbeddingCall:
    """One call as received: its texts, its body, its Authorization header."""

    texts: tuple[str, ...]
    body: dict[str, Any]
    authorization: str | None


class EmbeddingServer:
    """The fake service's state: its base URL, what it received, how it fails."""

    def __init__(self) -> None:
        self.url = ""  # …/v1, set once listening
        self.calls: list[EmbeddingCall] = []
        self.status: int | None = None
        self.error_body: Any = None
        self.fail_next = 0
        self.refuse: str | None = None
        self.padding = 0
        self.app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def texts(self) -> list[str]:
        """Every text embedded so far, in order."""
        return [text for call in self.calls for text in call.texts]

    async def _embeddings(self, request: Request) -> Response:
        body = await request.json()
        inputs = body.get("input")
        texts = (inputs,) if isinstance(inputs, str) else tuple(inputs or ())
        self.calls.append(EmbeddingCall(texts, body, request.headers.get("authorization")))
        if self.fail_next > 0 or self.status is not None:
            status = 503 if self.fail_next > 0 else int(self.status or 503)
            self.fail_next = max(0, self.fail_next - 1)
            error = {"message": "unavailable (test)", "type": "server_error", "code": None}
            answer = {"error": error} if self.error_body is None else self.error_body
            return JSONResponse(answer, status_code=status)
        if self.refuse is not None and any(self.refuse in text for text in texts):
            error = {"message": "input refused (test)", "type": "invalid_request_error"}
            return JSONResponse({"error": {**error, "code": None}}, status_code=400)
        size = int(body.get("dimensions") or DIMENSIONS)
        data = [
            {"object": "embedding", "index": index, "embedding": bag_of_words(text, size)}
            for index, text in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        answer = {"object": "list", "data": data, "model": body.get("model"), "usage": usage}
        if self.padding:
            answer["padding"] = "x" * self.padding
        return JSONResponse(answer)

    def stop(self) -> None:
        """End the server: later calls find nothing listening at its address."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join()
            self._server = None


@contextlib.contextmanager
def serve_embeddings() -> Iterator[EmbeddingServer]:
    """Serve a fresh `EmbeddingServer` on 127.0.0.1 and a free port until the block exits."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    fake = EmbeddingServer()
    fake.url = f"http://{host}:{port}/v1"
    config = uvicorn.Config(fake.app, log_level="warning", lifespan="off", log_config=None)
    server = fake._server = uvicorn.Server(config)
    thread = fake._thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("the fake embeddings server did not start")
        time.sleep(0.001)
    try:
        yield fake
    finally:
        fake.stop()
        sock.close()
