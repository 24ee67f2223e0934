"""Requests that arrive while the embedding model is still loading.

On a first start moim converts and loads the bundled model (seconds). A chat request in that
time must not wait for it: it goes through with the user's facts (they need no model), no
excerpts, and says so in `x-memory-error`. Readiness answers 503 until the model is loaded.
"""

import threading

import httpx
import openai

from memory import Journal, MemoryLayer, Settings, Turn
from proxy.app import build_app
from proxy.config import Config
from tests.conftest import serve_app, wait_ready
from tests.e2e.test_crash import Server
from tests.e2e.test_recall import block_in


def test_a_request_during_model_load_gets_facts_without_waiting(tmp_path, upstream, embedder):
    serving, loading, release, layer = serving_while_loading(tmp_path, upstream, embedder, 5.0)
    layer.set_fact("dana", "profile:name", "Dana")
    try:
        with serving as root:
            assert loading.wait(timeout=30)
            assert httpx.get(root + "/health/readiness").status_code == 503
            headers = ask(root, "What is my name?")

            assert "still loading" in headers["x-memory-error"]
            assert "Dana" in block_in(upstream.last_json["messages"])
            assert headers["x-memory-chunks-injected"] == "0"
            assert not layer.ready  # the model did not load on the request path

            release.set()
            wait_ready(root)
            headers = ask(root, "What is my name?")
            assert "x-memory-error" not in headers
    finally:
        release.set()


def ask(root, text):
    """One chat as user "dana"; moim's response headers. A short timeout: a request that
    waited for the model would fail the test, not hang it."""
    with openai.OpenAI(
        base_url=root + "/v1", api_key="sk-client", max_retries=0, timeout=10
    ) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Memory-User-Id": "dana"},
        )
    return raw.headers


def test_a_request_as_moim_serve_starts_does_not_load_the_model_itself(tmp_path, upstream):
    """`moim serve` in a process of its own, as deployed. Its warm-up loads the tokenizer first
    (about a second, cold); a chat request that came then found no load under way, loaded the
    model itself on the event loop (the whole server stalled, seconds on a first start) and
    waited for it. It must go on with the user's facts as during the load."""
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"))
    layer.set_fact("dana", "profile:name", "Dana")
    layer.close()
    with Server(tmp_path / "moim.db", upstream.url, tmp_path / "serve.log") as server:
        server.wait("/health")
        headers = ask(server.root, "What is my name?")

        assert "still loading" in headers["x-memory-error"]
        assert "Dana" in block_in(upstream.last_json["messages"])
        server.wait("/health/readiness")
        server.stop()


def chat(root, user, text, **headers):
    """One chat as `user` (a new conversation); moim's response headers."""
    with openai.OpenAI(
        base_url=root + "/v1", api_key="sk-client", max_retries=0, timeout=20
    ) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Memory-User-Id": user, **headers},
        )
    return raw.headers


def serving_while_loading(tmp_path, upstream, embedder, recall_wait):
    """moim serving (to enter) while its model loads until `release` is set; `loading` is set
    once the load has begun; the layer."""
    loading, release = threading.Event(), threading.Event()

    def slow_factory(settings):
        loading.set()
        release.wait(timeout=60)
        return embedder

    settings = Settings(db_path=tmp_path / "m.db")
    layer = MemoryLayer(settings, embedder_factory=slow_factory)
    config = Config(memory=settings, upstream_base_url=upstream.url, recall_wait=recall_wait)
    return serve_app(build_app(config, layer)), loading, release, layer


def test_a_turn_said_while_the_model_loads_is_recalled_once_it_has(tmp_path, upstream, embedder):
    """A client that says something as moim starts and asks about it at once, in another
    conversation: the writer starts once the model is loaded, and the question waits for it
    (`memory.recall_wait`) rather than go on with facts alone, as a user with nothing
    unsaid does (above)."""
    serving, loading, release, _ = serving_while_loading(tmp_path, upstream, embedder, 10.0)
    try:
        with serving as root:
            assert loading.wait(timeout=30)
            chat(root, "kim", "My gym locker code is 31-07-19, the one by the sauna.")
            threading.Timer(0.5, release.set).start()
            headers = chat(root, "kim", "What's my gym locker code?", **{"X-Memory-Mode": "read"})

            assert "31-07-19" in block_in(upstream.last_json["messages"])
            assert "x-memory-error" not in headers
            assert float(headers["x-memory-waited-ms"]) > 0
    finally:
        release.set()


def test_the_wait_for_the_model_ends_at_the_recall_wait(tmp_path, upstream, embedder):
    serving, loading, release, _ = serving_while_loading(tmp_path, upstream, embedder, 0.3)
    try:
        with serving as root:
            assert loading.wait(timeout=30)
            chat(root, "kim", "My gym locker code is 31-07-19, the one by the sauna.")
            headers = chat(root, "kim", "What's my gym locker code?", **{"X-Memory-Mode": "read"})

            assert "still loading" in headers["x-memory-error"]
            assert headers["x-memory-unsearchable-turns"] == "1"
    finally:
        release.set()


def test_a_turn_a_crash_left_in_the_journal_is_waited_for_as_the_server_comes_back(
    tmp_path, upstream, embedder
):
    """`kill -9` right after an answer: the turn is in the journal only. The next start
    replays it once the model is loaded; a question about it asked at once waits for that
    (`RecentTurns.add_left`) rather than go on without it."""
    said = {"role": "user", "content": "My storage unit code is QX-5512-KL, don't let me lose it."}
    reply = {"role": "assistant", "content": "Got it."}
    left = Journal(tmp_path / "m.db.journal")
    left.append(Turn("kim", "s-before", "gpt-4o-mini", (said,), reply, 1_700_000_000.0))
    serving, loading, release, _ = serving_while_loading(tmp_path, upstream, embedder, 10.0)
    try:
        with serving as root:
            assert loading.wait(timeout=30)
            threading.Timer(0.5, release.set).start()
            headers = chat(root, "kim", "What's my storage unit code?", **{"X-Memory-Mode": "read"})

            assert "QX-5512-KL" in block_in(upstream.last_json["messages"])
            assert float(headers["x-memory-waited-ms"]) > 0
    finally:
        release.set()
