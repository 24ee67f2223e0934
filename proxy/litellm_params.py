"""What of a client's body may reach `litellm.acompletion` (or `litellm.aembedding`, for the
pass-through's embeddings): OpenAI's request parameters only.

litellm reads a provider's address and credentials from the same keyword arguments as the
request's parameters (`api_base`, `base_url`, `api_key`, `extra_headers`, `custom_llm_provider`,
`aws_*`, `vertex_*`, `azure_ad_token`, …) and treats any other keyword as its own option or a
provider extra. A body passed whole would let a client send the operator's provider key to an
address of its choosing, so on the litellm path:

- a field named in `OPENAI_PARAMS` (OpenAI's Chat Completions parameters), or for embeddings
  in `EMBEDDING_PARAMS`, is passed on;
- `metadata` is dropped: it is OpenAI's, but litellm takes it for its own bookkeeping (cost
  maps, callbacks) and never sends it to the provider;
- any other field is refused with a 400 naming it, as OpenAI refuses an argument it does not
  know; nothing of such a request is forwarded or stored;
- a client's model name may not be an address (`://`): some providers (oobabooga, huggingface)
  take one in the model name as their base URL. Config aliases are the operator's and exempt.

The provider's address comes from config alone, its key from config or, when moim has no
proxy keys, the client's own `Authorization` (`proxy/upstream.py`). The OpenAI-compatible
path is not concerned: its URL comes from config and its body is forwarded byte for byte, so
a field there is data for the provider, never an instruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.errors import BadRequest

# OpenAI's `POST /v1/chat/completions` parameters, each a named argument of litellm 1.106.2's
# `acompletion` (so litellm treats it as a request parameter, never as an option of its own).
OPENAI_PARAMS = frozenset(
    "messages audio frequency_penalty function_call functions logit_bias logprobs "
    "max_completion_tokens max_tokens modalities n parallel_tool_calls prediction "
    "presence_penalty prompt_cache_key reasoning_effort response_format safety_identifier seed "
    "service_tier stop store stream stream_options temperature tool_choice tools top_logprobs "
    "top_p user verbosity web_search_options".split()
)
# OpenAI's `POST /v1/embeddings` parameters, each a named argument of `aembedding`.
EMBEDDING_PARAMS = frozenset({"input", "dimensions", "encoding_format", "user"})
# Accepted from the client but not passed on (see the module docstring).
DROPPED = frozenset({"model", "metadata"})


def refuse_unsafe(
    body: Mapping[str, Any], alias: bool, allowed: frozenset[str] = OPENAI_PARAMS
) -> None:
    """Raise BadRequest for the first field of `body` that litellm must not see.

    `alias`: the model name is a config route, whose target model the operator chose.
    `allowed`: `OPENAI_PARAMS` for chat, `EMBEDDING_PARAMS` for embeddings.
    """
    kind = "Embeddings" if allowed is EMBEDDING_PARAMS else "Chat Completions"
    for name in body:
        if name not in allowed and name not in DROPPED:
            raise BadRequest(
                f"unrecognized request argument '{name}': through litellm moim forwards only "
                f"OpenAI {kind} parameters; the provider's address and credentials "
                "come from its config",
                param=name,
                code="unsupported_parameter",
            )
    if not alias and "://" in body["model"]:
        raise BadRequest(
            "'model' may not be an address: the provider's address comes from moim's config",
            param="model",
            code="invalid_model",
        )


def forwarded(body: Mapping[str, Any], allowed: frozenset[str] = OPENAI_PARAMS) -> dict[str, Any]:
    """The fields of `body` that go to litellm (its `model` is the caller's to set)."""
    return {name: value for name, value in body.items() if name in allowed}
