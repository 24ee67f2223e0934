"""The fake provider's endpoints beyond chat: what moim passes through without memory.

``tests/upstream.py`` serves these beside chat completions and models, for the tests of the
pass-through and of real clients. Every answer is deterministic, so a test can ask the fake
directly and compare the bytes moim relayed with the bytes the fake sends.

- ``POST /v1/embeddings``: one vector per input (a string, a list of strings, a token array or a
  list of token arrays); ``dimensions`` values (default 8), each a multiple of 1/256 in
  [-0.5, 0.5) drawn from a hash of the input, so float32 holds them exactly;
  ``encoding_format: "base64"`` sends them as little-endian float32, as OpenAI does.
- ``POST /v1/completions``: the legacy completion, ``"echo: "`` + the prompt; with
  ``stream: true`` real SSE in 8-character pieces ending with ``data: [DONE]``, one body message
  per event (model ``slow``: 50 ms apart).
- ``POST /v1/moderations``: ``flagged`` when an input contains the word ``forbidden``.
- ``POST /v1/files`` (multipart: ``purpose`` and ``file``), ``GET /v1/files`` (``?purpose=``),
  ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content`` (the uploaded bytes, unchanged),
  ``DELETE /v1/files/{id}``.
- ``POST /v1/audio/speech``: binary "audio": every byte value 0-255, then the input's UTF-8,
  as ``audio/mpeg`` with a ``content-length``.
- ``GET /v1/models/{id}``: the model, or a 404 ``model_not_found``.
"""

import base64
import email.parser
import email.policy
import hashlib
import json
import struct
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

CREATED = 1700000000
DIMENSIONS = 8
PIECE = 8


class OtherEndpoints:
    """The endpoints above; the uploaded files are its only state."""

    def __init__(self, models: tuple[str, ...], stream: Any) -> None:
        self.models = models
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self._stream = stream  # (events, delay) -> a streaming Response, from tests/upstream.py

    def reset(self) -> None:
        self.files.clear()
        self.contents.clear()

    def answer(self, request: Request, body: bytes, parsed: Any) -> Response | None:
        """The reply to a request for one of these endpoints, or None if it is none of them."""
        method, path = request.method, request.url.path
        if method == "POST" and path in JSON_ENDPOINTS:
            if not isinstance(parsed, dict):
                return error(400, "invalid_request_error", "invalid_json", "Body is not JSON.")
            return JSON_ENDPOINTS[path](self, parsed)
        if path == "/v1/files" and method == "POST":
            return self._upload(request.headers.get("content-type", ""), body)
        if path == "/v1/files" and method == "GET":
            return self._list_files(request.query_params.get("purpose"))
        if path.startswith("/v1/files/"):
            return self._file(method, path.removeprefix("/v1/files/"))
        if path.startswith("/v1/models/") and method == "GET":
            return self._model(path.removeprefix("/v1/models/"))
        return None

    def _embeddings(self, body: dict[str, Any]) -> Response:
        inputs = body.get("input")
        if isinstance(inputs, str) or (isinstance(inputs, list) and _is_tokens(inputs)):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            return error(400, "invalid_request_error", "invalid_input", "'input' is required.")
        size = body.get("dimensions") or DIMENSIONS
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, item in enumerate(inputs):
            vector = embedding_of(item, size)
            packed = base64.b64encode(struct.pack(f"<{size}f", *vector)).decode()
            data.append(
                {
                    "object": "embedding",
                    "index": index,
                    "embedding": packed if as_base64 else vector,
                }
            )
        tokens = sum(_token_count(item) for item in inputs)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        model = body.get("model")
        return JSONResponse({"object": "list", "data": data, "model": model, "usage": usage})

    def _completions(self, body: dict[str, Any]) -> Response:
        prompt = body.get("prompt")
        text = "echo: " + (prompt if isinstance(prompt, str) else json.dumps(prompt))
        head = {"id": "cmpl-test", "object": "text_completion", "created": CREATED}
        head["model"] = body.get("model")
        if not body.get("stream"):
            choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            return JSONResponse({**head, "choices": [choice], "usage": usage})
        pieces = [text[i : i + PIECE] for i in range(0, len(text), PIECE)]
        events = []
        for number, piece in enumerate(pieces):
            last = number == len(pieces) - 1
            choice = {"text": piece, "index": 0, "logprobs": None}
            choice["finish_reason"] = "stop" if last else None
            events.append(f"data: {json.dumps({**head, 'choices': [choice]})}\n\n".encode())
        events.append(b"data: [DONE]\n\n")
        return self._stream(events, 0.05 if body.get("model") == "slow" else 0.0)

    def _moderations(self, body: dict[str, Any]) -> Response:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        results = []
        for text in texts:
            flagged = "forbidden" in str(text)
            results.append(
                {
                    "flagged": flagged,
                    "categories": {"violence": flagged},
                    "category_scores": {"violence": 0.99 if flagged else 0.01},
                }
            )
        model = body.get("model") or "omni-moderation-latest"
        return JSONResponse({"id": "modr-test", "model": model, "results": results})

    def _speech(self, body: dict[str, Any]) -> Response:
        audio = speech_of(str(body.get("input", "")))
        return Response(audio, media_type="audio/mpeg")

    def _upload(self, content_type: str, body: bytes) -> Response:
        fields = multipart_fields(content_type, body)
        if "file" not in fields or "purpose" not in fields:
            return error(400, "invalid_request_error", "invalid_file", "'file' and 'purpose'.")
        filename, content = fields["file"]
        file_id = f"file-test-{len(self.files) + 1}"
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": CREATED,
            "filename": filename,
            "purpose": fields["purpose"][1].decode(),
            "status": "processed",
        }
        self.contents[file_id] = content
        return JSONResponse(self.files[file_id])

    def _list_files(self, purpose: str | None) -> Response:
        files = [f for f in self.files.values() if purpose is None or f["purpose"] == purpose]
        return JSONResponse({"object": "list", "data": files, "has_more": False})

    def _file(self, method: str, rest: str) -> Response:
        file_id, _, what = rest.partition("/")
        if file_id not in self.files:
            return error(404, "invalid_request_error", "file_not_found", f"No file {file_id}.")
        if method == "GET" and what == "content":
            return Response(self.contents[file_id], media_type="application/octet-stream")
        if method == "GET" and not what:
            return JSONResponse(self.files[file_id])
        if method == "DELETE" and not what:
            del self.files[file_id], self.contents[file_id]
            return JSONResponse({"id": file_id, "object": "file", "deleted": True})
        return error(404, "invalid_request_error", "unknown_url", f"No route files/{rest}.")

    def _model(self, model_id: str) -> Response:
        if model_id not in self.models:
            message = f"The model '{model_id}' does not exist"
            return error(404, "invalid_request_error", "model_not_found", message)
        return JSONResponse(
            {"id": model_id, "object": "model", "created": CREATED, "owned_by": "test"}
        )


JSON_ENDPOINTS = {
    "/v1/embeddings": OtherEndpoints._embeddings,
    "/v1/completions": OtherEndpoints._completions,
    "/v1/moderations": OtherEndpoints._moderations,
    "/v1/audio/speech": OtherEndpoints._speech,
}


def embedding_of(item: Any, size: int = DIMENSIONS) -> list[float]:
    """The fake's vector for one input: a string or a token array (as JSON)."""
    text = item if isinstance(item, str) else json.dumps(item)
    digest = hashlib.blake2b(text.encode(), digest_size=64).digest()
    return [digest[i % len(digest)] / 256 - 0.5 for i in range(size)]


def speech_of(text: str) -> bytes:
    """The fake's "audio" for a text: all 256 byte values, then the text's UTF-8."""
    return bytes(range(256)) + text.encode()


def multipart_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's fields: name -> (filename or None, raw bytes)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = (part.get_filename(), payload)
    return fields


def error(status: int, kind: str, code: str, message: str) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status)


def _is_tokens(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(v, int) for v in value)


def _token_count(item: Any) -> int:
    return len(item) if isinstance(item, list) else (len(item) + 3) // 4
