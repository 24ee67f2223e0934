"""A gateway's error that quotes the credentials of moim's base URL (`user:password@`, sent as
Basic auth) reaches the client without them, as one quoting the provider key does
(test_provider_key_in_errors.py). Found by bench/acceptance_security.py: the body was masked
for the configured provider key, which a base URL with credentials never sends.
"""

import base64
import json

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from proxy.config import ProxyKey
from tests.conftest import serve_app

PASSWORD = "gw-pass-0123456789SECRET"
KEYS = (ProxyKey("sk-alice", user_id="alice"),)
HELLO = [{"role": "user", "content": "Hello there"}]


async def _quote_the_credentials(request: Request) -> Response:
    """A 401 quoting the `Authorization` it got and the `user:password` it encodes, in its
    message and `WWW-Authenticate`; for a `stream-error` model, a 200 stream ending in it."""
    sent = request.headers.get("authorization", "")
    pair = base64.b64decode(sent.removeprefix("Basic ")).decode() if sent else ""
    said = f"Gateway refused {sent!r} ({pair}) for {pair.partition(':')[0]}."
    error = {"message": said, "type": "invalid_request_error"}
    body = json.loads(await request.body() or b"{}")
    if isinstance(body, dict) and body.get("model") == "stream-error":
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
            {"error": error},
        ]
        text = "".join(f"data: {json.dumps(event)}\n\n" for event in events)
        return Response(text, 200, media_type="text/event-stream")
    refused = f'Basic realm="gateway", error_description="{error["message"]}"'
    return JSONResponse({"error": error}, 401, headers={"www-authenticate": refused})


@pytest.fixture
def gateway_proxy(make_proxy):
    app = Starlette(
        routes=[Route("/v1/{path:path}", _quote_the_credentials, methods=["GET", "POST"])]
    )
    with serve_app(app) as root:
        base = root.replace("http://", f"http://gateway:{PASSWORD}@") + "/v1"
        yield make_proxy(keys=KEYS, upstream_base_url=base, upstream_api_key="sk-operator-key-123")


CALLS = {
    "chat": lambda c: c.chat.completions.create(model="gpt-4o-mini", messages=HELLO),
    "chat, streamed": lambda c: list(
        c.chat.completions.create(model="gpt-4o-mini", messages=HELLO, stream=True)
    ),
    "chat, an error event in a stream": lambda c: list(
        c.chat.completions.create(model="stream-error", messages=HELLO, stream=True)
    ),
    "responses": lambda c: c.responses.create(model="gpt-4o-mini", input="Hello there"),
    "models (passed through)": lambda c: c.models.list(),
}


@pytest.mark.parametrize("call", CALLS)
def test_a_gateway_error_quoting_the_base_urls_credentials_reaches_the_client_without_them(
    gateway_proxy, call
):
    with gateway_proxy.client(api_key="sk-alice") as client:
        with pytest.raises(openai.APIError) as refused:
            CALLS[call](client)

    response = getattr(refused.value, "response", None)
    said = f"{refused.value.message} {refused.value.body}"
    if response is not None:
        said += f" {response.text} {response.headers.raw}"
    assert "Gateway refused" in said
    token = base64.b64encode(f"gateway:{PASSWORD}".encode()).decode()
    assert PASSWORD not in said and token not in said and PASSWORD[-10:] not in said


def test_the_gateway_still_gets_its_credentials_as_basic_auth(gateway_proxy):
    answer = httpx.get(gateway_proxy.url + "/models", headers={"authorization": "Bearer sk-alice"})
    token = base64.b64encode(f"gateway:{PASSWORD}".encode()).decode()
    assert answer.status_code == 401
    assert "'" + "*" * len("Basic " + token) + "'" in answer.text  # what it got, masked


# A gateway that takes its key as the URL's user, with no password (`https://KEY@host`, as
# Stripe-style APIs do): the user is the secret, and a gateway quotes it alone.
TOKEN = "gw-token-0123456789SECRET"


def test_a_gateway_error_quoting_a_key_given_as_the_urls_user_reaches_the_client_without_it(
    make_proxy,
):
    app = Starlette(routes=[Route("/v1/{path:path}", _quote_the_credentials, methods=["POST"])])
    with serve_app(app) as root:
        base = root.replace("http://", f"http://{TOKEN}@") + "/v1"
        proxy = make_proxy(keys=KEYS, upstream_base_url=base, upstream_api_key="sk-operator-1")
        with proxy.client(api_key="sk-alice") as client:
            with pytest.raises(openai.APIError) as refused:
                CALLS["chat"](client)

    assert "Gateway refused" in refused.value.message
    assert TOKEN not in f"{refused.value.message} {refused.value.body}"
