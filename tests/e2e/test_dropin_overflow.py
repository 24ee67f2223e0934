"""A provider's context-window refusal of a request with a block is sent again without it
(proxy/overflow.py): through litellm as on the byte path, and what is recorded of the request
afterwards (the stored turn's injected facts, the inspector's "why this block") says that no
block was sent.
"""

import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from proxy.config import ModelRoute
from tests.conftest import serve_app
from tests.e2e.test_dropin_api import FACT, QUICK


class SmallWindow:
    """A provider whose model takes at most `LIMIT` characters of messages: over them, a 400,
    OpenAI's `context_length_exceeded` (or, `flat`, the error object alone at the top level,
    as vLLM before its errors were nested, TensorRT-LLM and FastChat send it); else the length
    it read. It keeps what it was sent."""

    LIMIT = 600

    def __init__(self, flat=False):
        self.sent = []
        self.flat = flat

    async def answer(self, request):
        body = json.loads(await request.body())
        self.sent.append(body)
        size = sum(len(str(m.get("content"))) for m in body["messages"])
        if size > self.LIMIT:
            message = f"This model's maximum context length is {self.LIMIT} characters."
            if self.flat:
                error = {"object": "error", "message": message, "type": "BadRequestError"}
                flat = {**error, "param": None, "code": 400}
                return Response(json.dumps(flat), 400, media_type="application/json")
            error = {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            return Response(json.dumps({"error": error}), 400, media_type="application/json")
        reply = dict(QUICK, choices=[dict(QUICK["choices"][0], message=said(f"read {size}"))])
        return Response(json.dumps(reply), media_type="application/json")


def said(text):
    return {"role": "assistant", "content": text}


ALICE = {"X-Memory-User-Id": "alice"}
FITS = [{"role": "user", "content": "x" * (SmallWindow.LIMIT - 10)}]


@pytest.fixture
def small_window(request):
    """A provider that refuses more than `SmallWindow.LIMIT` characters: (its URL, its log).
    Indirectly parametrized "flat", its refusal is in the flat shape."""
    small = SmallWindow(flat=getattr(request, "param", None) == "flat")
    app = Starlette(routes=[Route("/v1/chat/completions", small.answer, methods=["POST"])])
    with serve_app(app) as root:
        yield root + "/v1", small


def with_fact(proxy):
    assert httpx.post(proxy.url + "/memory/facts", json=FACT, headers=ALICE).is_success
    return proxy


def injected_at(proxy):
    """When alice's fact last went into a block (None: never)."""
    proxy.flush()
    facts = [row for row in proxy.layer.export("alice") if row.get("type") == "fact"]
    return [row["last_injected_at"] for row in facts]


def why(proxy, request_id):
    page = httpx.get(proxy.root + "/ui/users/alice/why", params={"request": request_id})
    assert page.status_code == 200
    return page.text


def assert_sent_again_without_the_block(raw, small):
    """The provider refused the request with the block for its window; moim sent it once more
    as the client sent it, and its headers say no block went."""
    assert raw.parse().choices[0].message.content == f"read {SmallWindow.LIMIT - 10}"
    assert [len(body["messages"]) for body in small.sent] == [2, 1]  # with the block, without
    assert small.sent[-1]["messages"] == FITS
    assert (raw.headers["x-memory-facts-injected"], raw.headers["x-memory-tokens-injected"]) == (
        "0",
        "0",
    )
    assert "context window" in raw.headers["x-memory-error"]


@pytest.mark.parametrize("small_window", ["openai", "flat"], indirect=True)
def test_a_model_whose_window_moim_does_not_know_gets_the_request_without_the_block(
    make_proxy, small_window
):
    """An unknown model is taken as 128,000 tokens; a local model with less refuses the
    request because of the block: moim sends it once more as the client sent it, and says so.
    A local server's refusal may be its error object alone, not under "error"."""
    url, small = small_window
    proxy = with_fact(make_proxy(upstream_base_url=url))

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="local-small", messages=FITS, extra_headers=ALICE
        )

    assert_sent_again_without_the_block(raw, small)


def test_a_request_over_the_window_without_the_block_gets_the_providers_error(
    make_proxy, small_window
):
    url, small = small_window
    proxy = with_fact(make_proxy(upstream_base_url=url))
    over = [{"role": "user", "content": "x" * (SmallWindow.LIMIT + 10)}]
    body = {"model": "local-small", "messages": over}

    response = httpx.post(proxy.url + "/chat/completions", json=body, headers=ALICE)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert small.sent[-1]["messages"] == over


def test_chat_through_litellm_is_sent_again_without_the_block(make_proxy, small_window):
    url, small = small_window
    route = ModelRoute(model="openai/local-small", api_base=url, api_key="sk-up")
    proxy = with_fact(make_proxy(routes={"via-litellm": route}))

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="via-litellm", messages=FITS, extra_headers={**ALICE, "X-Request-Id": "r-1"}
        )

    assert_sent_again_without_the_block(raw, small)
    assert injected_at(proxy) == [None]
    assert FACT["value"] not in why(proxy, "r-1")


def test_through_litellm_a_request_over_the_window_gets_the_providers_error(
    make_proxy, small_window
):
    url, small = small_window
    route = ModelRoute(model="openai/local-small", api_base=url, api_key="sk-up")
    proxy = with_fact(make_proxy(routes={"via-litellm": route}))
    over = [{"role": "user", "content": "x" * (SmallWindow.LIMIT + 10)}]
    body = {"model": "via-litellm", "messages": over}

    response = httpx.post(proxy.url + "/chat/completions", json=body, headers=ALICE, timeout=60)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    # the provider's words, without litellm's class names ("litellm.BadRequestError: …")
    assert (
        error["message"]
        == f"This model's maximum context length is {SmallWindow.LIMIT} characters."
    )
    assert [len(body["messages"]) for body in small.sent] == [2, 1]


def test_the_byte_path_records_no_fact_injected_when_the_block_was_dropped(
    make_proxy, small_window
):
    url, small = small_window
    proxy = with_fact(make_proxy(upstream_base_url=url))

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="local-small", messages=FITS, extra_headers={**ALICE, "X-Request-Id": "r-2"}
        )

    assert raw.headers["x-memory-facts-injected"] == "0"
    assert [len(body["messages"]) for body in small.sent] == [2, 1]
    assert injected_at(proxy) == [None]
    assert FACT["value"] not in why(proxy, "r-2")


def test_a_block_sent_is_recorded_as_injected(make_proxy, small_window):
    url, small = small_window
    proxy = with_fact(make_proxy(upstream_base_url=url))
    short = [{"role": "user", "content": "Where do I live?"}]

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="local-small", messages=short, extra_headers={**ALICE, "X-Request-Id": "r-3"}
        )

    assert raw.headers["x-memory-facts-injected"] == "1"
    assert [len(body["messages"]) for body in small.sent] == [2]
    assert injected_at(proxy) != [None]
    assert FACT["value"] in why(proxy, "r-3")


# -- a model whose chat template takes no system message where the block goes ---------------

TEMPLATE_ERROR = (
    "After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/..."
)


async def _alternating(request):
    """A local model served with a chat template like Mistral's (vLLM's 400 when roles after an
    optional first system message do not alternate user, assistant, …); else what it read."""
    messages = json.loads(await request.body())["messages"]
    roles = [m["role"] for m in messages[1 if messages[0]["role"] == "system" else 0 :]]
    if roles != ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2):
        error = {"message": TEMPLATE_ERROR, "type": "BadRequestError", "param": None, "code": 400}
        return Response(json.dumps({"error": error}), 400, media_type="application/json")
    reply = dict(QUICK, choices=[dict(QUICK["choices"][0], message=said(f"read {roles}"))])
    return Response(json.dumps(reply), media_type="application/json")


@pytest.fixture(scope="module")
def alternating():
    app = Starlette(routes=[Route("/v1/chat/completions", _alternating, methods=["POST"])])
    with serve_app(app) as root:
        yield root + "/v1"


@pytest.mark.parametrize("route", ["byte path", "litellm"])
def test_a_model_that_takes_no_system_message_there_gets_the_request_without_the_block(
    make_proxy, alternating, route
):
    """The block goes in as a system message before the last user message: a template that
    takes a system message only first refuses the conversation's second turn with it."""
    if route == "litellm":
        litellm = ModelRoute(model="openai/local-mistral", api_base=alternating, api_key="sk-up")
        proxy = with_fact(make_proxy(routes={"local-mistral": litellm}))
    else:
        proxy = with_fact(make_proxy(upstream_base_url=alternating))
    turns = [said("Hello!"), {"role": "user", "content": "Where do I live?"}]
    messages = [{"role": "user", "content": "Hi"}, *turns]

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="local-mistral", messages=messages, extra_headers=ALICE
        )

    assert raw.parse().choices[0].message.content == "read ['user', 'assistant', 'user']"
    assert raw.headers["x-memory-facts-injected"] == "0"
    assert "refused the memory block" in raw.headers["x-memory-error"]
    assert injected_at(proxy) == [None]


# -- a provider that takes a request only when its last message is the user's or a tool's ---

LAST_ROLE_ERROR = (
    "Expected last role User or Tool (or Assistant with prefix True) for serving but got system"
)


async def _last_role(request):
    """Mistral's API: a 400 unless the last message is a user or tool message (its words)."""
    messages = json.loads(await request.body())["messages"]
    last = messages[-1]["role"]
    if last not in ("user", "tool"):
        error = {
            "message": LAST_ROLE_ERROR.replace("system", last),
            "type": "invalid_request_error",
        }
        body = {"object": "error", **error, "param": None, "code": None}
        return Response(json.dumps(body), 400, media_type="application/json")
    roles = [m["role"] for m in messages]
    reply = dict(QUICK, choices=[dict(QUICK["choices"][0], message=said(f"read {roles}"))])
    return Response(json.dumps(reply), media_type="application/json")


@pytest.mark.parametrize("route", ["byte path", "litellm"])
def test_a_provider_refusing_the_block_as_the_last_message_gets_the_request_without_it(
    make_proxy, route
):
    """An agent loop's request with no user message (only tool results after the assistant's
    call): the block goes at the end, after them, which OpenAI takes; Mistral's API takes a
    request only when a user or tool message ends it, and its refusal failed the request."""
    app = Starlette(routes=[Route("/v1/chat/completions", _last_role, methods=["POST"])])
    call = {"id": "call_1", "type": "function", "function": {"name": "where", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Lisbon"},
    ]
    with serve_app(app) as root:
        if route == "litellm":
            mistral = ModelRoute(model="openai/mistral-small", api_base=root + "/v1", api_key="k")
            proxy = with_fact(make_proxy(routes={"mistral-small": mistral}))
        else:
            proxy = with_fact(make_proxy(upstream_base_url=root + "/v1"))
        with proxy.client() as client:
            raw = client.chat.completions.with_raw_response.create(
                model="mistral-small", messages=messages, extra_headers=ALICE
            )

    assert raw.parse().choices[0].message.content == "read ['system', 'assistant', 'tool']"
    assert "refused the memory block" in raw.headers["x-memory-error"]
    assert injected_at(proxy) == [None]
