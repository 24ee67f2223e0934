"""A provider's refusal of a request because of the memory block: sent again without it.

moim keeps its block within the room the window leaves (`proxy/recall_step.py`), but it
knows a window only from litellm's map or `context_windows` in config.yaml: a model it does
not know is taken as 128,000 tokens, and a local model with a smaller window would then refuse
a request that fits it, because of the block. And the block is a system message, placed (by
default) just before the last user message: a local model whose chat template takes no system
message, or one only first ("conversation roles must alternate user/assistant/…", Mistral's and
Gemma's templates under vLLM or llama.cpp; "does not support 'system'", OpenAI's o1-mini), or
one not last (Mistral's API: "Expected last role User or Tool …", when a request with no user
message, an agent loop's tool results, gets the block at its end) refuses a request that it
takes without the block. The byte path (`proxy/pipeline.py`) and
chat through litellm (`proxy/chat.py`: litellm reads each provider's words for it, and moim's
error then carries OpenAI's code) send such a request once more as the client sent it, so
memory never fails a request that would have succeeded directly; a request refused without
the block gets the provider's own error. `Report.without_block` makes the headers, the stored
turn's `injected_facts` and the inspector say that no block was sent.

The memory tool loop (`proxy/tool_loop.py`, opt-in) does not: moim adds its own tools to every
round but the last, and its rounds grow with moim's calls and their results, so a refusal there
is not the block's alone, and the request as the client sent it is not what the loop sends.
"""

from __future__ import annotations

from proxy.errors import error_object

# What providers say: OpenAI's code (chat and the Responses API), the words of OpenAI and of
# vLLM ("This model's maximum context length is 8192 tokens"), llama.cpp's server ("the
# request exceeds the available context size"), Ollama's OpenAI endpoint does not refuse (it
# truncates).
_CODES = frozenset({"context_length_exceeded"})
_WORDS = ("maximum context length", "exceeds the available context size", "context window")
# The words of a chat template or model refusing a system message where the block puts it.
_ROLE_WORDS = (
    "roles must alternate",
    "system role not supported",
    "does not support 'system'",
    "only user and assistant roles are supported",
    "expected last role",  # Mistral's API, the block last: "… but got system"
)
# What the request's `x-memory-error` says when it was sent again without the block.
_WITHOUT_BLOCK = "the memory block passed the model's context window: sent without it"
_ROLES_REFUSED = "the model refused the memory block's system message: sent without it"


def refusal_of_block(status: int, body: bytes) -> str | None:
    """Why an answer is the provider refusing a request because of the block (for the
    request's `x-memory-error`), or None when it is not such a refusal: a 400 whose error
    object, in OpenAI's shape or the flat one (`proxy.errors.error_object`), says so.
    """
    error = error_object(body) if status == 400 else None
    if error is None:
        return None
    message = error.get("message")
    said = message.lower() if isinstance(message, str) else ""
    if error.get("code") in _CODES or any(words in said for words in _WORDS):
        return _WITHOUT_BLOCK
    return _ROLES_REFUSED if any(words in said for words in _ROLE_WORDS) else None
