"""`GET /metrics` after real traffic through the real proxy, read with prometheus_client's own
parser: each metric moved by what the requests did (proxy/metrics.py, the README's list)."""

from contextlib import closing

import httpx
import pytest
import sqlean
from prometheus_client.parser import text_string_to_metric_families

from memory.ingest.ui_tasks import LIBRECHAT, LOBECHAT, OPEN_WEBUI

MODEL = "gpt-4o-mini"
TINY = "tiny-window-model"  # a 10-token window: any real request fills it past 0.70
KAYAK = "I keep my red kayak at the marina in Porto, berth number 14"
ALICE = {"X-Memory-User-Id": "alice"}


def scrape(proxy):
    """{(name, labels as sorted pairs): value} of every sample, and the families' types."""
    response = httpx.get(proxy.root + "/metrics", headers=proxy.admin_headers(), timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    families = list(text_string_to_metric_families(response.text))
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples
    }
    return values, {f.name: f.type for f in families}


def value(values, name, **labels):
    return values.get((name, tuple(sorted(labels.items()))), 0.0)


def chat(proxy, text, model=MODEL, **headers):
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    response = httpx.post(proxy.url + "/chat/completions", json=body, headers={**ALICE, **headers})
    assert response.status_code == 200, response.text
    return response


@pytest.fixture
def metered(make_proxy):
    return make_proxy(settings={"capture_facts": False, "context_windows": {TINY: 10}})


def test_metrics_move_with_the_traffic_that_caused_them(metered):
    before, types = scrape(metered)
    assert types["moim_chat_requests"] == "counter"  # the name of old: *_total
    assert types["moim_overhead_seconds"] == types["moim_ttfb_seconds"] == "histogram"
    assert value(before, "moim_store_messages") == 0

    chat(metered, KAYAK)
    metered.flush()
    recalled = chat(
        metered, "Where do I keep my kayak, and which berth?", **{"X-Memory-Mode": "read"}
    )
    chat(
        metered, "Explain gluon confinement in quantum chromodynamics", **{"X-Memory-Mode": "read"}
    )
    chat(metered, "Where is my kayak?", model=TINY, **{"X-Memory-Mode": "read"})
    refused = httpx.post(metered.url + "/chat/completions", content=b"{", headers=ALICE)
    with httpx.stream(
        "POST",
        metered.url + "/chat/completions",
        json={"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Hi"}]},
        headers={**ALICE, "X-Memory-Mode": "off"},
    ) as streamed:
        streamed.read()
    metered.layer.set_fact("alice", "city", "Porto")
    after, _ = scrape(metered)

    assert refused.status_code == 400 and streamed.status_code == 200
    chat_route = {"route": "/v1/chat/completions", "method": "POST"}
    assert value(after, "moim_http_requests_total", **chat_route, status="200") == 5
    assert value(after, "moim_http_requests_total", **chat_route, status="400") == 1
    assert value(after, "moim_chat_requests_total", status="200") == 5
    assert value(after, "moim_chat_requests_total", status="400") == 1
    flush_route = {"route": "/v1/memory/flush", "method": "POST", "status": "200"}
    assert value(after, "moim_http_requests_total", **flush_route) >= 1
    # overhead: every request that got to its memory steps (the 400 did not); TTFB: every 200
    assert value(after, "moim_overhead_seconds_count", endpoint="chat") == 5
    assert value(after, "moim_ttfb_seconds_count", endpoint="chat") == 5
    assert value(after, "moim_ttfb_seconds_sum", endpoint="chat") > 0
    # tiers: three recalls in tier 0 (the first finds nothing yet), one in tier 3
    assert value(after, "moim_recall_requests_total", tier="0") == 3
    assert value(after, "moim_recall_requests_total", tier="3") == 1
    injected = int(recalled.headers["x-memory-tokens-injected"])
    assert injected > 0 and recalled.headers["x-memory-chunks-injected"] != "0"
    assert value(after, "moim_injected_tokens_total") == injected
    assert value(after, "moim_injected_chunks_total") == int(
        recalled.headers["x-memory-chunks-injected"]
    )
    assert value(after, "moim_recall_abstentions_total") == 1  # the physics question
    # the store and the queue, read at the scrape
    assert value(after, "moim_store_users") == 1
    assert value(after, "moim_store_messages") == 2  # the kayak turn: question and reply
    assert value(after, "moim_store_chunks") == 2
    assert value(after, "moim_store_facts") == 1
    assert value(after, "moim_store_bytes") > 0
    assert value(after, "moim_index_pending_messages") == 0
    assert value(after, "moim_vector_users_loaded") == 1
    assert value(after, "moim_vectors_loaded") == 2
    assert value(after, "moim_embedder_loaded") == 1
    assert value(after, "moim_ingest_pending") == 0
    assert value(after, "moim_ingest_queue_size") == metered.config.ingest_queue_size
    assert value(after, "moim_memory_write_failures_total") == 0
    assert value(after, "moim_writer_up") == 1
    assert value(after, "moim_writer_oldest_unstored_seconds") == 0  # flushed: no lag
    assert (
        value(after, "moim_writer_restarts_total") == value(after, "moim_writer_dropped_total") == 0
    )
    assert types["moim_writer_failures"] == "counter"


def test_series_with_known_labels_are_exported_at_zero_before_any_request(metered):
    values, _ = scrape(metered)

    for endpoint in ("chat", "responses"):
        for histogram in ("moim_overhead_seconds_count", "moim_ttfb_seconds_count"):
            assert values[(histogram, (("endpoint", endpoint),))] == 0
    for tier in "0123":
        assert values[("moim_recall_requests_total", (("tier", tier),))] == 0
    for client in (OPEN_WEBUI, LIBRECHAT, LOBECHAT):  # the names ui_task() gives
        assert values[("moim_ui_tasks_total", (("client", client),))] == 0


def test_memory_errors_are_counted_by_stage_and_kind(metered):
    chat(metered, KAYAK)
    metered.flush()
    with closing(sqlean.connect(str(metered.config.db_path), isolation_level=None)) as db:
        db.execute("DROP TABLE chunks")  # recall and search fail from here on

    failed = chat(metered, "Where is my kayak?")
    search = httpx.get(metered.root + "/v1/memory/search", params={"q": "kayak"}, headers=ALICE)
    values, _ = scrape(metered)

    assert failed.headers["x-memory-error"].startswith("recall failed")
    kind = failed.headers["x-memory-error"].removeprefix("recall failed: ")
    assert value(values, "moim_memory_errors_total", stage="recall", kind=kind) == 1
    assert search.status_code == 503
    api_errors = [
        labels
        for (name, labels), n in values.items()
        if name == "moim_memory_errors_total" and ("stage", "memory_api") in labels and n == 1
    ]
    assert len(api_errors) == 1
    route = {"route": "/v1/memory/search", "method": "GET", "status": "503"}
    assert value(values, "moim_http_requests_total", **route) == 1


def test_each_app_counts_on_its_own_registry(make_proxy):
    first, second = make_proxy(), make_proxy()

    chat(first, "Hello")
    values, _ = scrape(second)

    assert value(values, "moim_chat_requests_total", status="200") == 0
    assert value(scrape(first)[0], "moim_chat_requests_total", status="200") == 1
