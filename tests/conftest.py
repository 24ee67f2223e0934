"""Shared fixtures: real servers on free ports, fakes only at moim's edges (STYLE.md point 17).

- ``upstream``: the fake OpenAI-compatible provider of ``tests/upstream.py``, one server per
  session, its recorded requests and script cleared before every test that uses it.
- ``embedder``: the real bundled embedding model, loaded once per session.
- ``make_proxy`` / ``proxy``: the real moim app under uvicorn on a free port, with a fresh
  temporary database, in front of ``upstream``.
"""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn

from memory import Embedder, FastEmbedder, MemoryLayer, Settings
from proxy.app import build_app
from proxy.config import Config
from proxy.serving import uvicorn_options
from tests.upstream import Upstream, serve_upstream


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, as moim does under uvicorn (trio may be installed too)."""
    return "asyncio"


@pytest.fixture(scope="session")
def upstream() -> Iterator[Upstream]:
    with serve_upstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_upstream(request: pytest.FixtureRequest) -> None:
    """Reset the session's upstream for each test that uses it, directly or through a fixture."""
    if "upstream" in request.fixturenames:
        request.getfixturevalue("upstream").reset()


# -- the real proxy ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real bundled embedding model, loaded once per test session (~1 s)."""
    return FastEmbedder()


@dataclass
class Proxy:
    """A running moim: its base URL (`…/v1`), root URL, config, and memory layer."""

    url: str
    root: str
    config: Config
    layer: MemoryLayer

    def client(self, **kwargs: Any) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=self.url, api_key=kwargs.pop("api_key", "sk-client"), max_retries=0, **kwargs
        )

    def async_client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.url, api_key=kwargs.pop("api_key", "sk-client"), max_retries=0, **kwargs
        )

    def flush(self) -> None:
        response = httpx.post(
            self.root + "/v1/memory/flush", timeout=60, headers=self.admin_headers()
        )
        assert response.status_code == 200, response.text

    def admin_headers(self) -> dict[str, str]:
        admins = [k.key for k in self.config.keys if k.admin]
        return {"authorization": f"Bearer {admins[0]}"} if admins else {}


@contextmanager
def serve_app(app: Any, **options: Any) -> Iterator[str]:
    """Run an ASGI app under uvicorn in a thread on a free loopback port; yield its root URL.

    `options` go to `uvicorn.Config`: a moim app is served with `uvicorn_options(config)`,
    as `moim serve` serves it. The socket is created with IPPROTO_TCP so asyncio sets
    TCP_NODELAY on accepted connections, as on a real server (a proto-0 socket leaves Nagle
    on).
    """
    options.setdefault("h11_max_incomplete_event_size", 64 * 1024)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", log_config=None, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("proxy did not start")
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def wait_ready(root: str, timeout: float = 30) -> None:
    """Until `/health/readiness` answers 200, as a deployment's readiness probe would."""
    deadline = time.monotonic() + timeout
    while httpx.get(root + "/health/readiness").status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("proxy did not become ready")
        time.sleep(0.005)


@pytest.fixture
def make_proxy(tmp_path: Path, upstream: Upstream, embedder: Embedder) -> Iterator[Any]:
    """A factory: `make_proxy(**config_fields)` starts a proxy with a fresh database.

    Defaults: the fake upstream as `upstream_base_url`, a temporary SQLite file, the real
    embedding model. `memory=Settings(...)` fields may be given as `settings={...}`.
    """
    stack = ExitStack()

    def start(settings: dict[str, Any] | None = None, **fields: Any) -> Proxy:
        memory = Settings(
            db_path=tmp_path / f"moim-{len(stack._exit_callbacks)}.db", **(settings or {})
        )
        fields.setdefault("upstream_base_url", upstream.url)
        config = Config(memory=memory, **fields)
        layer = MemoryLayer(memory, embedder_factory=lambda _: embedder)
        root = stack.enter_context(serve_app(build_app(config, layer), **uvicorn_options(config)))
        wait_ready(root)
        return Proxy(root + "/v1", root, config, layer)

    with stack:
        yield start


@pytest.fixture
def proxy(make_proxy: Any) -> Proxy:
    """A proxy with default settings in front of the fake upstream."""
    return make_proxy()
