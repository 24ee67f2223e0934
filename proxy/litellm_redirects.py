"""litellm's HTTP clients follow no redirect, as moim's own client does not.

litellm builds its clients to follow redirects (its `AsyncHTTPHandler`, and the httpx client
it gives the OpenAI and Azure SDKs). httpx then strips only `Authorization` on a redirect to
another host: a provider or gateway answering 307 to elsewhere had Azure's `api-key`,
Anthropic's `x-api-key` and the whole body (the user's messages, their memory block) sent
there. Not followed, the 3xx is the provider's answer, and the client gets a 502 naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx


def follow_no_redirects() -> None:
    """Make every async httpx client litellm builds from now on keep its redirects."""
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler
    from litellm.llms.openai.common_utils import BaseOpenAILLM

    if getattr(AsyncHTTPHandler.create_client, "follows_no_redirects", False):
        return  # done once per process
    handler: Any = AsyncHTTPHandler  # mypy: methods are not assigned to, but these are
    handler.create_client = _not_following(handler.create_client)
    sdk: Any = BaseOpenAILLM
    sdk._get_async_http_client = staticmethod(_not_following(sdk._get_async_http_client))


def redirect_refused(status: int) -> str:
    """What the client is told when the provider answered a redirect."""
    return f"the provider answered {status}, a redirect, which moim does not follow"


def _not_following(make: Callable[..., Any]) -> Callable[..., Any]:
    """`make` (which returns an httpx.AsyncClient, or None for the SDK's own) with redirects
    off on what it returns."""

    def making(*args: Any, **kwargs: Any) -> Any:
        client = make(*args, **kwargs)
        if isinstance(client, httpx.AsyncClient):
            client.follow_redirects = False
        return client

    making.follows_no_redirects = True  # type: ignore[attr-defined]
    return making
