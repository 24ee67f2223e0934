"""proxy/request_metrics.py: every request counted by route and status, every chat request by
the status its client got, and chat's time to first byte; read back with prometheus_client's
own parser."""

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from proxy.metrics import Metrics
from proxy.request_metrics import RequestMetrics, endpoint_of


async def chat(request):
    kind = (await request.json())["kind"]
    if kind == "crash":
        raise RuntimeError("a bug")
    if kind == "stream":
        return StreamingResponse(iter([b"data: [DONE]\n\n"]), media_type="text/event-stream")
    return JSONResponse({}, status_code=200 if kind == "ok" else 400)


def app(metrics):
    routes = [
        Route(path, chat, methods=["POST"])
        for path in ("/v1/chat/completions", "/chat/completions", "/u/{user}/v1/chat/completions")
    ]
    routes.append(Route("/v1/memory/facts", chat, methods=["POST"]))
    return Starlette(routes=routes, middleware=[Middleware(RequestMetrics, metrics=metrics)])


def samples(metrics, name):
    """{labels as a sorted tuple of pairs: value} of the samples called `name`."""
    text = generate_latest(metrics.registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


@pytest.fixture
def counted():
    metrics = Metrics()
    with TestClient(app(metrics), raise_server_exceptions=False) as client:
        yield client, metrics


def test_a_crash_counts_as_the_500_its_client_gets(counted):
    client, metrics = counted
    assert client.post("/v1/chat/completions", json={"kind": "crash"}).status_code == 500
    assert samples(metrics, "moim_chat_requests_total") == {(("status", "500"),): 1.0}
    assert samples(metrics, "moim_http_requests_total") == {
        (("method", "POST"), ("route", "/v1/chat/completions"), ("status", "500")): 1.0
    }


def test_replies_refusals_and_streams_count_on_every_chat_path(counted):
    client, metrics = counted
    for path in ("/v1/chat/completions", "/chat/completions", "/u/ana/v1/chat/completions"):
        client.post(path, json={"kind": "ok"})
        client.post(path, json={"kind": "refused"})
    client.post("/v1/chat/completions", json={"kind": "stream"})
    assert samples(metrics, "moim_chat_requests_total") == {
        (("status", "200"),): 4.0,
        (("status", "400"),): 3.0,
    }
    by_route = samples(metrics, "moim_http_requests_total")
    assert (
        by_route[
            (("method", "POST"), ("route", "/u/{user}/v1/chat/completions"), ("status", "200"))
        ]
        == 1.0
    )
    assert not [labels for labels in by_route if "ana" in str(labels)]  # templates, not paths
    # a first byte timed for each answer below 400, none for the refusals
    assert samples(metrics, "moim_ttfb_seconds_count") == {
        (("endpoint", "chat"),): 4.0,
        (("endpoint", "responses"),): 0.0,  # exported at 0 from the start
    }


def test_other_routes_and_methods_count_by_route_but_are_not_chat_requests(counted):
    client, metrics = counted
    client.post("/v1/memory/facts", json={"kind": "ok"})
    client.get("/v1/chat/completions")  # 405
    client.post("/u/a/b/v1/chat/completions", json={"kind": "ok"})  # 404: no such route
    client.request("BREW", "/v1/memory/facts")  # an unknown method is one label, not many
    assert samples(metrics, "moim_chat_requests_total") == {}
    assert samples(metrics, "moim_http_requests_total") == {
        (("method", "POST"), ("route", "/v1/memory/facts"), ("status", "200")): 1.0,
        (("method", "GET"), ("route", "/v1/chat/completions"), ("status", "405")): 1.0,
        (("method", "POST"), ("route", "(none)"), ("status", "404")): 1.0,
        (("method", "other"), ("route", "/v1/memory/facts"), ("status", "405")): 1.0,
    }


def test_endpoint_of_names_the_api():
    assert endpoint_of("/u/ann/v1/responses") == "responses"
    assert endpoint_of("/chat/completions") == "chat"
