"""A provider that breaks off mid-body breaks off at the client too (proxy/break_off.py).

Called directly, a provider whose connection drops mid-body leaves the client's HTTP library
with a body that never ends: httpx raises `RemoteProtocolError`, the openai SDK
`APIConnectionError`. Through moim the client must fail the same way (no terminating chunk),
never read a truncated answer or download as whole; the part said is still stored, marked
partial. Each test calls the provider directly too, and compares.

Chat, the Responses API, the memory-tool loop, litellm routes and the pass-through; uvicorn's
h11 and httptools protocols (moim's own, built on them); `/metrics` counts such a request as
`broke_off`, not as the 200 its head said. What is not broken is unchanged:
`tests/e2e/test_faults.py` covers normal streams, clients that leave, provider errors.
"""

import json
import logging

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from proxy.config import ModelRoute
from tests.conftest import serve_app

USER = {"x-memory-user-id": "breakoff-user"}
SAID = "tick 00 tick 01 tick 02 "  # the stand-in's `broken` model: three chunks, then it drops
DOWNLOAD = b"0123456789" * 40  # what the faulty provider sends of a 1,000-byte file
# A round that calls a moim tool: its first chunk, the call's id and name, then the drop.
RECALL_CALL = {"id": "c1", "name": "moim_recall_facts", "arguments": "{}"}
CALL_THEN_DROP = {"tool_calls": [RECALL_CALL], "broken_after": 1}


class _CutDownload:
    """`GET /v1/files/{id}/content` that sends 400 bytes of its file, then drops the connection:
    of the 1,000 its `content-length` announces, or of a chunked body (`chunked` in the id)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"application/octet-stream")]
        if b"chunked" not in scope["path"].encode():
            headers.append((b"content-length", b"1000"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": DOWNLOAD, "more_body": True})
        # returning now: uvicorn closes the connection mid-body


@pytest.fixture(scope="module")
def cut_files():
    app = Starlette(routes=[Route("/v1/files/{file_id}/content", _CutDownload())])
    with serve_app(app) as root:
        yield root + "/v1"


def read_raw(url, body, headers=USER, method="POST"):
    """The bytes of a response until it ends; and the error that ended it, if one did."""
    received = b""
    kwargs = {"json": body} if body is not None else {}
    try:
        with httpx.stream(method, url, headers=headers, timeout=10, **kwargs) as response:
            assert response.status_code == 200
            for part in response.iter_raw():
                received += part
    except httpx.HTTPError as exc:
        return received, exc
    return received, None


def said_in(events):
    """The content deltas of chat completion chunks."""
    chunks = [json.loads(line[5:]) for line in events.split(b"\n") if line.startswith(b"data:")]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


def chat_body(model, text="Count for me", stream=True):
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]}


def stored(proxy, user="breakoff-user"):
    proxy.flush()
    return [(m.role, m.content, m.partial) for m in proxy.layer.store.messages(user)]


def request_counts(proxy):
    """{(counter, status): value} of the chat route's request counters in `/metrics`."""
    text = httpx.get(proxy.root + "/metrics", headers=proxy.admin_headers(), timeout=30).text
    counters = ("moim_chat_requests_total", "moim_http_requests_total")
    return {
        (s.name, s.labels["status"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in counters and s.labels.get("route") in (None, "/v1/chat/completions")
    }


def sdk_text(client, **request):
    """The content a streamed chat said before the SDK raised (it must raise)."""
    said = []
    with pytest.raises((openai.APIConnectionError, httpx.TransportError)) as caught:
        for chunk in client.chat.completions.create(**request):
            said.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    return "".join(said), caught.value


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_a_dropped_chat_stream_breaks_off_at_the_client_as_called_directly(
    make_proxy, upstream, parser, caplog
):
    proxy = make_proxy(http_parser=parser)
    body = chat_body("broken")
    direct, direct_error = read_raw(upstream.url + "/chat/completions", body)
    through, error = read_raw(proxy.url + "/chat/completions", body)
    assert isinstance(direct_error, httpx.RemoteProtocolError)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert said_in(through) == said_in(direct) == SAID  # and no `[DONE]`
    assert b"[DONE]" not in through and through.count(b"data: ") == 4
    assert stored(proxy) == [("user", "Count for me", False), ("assistant", SAID, True)]
    warnings = [r for r in caplog.records if r.name == "proxy.streaming"]
    assert [r.levelname for r in warnings] == ["WARNING"]
    assert "broke off" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]  # no traceback
    assert httpx.get(proxy.root + "/health").status_code == 200


def test_the_sdk_raises_on_a_dropped_chat_stream_as_called_directly(proxy, upstream):
    request = chat_body("broken")
    with openai.OpenAI(base_url=upstream.url, api_key="sk-up", max_retries=0) as client:
        direct, direct_error = sdk_text(client, **request)
    with proxy.client(default_headers=USER) as client:
        said, error = sdk_text(client, **request)
    assert said == direct == SAID
    assert type(error) is type(direct_error)
    assert stored(proxy) == [("user", "Count for me", False), ("assistant", SAID, True)]


def test_a_dropped_stream_counts_as_broken_off_not_as_a_success_in_metrics(proxy):
    read_raw(proxy.url + "/chat/completions", chat_body("broken"))
    read_raw(proxy.url + "/chat/completions", chat_body("gpt-4o-mini", "Whole, please"))
    assert request_counts(proxy) == {
        ("moim_chat_requests_total", "broke_off"): 1,
        ("moim_chat_requests_total", "200"): 1,
        ("moim_http_requests_total", "broke_off"): 1,
        ("moim_http_requests_total", "200"): 1,
    }


def test_a_dropped_responses_stream_breaks_off_and_is_stored_partial(proxy, upstream):
    def deltas(client):
        said = []
        with pytest.raises((openai.APIConnectionError, httpx.TransportError)) as caught:
            stream = client.responses.create(model="broken", input="Count for me", stream=True)
            for event in stream:
                if event.type == "response.output_text.delta":
                    said.append(event.delta)
        return "".join(said), caught.value

    with openai.OpenAI(base_url=upstream.url, api_key="sk-up", max_retries=0) as client:
        direct, direct_error = deltas(client)
    with proxy.client(default_headers=USER) as client:
        said, error = deltas(client)
    assert said == direct and said
    assert type(error) is type(direct_error)
    assert stored(proxy) == [("user", "Count for me", False), ("assistant", said, True)]


def test_a_dropped_stream_in_the_memory_tool_loop_breaks_off_and_is_stored_partial(proxy, upstream):
    headers = {**USER, "X-Memory-Tools": "on"}
    through, error = read_raw(proxy.url + "/chat/completions", chat_body("broken"), headers)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert said_in(through) == SAID and b"[DONE]" not in through
    assert "moim_" in upstream.last_json["tools"][0]["function"]["name"]  # the loop ran it
    assert stored(proxy) == [("user", "Count for me", False), ("assistant", SAID, True)]


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_loop_round_that_breaks_off_before_a_byte_was_sent_is_an_openai_shaped_502(
    proxy, upstream, stream
):
    """The loop holds a round back until it speaks: a provider that breaks off before then has
    sent the client nothing, so moim can answer as it does for a non-streamed body cut off
    (tests/e2e/test_errors.py): a clean 502 `upstream_broken`, nothing stored."""
    upstream.script = [CALL_THEN_DROP]
    headers = {**USER, "X-Memory-Tools": "on"}
    response = httpx.post(
        proxy.url + "/chat/completions",
        json=chat_body("gpt-4o-mini", stream=stream),
        headers=headers,
        timeout=10,
    )
    assert response.status_code == 502
    assert response.json() == {
        "error": {
            "message": "upstream closed the connection",
            "type": "upstream_error",
            "param": None,
            "code": "upstream_broken",
        }
    }
    assert "moim_" in upstream.last_json["tools"][0]["function"]["name"]  # moim's tools offered
    assert stored(proxy) == []
    upstream.script = [CALL_THEN_DROP]
    with proxy.client(default_headers=headers) as client:
        with pytest.raises(openai.InternalServerError) as raised:
            client.chat.completions.create(**chat_body("gpt-4o-mini", stream=stream))
    assert raised.value.status_code == 502


def test_a_dropped_litellm_stream_breaks_off_and_is_stored_partial(make_proxy, upstream):
    route = ModelRoute(model="openai/broken", api_base=upstream.url, api_key="sk-up")
    proxy = make_proxy(routes={"via-litellm": route})
    with proxy.client(default_headers=USER) as client:
        said, _ = sdk_text(client, **chat_body("via-litellm"))
    assert said == SAID
    assert stored(proxy) == [("user", "Count for me", False), ("assistant", SAID, True)]


@pytest.mark.parametrize("file_id", ["file-chunked", "file-sized"])
def test_a_passed_through_download_that_breaks_off_breaks_off_at_the_client(
    make_proxy, cut_files, file_id, caplog
):
    proxy = make_proxy(upstream_base_url=cut_files)
    path = f"/files/{file_id}/content"
    direct, direct_error = read_raw(cut_files + path, None, method="GET")
    through, error = read_raw(proxy.url + path, None, method="GET")
    assert isinstance(direct_error, httpx.RemoteProtocolError)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert through == direct == DOWNLOAD
    for base in (cut_files, proxy.url):
        with openai.OpenAI(base_url=base, api_key="sk-up", max_retries=0) as client:
            with pytest.raises(openai.APIConnectionError):
                client.files.content(file_id)
    assert not [r for r in caplog.records if r.exc_info]  # no traceback
    assert httpx.get(proxy.root + "/health").status_code == 200


def test_a_stream_that_ends_normally_still_ends_whole(proxy, caplog):
    caplog.set_level(logging.WARNING)
    body = chat_body("gpt-4o-mini", "Whole, please")
    through, error = read_raw(proxy.url + "/chat/completions", body)
    assert error is None
    assert through.endswith(b"data: [DONE]\n\n")
    assert stored(proxy)[-1][2] is False
    assert not [r for r in caplog.records if r.name == "proxy.streaming"]
