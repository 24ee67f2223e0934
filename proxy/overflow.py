"""A provider's refusal of a request that passed its model's context window.

moim keeps its block within the room the window leaves (`proxy/recall_step.py`), but it
knows a window only from litellm's map or `context_windows` in config.yaml: a model it does
not know is taken as 128,000 tokens, and a local model with a smaller window would then refuse
a request that fits it, because of the block. The byte path (`proxy/pipeline.py`) and chat
through litellm (`proxy/chat.py`: litellm reads each provider's words for it, and moim's error
then carries OpenAI's code) send such a request once more as the client sent it, so memory
never fails a request that would have succeeded directly; a request over the window without
the block gets the provider's own error. `Report.without_block` makes the headers, the stored
turn's `injected_facts` and the inspector say that no block was sent.

The memory tool loop (`proxy/tool_loop.py`, opt-in) does not: moim adds its own tools to every
round but the last, and its rounds grow with moim's calls and their results, so a refusal there
is not the block's alone, and the request as the client sent it is not what the loop sends.
"""

from __future__ import annotations

import json

# What providers say: OpenAI's code (chat and the Responses API), the words of OpenAI and of
# vLLM ("This model's maximum context length is 8192 tokens"), llama.cpp's server ("the
# request exceeds the available context size"), Ollama's OpenAI endpoint does not refuse (it
# truncates).
_CODES = frozenset({"context_length_exceeded"})
_WORDS = ("maximum context length", "exceeds the available context size", "context window")
# What the request's `x-memory-error` says when it was sent again without the block.
WITHOUT_BLOCK = "the memory block passed the model's context window: sent without it"


def window_exceeded(status: int, body: bytes) -> bool:
    """Whether an answer is the provider refusing a request too long for its model.

    OpenAI's error object is under "error"; vLLM (before it nested its errors), TensorRT-LLM
    and FastChat send it alone, `{"object": "error", "message", "type", "param", "code": 400}`.
    """
    if status != 400:
        return False
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    if not isinstance(answer, dict):
        return False
    error = answer if answer.get("object") == "error" else answer.get("error")
    if not isinstance(error, dict):
        return False
    if error.get("code") in _CODES:
        return True
    message = error.get("message")
    return isinstance(message, str) and any(words in message.lower() for words in _WORDS)
