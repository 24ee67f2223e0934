"""A provider's error that quotes the key it refused reaches the client without that key.

With proxy keys the provider key is the operator's, and a client must never learn it; some
providers and gateways quote it ("Incorrect API key provided: sk-…"). The official openai
SDK talks to the real proxy, which talks to a stand-in provider that quotes the key it got.
"""

import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from proxy.config import ModelRoute, ProxyKey
from tests.conftest import serve_app

SECRET = "sk-operator-0123456789abcdefSECRET"
KEYS = (ProxyKey("sk-alice", user_id="alice"),)
HELLO = [{"role": "user", "content": "Hello there"}]


async def _quote_the_key(request: Request) -> JSONResponse:
    """Any request refused with a 401 whose message quotes the bearer token it carried."""
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    error = {"message": f"Incorrect API key provided: {token}.", "type": "invalid_request_error"}
    return JSONResponse({"error": {**error, "param": None, "code": "invalid_api_key"}}, 401)


@pytest.fixture
def quoting_proxy(make_proxy):
    app = Starlette(routes=[Route("/v1/{path:path}", _quote_the_key, methods=["GET", "POST"])])
    with serve_app(app) as root:
        route = ModelRoute(model="openai/gpt-4o-mini", api_base=root + "/v1", api_key=SECRET)
        yield make_proxy(
            keys=KEYS,
            upstream_base_url=root + "/v1",
            upstream_api_key=SECRET,
            routes={"via-litellm": route},
        )


CALLS = {
    "chat": lambda c: c.chat.completions.create(model="gpt-4o-mini", messages=HELLO),
    "chat, streamed": lambda c: c.chat.completions.create(
        model="gpt-4o-mini", messages=HELLO, stream=True
    ),
    "chat with memory tools": lambda c: c.chat.completions.create(
        model="gpt-4o-mini", messages=HELLO, extra_headers={"X-Memory-Tools": "on"}
    ),
    "responses": lambda c: c.responses.create(model="gpt-4o-mini", input="Hello there"),
    "chat through litellm": lambda c: c.chat.completions.create(
        model="via-litellm", messages=HELLO
    ),
    "embeddings (passed through)": lambda c: c.embeddings.create(
        model="text-embedding-3-small", input="Hello"
    ),
    "models (passed through)": lambda c: c.models.list(),
}


@pytest.mark.parametrize("call", CALLS)
def test_a_provider_error_quoting_the_operators_key_reaches_the_client_without_it(
    quoting_proxy, call
):
    with quoting_proxy.client(api_key="sk-alice") as client:
        with pytest.raises(openai.AuthenticationError) as refused:
            CALLS[call](client)

    body = refused.value.response.text
    assert "Incorrect API key provided" in body
    assert SECRET not in body and SECRET[-12:] not in body
