"""A remote embedder (`memory.embedder`) through the real proxy.

moim embeds through tests/embedding_server.py, a real local OpenAI-compatible `/v1/embeddings`
server whose vectors are hashed bags of words in 96 dimensions (not MiniLM's 384), recording
every call. The official openai SDK talks to moim, moim to the fake upstream.
"""

import time
from contextlib import contextmanager
from dataclasses import replace

import httpx
import pytest

from memory import MemoryLayer, Settings
from proxy.app import build_app
from proxy.config import Config, EmbedderConfig
from proxy.embedding_service import embedder_factory
from tests.conftest import serve_app, wait_ready
from tests.e2e.test_recall import block_in, remember, say
from tests.embedding_server import DIMENSIONS, serve_embeddings

KEY = "sk-embed-secret-456"
BEES = "My sister Ingrid keeps bees on an island near Uppsala"
BEES_QUESTION = "Where does my sister Ingrid keep her bees?"
BIKE = "I repaired the chain of my old bicycle yesterday evening"


@pytest.fixture
def embeddings():
    with serve_embeddings() as server:
        yield server


def remote(server, **fields):
    fields.setdefault("retries", 0)
    return EmbedderConfig(model="test-bow", api_base=server.url, api_key=KEY, **fields)


def ask(proxy, question, user="ana", **headers):
    """Ask in a new conversation that only reads memory; moim's response headers."""
    return say(proxy, [{"role": "user", "content": question}], user, X_Memory_Mode="read")


@pytest.mark.both_backends
def test_turns_are_embedded_by_the_remote_model_and_recall_uses_it(
    make_proxy, upstream, embeddings
):
    proxy = make_proxy(embedder=remote(embeddings))
    remember(proxy, "ana", BEES, BIKE)

    before = len(embeddings.calls)
    headers = ask(proxy, BEES_QUESTION)
    proxy.flush()

    assert BEES in block_in(upstream.last_json["messages"])
    assert "x-memory-error" not in headers
    stored = embeddings.texts()
    assert any(BEES in text for text in stored) and any(BIKE in text for text in stored)
    asked = [call.texts for call in embeddings.calls[before:]]
    assert asked == [(BEES_QUESTION,)]  # the query's one call; the writer stores nothing new
    assert {call.authorization for call in embeddings.calls} == {f"Bearer {KEY}"}
    assert (proxy.layer.embedder.name, proxy.layer.embedder.dim) == ("test-bow", DIMENSIONS)
    assert proxy.layer.store.dim == DIMENSIONS
    scraped = metrics(proxy)
    assert 'moim_embedding_service_texts_total{kind="document"} 4.0' in scraped
    assert 'moim_embedding_service_seconds_total{kind="query"}' in scraped
    assert "moim_vector_rebuild_pending 0.0" in scraped


def test_the_key_and_no_client_field_reach_the_embedding_service(make_proxy, upstream, embeddings):
    proxy = make_proxy(embedder=remote(embeddings, dimensions=DIMENSIONS))
    with proxy.client() as client:
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": BEES_QUESTION}],
            user="ana",
            extra_body={"dimensions": 7, "api_base": "http://elsewhere/v1"},
        )
    proxy.flush()

    bodies = [call.body for call in embeddings.calls]
    assert bodies and {tuple(sorted(body)) for body in bodies} == {("dimensions", "input", "model")}
    assert {body["dimensions"] for body in bodies} == {DIMENSIONS}
    assert {body["model"] for body in bodies} == {"test-bow"}


def test_an_unreachable_embedder_at_query_time_recalls_by_keywords(
    make_proxy, upstream, embeddings
):
    proxy = make_proxy(embedder=remote(embeddings, dimensions=DIMENSIONS))
    remember(proxy, "ana", BEES, BIKE)
    embeddings.stop()

    headers = ask(proxy, BEES_QUESTION)

    assert headers["x-memory-error"] == "embedder unavailable: keyword recall only"
    assert BEES in block_in(upstream.last_json["messages"])
    assert headers["x-memory-chunks-injected"] == "1"


def test_turns_wait_while_the_embedder_fails_and_none_is_lost(
    make_proxy, upstream, embeddings, caplog
):
    proxy = make_proxy(embedder=remote(embeddings, dimensions=DIMENSIONS))
    embeddings.status = 503
    say(proxy, [{"role": "user", "content": BEES}], "ana")
    say(proxy, [{"role": "user", "content": BIKE}], "ana")

    failing = wait_for(lambda: readiness(proxy).get("writer"))
    assert "index failing" in failing
    assert stats(proxy)["messages"] == 4 and stats(proxy)["chunks"] == 0
    [logged] = [r for r in caplog.records if r.name == "proxy.writer_health"]
    assert logged.getMessage().startswith("memory writer: index failed (EmbeddingFailed: ")
    assert logged.exc_info is None  # its line says why; no 30 lines of frames

    embeddings.status = None  # the writer tries again (after 1 s, 2 s, …) and indexes them
    wait_for(lambda: stats(proxy)["chunks"] == 4)
    wait_for(lambda: "writer" not in readiness(proxy))
    ask(proxy, BEES_QUESTION)
    assert BEES in block_in(upstream.last_json["messages"])


def test_turns_the_embedder_failed_to_index_stay_pending_until_it_works(
    make_proxy, upstream, embeddings
):
    """A failed indexing pass counted its turns as done: flush, stats and /metrics said 0
    pending while the turns had no chunk. They stay pending until a pass indexes them."""
    proxy = make_proxy(embedder=remote(embeddings, dimensions=DIMENSIONS))
    embeddings.status = 503
    say(proxy, [{"role": "user", "content": BEES}], "ana")

    flushed = httpx.post(proxy.root + "/v1/memory/flush", timeout=60)
    assert flushed.status_code == 503, flushed.text
    assert flushed.json()["flushed"] is False and flushed.json()["pending"] == 1
    assert flushed.json()["writer"].startswith("index failing for ")
    assert stats(proxy)["chunks"] == 0 and stats(proxy)["pending"] == 1
    assert "\nmoim_ingest_pending 1.0\n" in metrics(proxy)

    embeddings.status = None  # the next pass indexes them: flush says all is done
    flushed = httpx.post(proxy.root + "/v1/memory/flush", timeout=60)
    assert flushed.json() == {"flushed": True, "pending": 0}
    assert stats(proxy)["chunks"] == 2 and "\nmoim_ingest_pending 0.0\n" in metrics(proxy)


@pytest.mark.both_backends
def test_a_turn_the_embedder_always_refuses_is_set_aside_and_the_rest_is_indexed(
    make_proxy, upstream, embeddings
):
    """A text the service refused failed every indexing pass, and the pass with it: that
    turn, and every turn after it, stayed pending forever, flush answered 503 every time.
    Now it is tried alone, set aside after a few failures while other texts embed, and
    counted; flush returns once the rest is indexed, saying how many were set aside."""
    proxy = make_proxy(embedder=remote(embeddings, dimensions=DIMENSIONS))
    embeddings.refuse = "zeppelin"
    say(proxy, [{"role": "user", "content": BEES}], "ana")
    say(proxy, [{"role": "user", "content": "My zeppelin is moored at hangar nine"}], "ana")
    say(proxy, [{"role": "user", "content": BIKE}], "ana")

    def flushed():
        answer = httpx.post(proxy.root + "/v1/memory/flush", timeout=60)
        return answer.status_code == 200 and answer.json()

    assert wait_for(flushed, timeout=120) == {"flushed": True, "pending": 0, "failed": 2}
    counts = stats(proxy)  # the turn's question and its reply (which quotes it)
    assert (counts["messages"], counts["chunks"], counts["failed"]) == (6, 4, 2)
    assert "\nmoim_ingest_failed 2.0\n" in metrics(proxy)
    assert "writer" not in readiness(proxy)
    ask(proxy, "What did I repair on my old bicycle?")
    assert BIKE in block_in(upstream.last_json["messages"])


def test_an_embedder_unreachable_at_start_is_one_line_in_the_log(
    tmp_path, upstream, embeddings, caplog
):
    embeddings.stop()
    config = Config(
        memory=Settings(db_path=tmp_path / "moim.db"),
        upstream_base_url=upstream.url,
        embedder=remote(embeddings),  # no dimensions: loading asks the service for them
    )
    with serving(config):
        wait_for(lambda: [r for r in caplog.records if r.name == "proxy.app"])

    [logged] = [r for r in caplog.records if r.name == "proxy.app"]
    assert logged.getMessage() == (
        f"embedding model failed to load (embedding service at {embeddings.url}/embeddings: "
        "no answer (ConnectError)); memory will fail open"
    )
    assert logged.exc_info is None


@pytest.mark.both_backends
def test_a_new_embedder_rebuilds_the_vectors_and_recall_works_after(
    tmp_path, upstream, embeddings, embedder, store_backend, request, caplog
):
    settings = Settings(db_path=tmp_path / "moim.db")
    if store_backend == "postgres":
        settings = replace(settings, db_url=request.getfixturevalue("pg_database")())
    with serving(Config(memory=settings, upstream_base_url=upstream.url), embedder) as proxy:
        remember(proxy, "ana", BEES, BIKE)  # with the bundled MiniLM: 384 dimensions

    embeddings.status = 503  # the rebuild cannot start yet
    config = Config(
        memory=settings, upstream_base_url=upstream.url, embedder=remote(embeddings, dimensions=96)
    )
    with serving(config) as proxy:
        state = wait_for(lambda: readiness(proxy).get("vector_rebuild"))
        assert state == {"from": state["from"], "to": "test-bow (96)", "done": 0, "total": 4}
        assert state["from"].startswith("sentence-transformers/all-MiniLM-L6-v2")
        assert "embedding model changed from" in caplog.text
        assert "moim_vector_rebuild_pending 4.0" in metrics(proxy)

        headers = ask(proxy, BEES_QUESTION)  # meanwhile: keywords, no query embedding
        assert BEES in block_in(upstream.last_json["messages"])
        assert "x-memory-error" not in headers
        assert BEES_QUESTION not in embeddings.texts()

        embeddings.status = None
        wait_for(lambda: "vector_rebuild" not in readiness(proxy) and proxy.ready())
        headers = ask(proxy, BEES_QUESTION)

        assert BEES in block_in(upstream.last_json["messages"])
        assert embeddings.texts().count(BEES_QUESTION) == 1  # now dense recall asks for it
        assert proxy.layer.store.dim == 96
        vectors = proxy.layer.store.user_vectors("ana")
        assert len(vectors[0]) == 4 and vectors[1].shape[1] == 96


# -- helpers -------------------------------------------------------------------------------------


class Served:
    """A proxy served by `serving`: its root URL and layer, and the calls tests make."""

    def __init__(self, root, layer, config):
        self.root, self.url, self.layer, self.config = root, root + "/v1", layer, config

    def client(self):
        import openai

        return openai.OpenAI(base_url=self.url, api_key="sk-client", max_retries=0)

    def flush(self):
        assert httpx.post(self.root + "/v1/memory/flush", timeout=60).status_code == 200

    def ready(self):
        return httpx.get(self.root + "/health/readiness").status_code == 200


@contextmanager
def serving(config, embedder=None):
    """The real app for `config` until the block ends (the session's MiniLM if given, else
    the embedder the config names), its layer closed after."""
    factory = (lambda _: embedder) if embedder is not None else embedder_factory(config)
    layer = MemoryLayer(config.memory, embedder_factory=factory)
    try:
        with serve_app(build_app(config, layer)) as root:
            if embedder is not None:
                wait_ready(root)
            yield Served(root, layer, config)
    finally:
        layer.close()


def readiness(proxy):
    return httpx.get(proxy.root + "/health/readiness").json()


def metrics(proxy):
    return httpx.get(proxy.root + "/metrics").text


def stats(proxy):
    return httpx.get(proxy.root + "/v1/memory/stats", headers={"X-Memory-User-Id": "ana"}).json()


def wait_for(probe, timeout=30.0):
    """Poll `probe` until it returns something true; return that."""
    deadline = time.monotonic() + timeout
    while not (found := probe()):
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)
    return found


def test_with_prefixes_a_question_is_embedded_again_as_a_stored_message(
    make_proxy, upstream, embeddings
):
    chosen = remote(
        embeddings, dimensions=DIMENSIONS, query_prefix="query: ", document_prefix="passage: "
    )
    proxy = make_proxy(embedder=chosen)
    remember(proxy, "ana", BIKE)  # something stored, so the next request embeds its question

    long = BEES + " and every summer she sells the heather honey at the market by the river"
    say(proxy, [{"role": "user", "content": long}], "ana")  # 20 words: embedded alone
    proxy.flush()

    texts = embeddings.texts()
    assert texts.count("query: " + long) == 1  # recall's
    assert texts.count("passage: " + long) == 1  # the writer's: not the query's vector
