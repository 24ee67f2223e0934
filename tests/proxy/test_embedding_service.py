"""proxy/embedding_service.py against a real local embeddings server (tests/embedding_server.py).

What the service is sent and how failures are tried again: a query once, documents with
retries; the key goes in `Authorization` and never into an error. litellm's path is the real
litellm, pointed at the same local server through an `openai/…` name.
"""

import inspect
import sys

import numpy as np
import pytest

from memory import EmbeddingFailed, Settings
from proxy import embedding_service
from proxy.config import Config, EmbedderConfig
from proxy.embedding_service import embedder_factory, through_http
from tests.embedding_server import DIMENSIONS, bag_of_words, serve_embeddings

KEY = "sk-embed-secret-123"


@pytest.fixture
def server():
    with serve_embeddings() as fake:
        yield fake


@pytest.fixture
def service_embedder():
    """`proxy.embedding_service.service_embedder`, its connections closed after the test."""
    made = []

    def make(chosen):
        made.append(embedding_service.service_embedder(chosen))
        return made[-1]

    yield make
    for embedder in made:
        embedder.close()
    _close_litellms_sync_clients()


def _close_litellms_sync_clients():
    """`litellm.embedding` keeps the sync SDK client it made in its client cache (ten minutes),
    beyond an embedder's `close`: closed and dropped here, or its socket to this test's server
    stays open until the interpreter's exit, where it was the ResourceWarning printed after
    the full run (the app's gc.freeze keeps such garbage uncollected till then)."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return
    cache = litellm.in_memory_llm_clients_cache
    for key, client in list(cache.cache_dict.items()):
        close = getattr(client, "close", None)
        if callable(close) and not inspect.iscoroutinefunction(close):
            close()
            cache.delete_cache(key)


def config(server, **fields):
    fields.setdefault("retries", 2)
    return EmbedderConfig(model="test-bow", api_base=server.url, api_key=KEY, **fields)


def test_vectors_come_from_the_service_normalised_with_its_width(server, service_embedder):
    embedder = service_embedder(config(server))

    rows = embedder.embed_documents(["bees in Uppsala", "a bicycle chain"])

    expected = np.array([bag_of_words("bees in Uppsala"), bag_of_words("a bicycle chain")])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert embedder.dim == DIMENSIONS and embedder.name == "test-bow"
    np.testing.assert_allclose(rows, expected, rtol=1e-6)
    assert server.calls[0].body == {"model": "test-bow", "input": ["probe"]}  # the width
    assert server.calls[1].body == {
        "model": "test-bow",
        "input": ["bees in Uppsala", "a bicycle chain"],
    }
    assert {call.authorization for call in server.calls} == {f"Bearer {KEY}"}


def test_dimensions_are_sent_and_no_probe_is_needed(server, service_embedder):
    embedder = service_embedder(config(server, dimensions=40))

    assert embedder.dim == 40 and server.calls == []
    assert embedder.embed_query("bees").shape == (40,)
    assert server.calls[0].body == {"model": "test-bow", "input": ["bees"], "dimensions": 40}


def test_documents_go_in_batches_of_batch_size(server, service_embedder):
    embedder = service_embedder(config(server, batch_size=2, dimensions=DIMENSIONS))

    embedder.embed_documents([f"text {n}" for n in range(5)])

    assert [len(call.texts) for call in server.calls] == [2, 2, 1]


def test_a_query_is_sent_once_and_reused_for_the_same_text_stored(server, service_embedder):
    embedder = service_embedder(config(server, dimensions=DIMENSIONS))

    first = embedder.embed_query("Where does Ingrid keep bees?")
    again = embedder.embed_query("Where does Ingrid keep bees?")
    stored = embedder.embed_documents(["Where does Ingrid keep bees?", "new text"])

    assert server.texts() == ["Where does Ingrid keep bees?", "new text"]
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(stored[0], first)


def test_prefixes_are_sent_and_name_another_vector_space(server, service_embedder):
    embedder = service_embedder(
        config(server, dimensions=DIMENSIONS, query_prefix="query: ", document_prefix="passage: ")
    )

    embedder.embed_query("bees")
    embedder.embed_documents(["bees"])  # not the query's vector: another prefix

    assert server.texts() == ["query: bees", "passage: bees"]
    assert embedder.name == "test-bow (query prefix 'query: ', document prefix 'passage: ')"


def test_documents_are_retried_until_the_service_answers(server, service_embedder):
    embedder = service_embedder(config(server, dimensions=DIMENSIONS))
    server.fail_next = 2

    rows = embedder.embed_documents(["bees"])

    assert rows.shape == (1, DIMENSIONS)
    assert len(server.calls) == 3


def test_a_query_is_tried_once_then_fails_fast_for_a_while(server, service_embedder):
    embedder = service_embedder(config(server, dimensions=DIMENSIONS))
    server.status = 503

    with pytest.raises(EmbeddingFailed, match="status 503"):
        embedder.embed_query("bees")
    with pytest.raises(EmbeddingFailed, match="retrying shortly"):
        embedder.embed_query("hives")

    assert len(server.calls) == 1  # the second did not wait for the service


def test_a_refusal_is_not_retried_and_its_message_never_holds_the_key(server, service_embedder):
    embedder = service_embedder(config(server, dimensions=DIMENSIONS))
    server.status = 401

    with pytest.raises(EmbeddingFailed) as failed:
        embedder.embed_documents(["bees"])

    assert len(server.calls) == 1
    assert "status 401" in str(failed.value) and KEY not in str(failed.value)


@pytest.mark.parametrize(
    ("error_body", "said"),
    [
        ("quota exhausted", 'status 400: "quota exhausted"'),  # JSON, not an object: as sent
        ({"object": "error", "message": "bad model", "code": 400}, "status 400: bad model"),
    ],
)
def test_a_refusal_in_another_shape_than_openais_is_embedding_failed(
    server, service_embedder, error_body, said
):
    embedder = service_embedder(config(server, dimensions=DIMENSIONS))
    server.status, server.error_body = 400, error_body

    with pytest.raises(EmbeddingFailed) as failed:
        embedder.embed_documents(["bees"])

    assert str(failed.value).endswith(said)  # the flat shape (vLLM's): its message


@pytest.mark.parametrize("failing", [False, True])
def test_an_answer_over_max_body_bytes_is_not_held_and_fails_at_once(server, failing):
    """It was read whole into RAM (an endless one: until memory ran out); the limit is
    `server.max_body_bytes`, as for a provider's bodies."""
    chosen = config(server, dimensions=DIMENSIONS)
    embedder = embedder_factory(Config(max_body_bytes=64 * 1024, embedder=chosen))(Settings())
    if failing:
        server.status, server.error_body = 503, "x" * 200_000
    else:
        server.padding = 200_000
    try:
        with pytest.raises(EmbeddingFailed) as failed:
            embedder.embed_documents(["bees"])
    finally:
        embedder.close()

    status = 503 if failing else 200
    assert str(failed.value).endswith(
        f"embeddings: status {status}, over 65536 bytes (server.max_body_bytes)"
    )
    assert len(server.calls) == 1  # not tried again: a service gone wrong


def test_a_service_that_is_not_listening_fails_with_embedding_failed(server, service_embedder):
    embedder = service_embedder(config(server, dimensions=DIMENSIONS, retries=1))
    server.stop()

    with pytest.raises(EmbeddingFailed, match="no answer"):
        embedder.embed_documents(["bees"])


def test_vectors_of_another_width_than_dimensions_are_refused(server, service_embedder):
    embedder = service_embedder(config(server, dimensions=DIMENSIONS))
    embedder.dim = 12  # as if configured so: the service sends 96

    with pytest.raises(EmbeddingFailed, match="96-dimension vectors, not 12"):
        embedder.embed_documents(["bees"])


def test_a_provider_model_name_goes_through_litellm(server, service_embedder):
    chosen = EmbedderConfig(model="openai/test-bow", api_base=server.url, api_key=KEY)
    embedder = service_embedder(chosen)

    row = embedder.embed_query("bees in Uppsala")

    assert not through_http(chosen)
    assert embedder.dim == DIMENSIONS and embedder.name == "openai/test-bow"
    expected = np.array(bag_of_words("bees in Uppsala"))
    np.testing.assert_allclose(row, expected / np.linalg.norm(expected), rtol=1e-5)
    assert server.calls[-1].body["model"] == "test-bow"  # litellm's provider prefix is its own
    assert server.calls[-1].body["input"] == ["bees in Uppsala"]
    assert server.calls[-1].authorization == f"Bearer {KEY}"


def test_a_plain_name_with_an_address_is_called_directly():
    assert through_http(EmbedderConfig(model="BAAI/bge-small-en-v1.5", api_base="http://h/v1"))
    assert not through_http(EmbedderConfig(model="text-embedding-3-small"))
