"""The memory API (CONTRACT.md "Memory API") against the real proxy and the real embedder."""

import json
import uuid
from datetime import UTC, datetime

import httpx
import pytest

from memory import BLOCK_END, BLOCK_START

pytestmark = pytest.mark.both_backends

MODEL = "gpt-4o-mini"
KAYAK = "I keep my red kayak at the marina in Porto, berth number 14"
PASTA = "My carbonara uses guanciale, pecorino and plenty of black pepper"
KAYAK_QUESTION = "Where do I keep my kayak, and which berth is it?"


@pytest.fixture
def api_proxy(make_proxy):
    """A proxy that stores turns but captures no facts, so counts are exact."""
    return make_proxy(settings={"capture_facts": False})


def as_user(user):
    return {"X-Memory-User-Id": user}


def chat(proxy, user, text, **headers):
    """`user` says `text` in a new conversation; return moim's response headers."""
    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": text}],
            extra_headers={**as_user(user), **headers},
        )
    return raw.headers


def api(proxy, method, path, user, **kwargs):
    return httpx.request(method, proxy.root + path, headers=as_user(user), timeout=60, **kwargs)


def stats(proxy, user):
    response = api(proxy, "GET", "/v1/memory/stats", user)
    assert response.status_code == 200
    return response.json()


def search(proxy, user, q, k=10):
    response = api(proxy, "GET", "/v1/memory/search", user, params={"q": q, "k": k})
    assert response.status_code == 200, response.text
    return response.json()["results"]


def recalled_block(proxy, upstream, user, question):
    """The block moim injects for `question` (read mode: nothing stored), or None."""
    chat(proxy, user, question, **{"X-Memory-Mode": "read"})
    content = upstream.last_json["messages"][0]["content"]
    if upstream.last_json["messages"][0]["role"] != "system" or BLOCK_START not in content:
        return None
    return content[content.index(BLOCK_START) : content.index(BLOCK_END) + len(BLOCK_END)]


# -- stats, flush, search --------------------------------------------------------------------


def test_stats_count_per_user(api_proxy):
    chat(api_proxy, "alice", KAYAK)
    chat(api_proxy, "alice", PASTA)
    api_proxy.flush()
    assert stats(api_proxy, "alice") == {
        "user_id": "alice",
        "messages": 4,
        "chunks": 4,
        "facts": 0,
        "sessions": 2,
        "pending": 0,
        "failed": 0,
    }
    assert stats(api_proxy, "bob") == {
        "user_id": "bob",
        "messages": 0,
        "chunks": 0,
        "facts": 0,
        "sessions": 0,
        "pending": 0,
        "failed": 0,
    }


def test_flush_returns_once_everything_is_indexed(api_proxy):
    chat(api_proxy, "alice", KAYAK)
    response = httpx.post(api_proxy.root + "/v1/memory/flush", timeout=60)
    assert (response.status_code, response.json()) == (200, {"flushed": True, "pending": 0})
    assert stats(api_proxy, "alice")["chunks"] == 2


def test_search_returns_ranked_results(api_proxy):
    chat(api_proxy, "alice", KAYAK)
    chat(api_proxy, "alice", PASTA)
    api_proxy.flush()
    results = search(api_proxy, "alice", "kayak berth at the marina")
    assert {"id", "text", "score", "session_id", "message_id", "created_at"} <= set(results[0])
    # The kayak turn and the upstream's echo of it ("echo: I keep my red kayak…", whose BM25
    # context is the turn itself) rank above the pasta turns; which of the two comes first
    # is up to BM25's document frequencies, which tantivy and FTS5 count differently.
    assert [KAYAK in r["text"] for r in results[:2]] == [True, True]
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert all(r["session_id"].startswith("s-") for r in results)
    assert all(abs(r["created_at"] - datetime.now(UTC).timestamp()) < 300 for r in results)


def test_search_k_limits_the_results(api_proxy):
    chat(api_proxy, "alice", KAYAK)
    chat(api_proxy, "alice", PASTA)
    api_proxy.flush()
    assert len(search(api_proxy, "alice", "kayak carbonara marina", k=1)) == 1


def test_search_is_per_user(api_proxy):
    chat(api_proxy, "alice", KAYAK)
    api_proxy.flush()
    assert search(api_proxy, "bob", "kayak berth at the marina") == []


@pytest.mark.parametrize(
    "params, param",
    [
        ({"q": "kayak", "k": "0"}, "k"),
        ({"q": "kayak", "k": "101"}, "k"),
        ({"q": "kayak", "k": "-3"}, "k"),
        ({"q": "kayak", "k": "ten"}, "k"),
        ({"k": "5"}, "q"),
        ({"q": "   ", "k": "5"}, "q"),
    ],
)
def test_search_validation_is_an_openai_shaped_400(api_proxy, params, param):
    response = api(api_proxy, "GET", "/v1/memory/search", "alice", params=params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert isinstance(error["message"], str) and error["message"]


# -- forget, export, import ------------------------------------------------------------------


def test_delete_forgets_only_that_user(api_proxy, upstream):
    chat(api_proxy, "alice", KAYAK)
    chat(api_proxy, "bob", KAYAK)
    api_proxy.flush()
    assert api_proxy.layer.store.vocabulary("alice")  # the words alice said, with vectors
    response = api(api_proxy, "DELETE", "/v1/memory", "alice")
    assert response.status_code == 200
    assert response.json() == {"user_id": "alice", "deleted": True, "messages": 2}
    assert stats(api_proxy, "alice") == {
        "user_id": "alice",
        "messages": 0,
        "chunks": 0,
        "facts": 0,
        "sessions": 0,
        "pending": 0,
        "failed": 0,
    }
    assert search(api_proxy, "alice", "kayak marina") == []
    assert api_proxy.layer.store.vocabulary("alice") == []
    assert recalled_block(api_proxy, upstream, "alice", KAYAK_QUESTION) is None
    assert stats(api_proxy, "bob")["messages"] == 2
    assert "kayak" in {t.word for t in api_proxy.layer.store.vocabulary("bob")}
    assert search(api_proxy, "bob", "kayak marina")[0]["text"] == KAYAK
    assert KAYAK in recalled_block(api_proxy, upstream, "bob", KAYAK_QUESTION)


def test_a_forgotten_user_who_talks_again_is_recalled_only_the_new_words(api_proxy, upstream):
    chat(api_proxy, "alice", KAYAK)
    api_proxy.flush()
    assert KAYAK in recalled_block(api_proxy, upstream, "alice", KAYAK_QUESTION)  # rows read
    api(api_proxy, "DELETE", "/v1/memory", "alice")
    # The new turn's chunks may be given the forgotten ones' ids (SQLite reuses freed ids).
    chat(api_proxy, "alice", "I sold my kayak last week; I keep a paddleboard at the marina")
    api_proxy.flush()
    block = recalled_block(api_proxy, upstream, "alice", KAYAK_QUESTION)
    assert block is not None and "paddleboard" in block
    assert "berth number 14" not in block


def test_export_delete_import_restores_the_same_recall(proxy, upstream):
    chat(proxy, "alice", KAYAK)
    chat(proxy, "alice", PASTA)
    proxy.flush()
    before = recalled_block(proxy, upstream, "alice", KAYAK_QUESTION)
    assert KAYAK in before
    exported = api(proxy, "GET", "/v1/memory/export", "alice")
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    api(proxy, "DELETE", "/v1/memory", "alice")
    assert recalled_block(proxy, upstream, "alice", KAYAK_QUESTION) is None
    imported = api(proxy, "POST", "/v1/memory/import", "alice", content=exported.content)
    assert imported.status_code == 200
    assert imported.json()["imported"] == 4
    assert recalled_block(proxy, upstream, "alice", KAYAK_QUESTION) == before
    assert api(proxy, "GET", "/v1/memory/export", "alice").text == exported.text


def test_an_export_imported_by_another_user_is_theirs_once(api_proxy, upstream):
    chat(api_proxy, "alice", KAYAK)
    chat(api_proxy, "alice", PASTA)
    fact = {"key": "boat", "value": "a red kayak", "category": "hobby"}
    assert api(api_proxy, "POST", "/v1/memory/facts", "alice", json=fact).status_code == 200
    api_proxy.flush()
    exported = api(api_proxy, "GET", "/v1/memory/export", "alice")

    imported = api(api_proxy, "POST", "/v1/memory/import", "bob", content=exported.content)
    again = api(api_proxy, "POST", "/v1/memory/import", "bob", content=exported.content)
    api_proxy.flush()

    assert (imported.status_code, imported.json()["user_id"]) == (200, "bob")
    assert again.json()["imported"] == 0  # nothing twice
    counts = {k: v for k, v in stats(api_proxy, "alice").items() if k != "user_id"}
    assert {k: v for k, v in stats(api_proxy, "bob").items() if k != "user_id"} == counts
    assert counts["messages"] == 4 and counts["facts"] == 1
    facts = api(api_proxy, "GET", "/v1/memory/facts", "bob").json()["facts"]
    assert [(f["key"], f["value"], f["category"]) for f in facts] == [tuple(fact.values())]
    assert KAYAK in recalled_block(api_proxy, upstream, "bob", KAYAK_QUESTION)
    assert [hit["text"] for hit in search(api_proxy, "bob", "kayak berth")] == [
        hit["text"] for hit in search(api_proxy, "alice", "kayak berth")
    ]


def test_export_then_import_keeps_text_with_unicode_line_separators(api_proxy):
    said = "Line one\u2028line two\u2029para\x85next, all one message"
    chat(api_proxy, "alice", said)
    api_proxy.flush()
    exported = api(api_proxy, "GET", "/v1/memory/export", "alice")
    assert "\u2028" in exported.text  # exported as is (ensure_ascii=False), one line per item
    api(api_proxy, "DELETE", "/v1/memory", "alice")
    imported = api(api_proxy, "POST", "/v1/memory/import", "alice", content=exported.content)
    assert imported.status_code == 200, imported.text
    assert imported.json()["imported"] == 2
    assert api(api_proxy, "GET", "/v1/memory/export", "alice").text == exported.text


def test_import_rejects_a_line_that_is_not_json(api_proxy):
    body = b'{"type": "message"}\nnot json\n'
    response = api(api_proxy, "POST", "/v1/memory/import", "alice", content=body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_jsonl"
    assert stats(api_proxy, "alice")["messages"] == 0


# -- replayed history ------------------------------------------------------------------------


def test_memory_timestamp_sets_the_stored_date_and_the_block_shows_it(api_proxy, upstream):
    chat(api_proxy, "alice", KAYAK, **{"X-Memory-Timestamp": "2023-04-05"})
    api_proxy.flush()
    midnight = datetime(2023, 4, 5, tzinfo=UTC).timestamp()
    exported = api(api_proxy, "GET", "/v1/memory/export", "alice").text.splitlines()
    assert len(exported) == 2
    assert all(f'"created_at": {midnight}' in line for line in exported)
    assert search(api_proxy, "alice", "kayak marina")[0]["created_at"] == midnight
    block = recalled_block(api_proxy, upstream, "alice", KAYAK_QUESTION)
    assert " — 2023-04-05 (" in block


def test_import_accepts_null_optional_fields(proxy):
    line = json.dumps(
        {
            "type": "message",
            "session_id": "s1",
            "message_key": "k#1",
            "content_hash": "k",
            "role": "user",
            "content": "I grow tomatoes",
            "created_at": 1_700_000_000,
            "tokens": None,
            "name": None,
            "model": None,
            "partial": None,
            "id": None,
        }
    )
    response = httpx.post(
        proxy.root + "/v1/memory/import",
        content=line + "\n",
        headers={"X-Memory-User-Id": "nulls"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"user_id": "nulls", "imported": 1, "facts": 0}


def test_metrics_count_the_embedding_models_work_by_kind(api_proxy):
    def counters():
        text = httpx.get(api_proxy.root + "/metrics", timeout=10).text
        found = {}
        for line in text.splitlines():
            for name in ("moim_embedding_texts_total", "moim_embedding_cpu_seconds_total"):
                if line.startswith(name + "{"):
                    kind = line.split('kind="')[1].split('"')[0]
                    found[(name, kind)] = float(line.rsplit(" ", 1)[1])
        return found

    before = counters()
    chat(api_proxy, "alice", KAYAK)  # indexed: its messages are embedded as documents
    api_proxy.flush()
    asked = f"Which berth holds my kayak, at marina {uuid.uuid4().hex}?"  # never cached
    chat(api_proxy, "alice", asked, **{"X-Memory-Mode": "read"})  # a query
    after = counters()
    texts = "moim_embedding_texts_total"
    assert after[(texts, "query")] >= before.get((texts, "query"), 0) + 1
    assert after[(texts, "document")] >= before.get((texts, "document"), 0) + 1
    assert after[("moim_embedding_cpu_seconds_total", "query")] > 0


def test_import_rejects_a_fact_line_that_is_not_an_exported_fact(api_proxy):
    message = {
        "type": "message",
        "session_id": "s1",
        "message_key": "k#1",
        "content_hash": "k",
        "role": "user",
        "content": KAYAK,
        "created_at": 1_700_000_000,
    }
    fact = {"type": "fact", "key": "pet", "created_at": 1_700_000_000}  # no value
    body = (json.dumps(message) + "\n" + json.dumps(fact) + "\n").encode()
    response = api(api_proxy, "POST", "/v1/memory/import", "alice", content=body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_jsonl"
    assert response.json()["error"]["message"].startswith("line 2 is not an exported memory item")
    assert stats(api_proxy, "alice")["messages"] == 0
