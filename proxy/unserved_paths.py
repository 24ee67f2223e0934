"""Chat at a path moim gives no memory: a 404 saying what to do, not a silent pass-through.

Azure OpenAI's client (`AzureOpenAI`) pointed at moim sends chat to a deployment's path:
`/v1/deployments/{deployment}/chat/completions?api-version=…` (its `base_url` at moim's /v1),
`/v1/openai/deployments/…` (its `azure_endpoint` there) or `/openai/deployments/…` (at moim's
root); its Responses API goes to `…/openai/responses`. Under `/v1/` any such path was passed
through: with an Azure upstream the model answered, nothing was recalled or stored, and
nothing said so. Outside it the answer was a bare "Not Found". A POST under `/v1/` whose path
ends as chat's or the Responses API's but is not theirs (also a trailing slash, a base URL's
path twice), and any path under `/openai/`, is now a 404 naming what to do. With memory off
(`X-Memory-Mode: off`, `MOIM_MEMORY=off`) there is no memory to miss: it passes through, as
do the Azure client's other requests (embeddings, files).
"""

from __future__ import annotations

from starlette.requests import Request

from proxy.errors import NotFound
from proxy.identity import Mode, memory_mode

MEMORY_PATHS = ("/chat/completions", "/responses")
_WHAT_TO_DO = (
    "point an OpenAI client (not AzureOpenAI) at moim's /v1; for Azure OpenAI, set moim's "
    "upstream to the resource's v1 API (MOIM_UPSTREAM_BASE_URL="
    "https://<resource>.openai.azure.com/openai/v1) or route the model through litellm as "
    "azure/<deployment>"
)


def refuse_chat_without_memory(request: Request, suffix: str, memory_enabled: bool) -> None:
    """Refuse a pass-through request (`suffix`: its path after /v1) that is a chat moim would
    relay without memory."""
    trimmed = suffix.rstrip("/")
    if request.method != "POST" or suffix in MEMORY_PATHS or not trimmed.endswith(MEMORY_PATHS):
        return
    if memory_mode(request.headers.get("x-memory-mode"), memory_enabled) is Mode.OFF:
        return
    raise NotFound(
        f"POST {request.url.path}: moim gives memory at /v1/chat/completions and "
        f"/v1/responses only, and passes no chat on without it: {_WHAT_TO_DO}",
        code="unsupported_path",
    )


def outside_v1(method: str, path: str) -> NotFound:
    """The answer to a request under `/openai/` (an Azure client's `azure_endpoint` at moim)."""
    return NotFound(
        f"{method} {path}: moim serves the OpenAI API under /v1, not Azure OpenAI's paths: "
        + _WHAT_TO_DO,
        code="unsupported_path",
    )
