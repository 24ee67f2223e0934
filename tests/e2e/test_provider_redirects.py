"""A provider's redirect to another host is not followed: the provider key, the user's
messages and their memory block stay with the provider they were meant for.

httpx strips only `Authorization` on a redirect to another origin; Azure's `api-key` and
Anthropic's `x-api-key` went on to wherever a provider (or a gateway in front of it) sent
litellm's call, with the whole request body. The first server here answers every call with
a 307 to a second, which records what reaches it; the client talks to moim with the
official openai SDK.
"""

from collections.abc import Iterator

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from proxy.config import ModelRoute
from tests.conftest import serve_app
from tests.upstream import Upstream, serve_upstream

PROVIDER_KEY = "sk-provider-never-elsewhere"


@pytest.fixture
def elsewhere() -> Iterator[Upstream]:
    """Another host: a provider stand-in that records every call reaching it."""
    with serve_upstream() as other:
        yield other


@pytest.fixture
def redirecting(elsewhere: Upstream) -> Iterator[str]:
    """A provider that answers every call with a 307 to the same path on `elsewhere`."""
    target = elsewhere.url.removesuffix("/v1")

    async def bounce(request: Request) -> JSONResponse:
        location = target + request.url.path
        return JSONResponse({}, status_code=307, headers={"location": location})

    app = Starlette(routes=[Route("/{path:path}", bounce, methods=["GET", "POST"])])
    with serve_app(app) as root:
        yield root


@pytest.mark.parametrize(
    "model", ["openai/gpt-4o-mini", "azure/gpt-4o-mini", "anthropic/claude-3-5-haiku-20241022"]
)
def test_a_litellm_route_does_not_follow_a_redirect_to_another_host(
    make_proxy, redirecting, elsewhere, model
):
    route = ModelRoute(model=model, api_base=redirecting, api_key=PROVIDER_KEY)
    proxy = make_proxy(routes={"routed": route})
    with proxy.client() as client, pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(
            model="routed", messages=[{"role": "user", "content": "My locker code is 4711"}]
        )
    assert refused.value.status_code == 502, refused.value.body
    assert elsewhere.requests == []


def test_a_redirect_on_the_byte_path_is_relayed_not_followed(make_proxy, redirecting, elsewhere):
    proxy = make_proxy(upstream_base_url=redirecting + "/v1", upstream_api_key=PROVIDER_KEY)
    response = httpx.post(
        proxy.url + "/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]},
        headers={"api-key": "azure-client-key"},
        timeout=30,
    )
    assert response.status_code == 307  # the client's to follow, or not
    assert elsewhere.requests == []
