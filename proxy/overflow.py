"""A provider's refusal of a request that passed its model's context window.

moim keeps its block within the room the window leaves (`proxy/recall_step.py`), but it
knows a window only from litellm's map or `context_windows` in config.yaml: a model it does
not know is taken as 128,000 tokens, and a local model with a smaller window would then refuse
a request that fits it, because of the block. The byte path sends such a request once more
as the client sent it (`proxy/pipeline.py`), so memory never fails a request that would have
succeeded directly; a request over the window without the block gets the provider's own error.
"""

from __future__ import annotations

import json

# What providers say: OpenAI's code (chat and the Responses API), the words of OpenAI and of
# vLLM ("This model's maximum context length is 8192 tokens"), llama.cpp's server ("the
# request exceeds the available context size"), Ollama's OpenAI endpoint does not refuse (it
# truncates).
_CODES = frozenset({"context_length_exceeded"})
_WORDS = ("maximum context length", "exceeds the available context size", "context window")


def window_exceeded(status: int, body: bytes) -> bool:
    """Whether an answer is the provider refusing a request too long for its model."""
    if status != 400:
        return False
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return False
    if not isinstance(error, dict):
        return False
    if error.get("code") in _CODES:
        return True
    message = error.get("message")
    return isinstance(message, str) and any(words in message.lower() for words in _WORDS)
