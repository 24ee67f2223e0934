"""proxy/chat_metrics.py: every chat request is counted by the status its client got."""

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from proxy.chat_metrics import ChatRequests


async def chat(request):
    kind = (await request.json())["kind"]
    if kind == "crash":
        raise RuntimeError("a bug")
    if kind == "stream":
        return StreamingResponse(iter([b"data: [DONE]\n\n"]), media_type="text/event-stream")
    return JSONResponse({}, status_code=200 if kind == "ok" else 400)


def app(counts):
    routes = [
        Route(path, chat, methods=["POST"])
        for path in ("/v1/chat/completions", "/chat/completions", "/u/{user}/v1/chat/completions")
    ]
    routes.append(Route("/v1/memory/facts", chat, methods=["POST"]))
    return Starlette(routes=routes, middleware=[Middleware(ChatRequests, counts=counts)])


@pytest.fixture
def counted():
    counts = {}
    with TestClient(app(counts), raise_server_exceptions=False) as client:
        yield client, counts


def test_a_crash_counts_as_the_500_its_client_gets(counted):
    client, counts = counted
    assert client.post("/v1/chat/completions", json={"kind": "crash"}).status_code == 500
    assert counts == {500: 1}


def test_replies_refusals_and_streams_count_on_every_chat_path(counted):
    client, counts = counted
    for path in ("/v1/chat/completions", "/chat/completions", "/u/ana/v1/chat/completions"):
        client.post(path, json={"kind": "ok"})
        client.post(path, json={"kind": "refused"})
    client.post("/v1/chat/completions", json={"kind": "stream"})
    assert counts == {200: 4, 400: 3}


def test_other_routes_and_methods_are_not_chat_requests(counted):
    client, counts = counted
    client.post("/v1/memory/facts", json={"kind": "ok"})
    client.get("/v1/chat/completions")  # 405
    client.post("/u/a/b/v1/chat/completions", json={"kind": "ok"})  # 404: no such route
    assert counts == {}
