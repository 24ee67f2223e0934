"""The fill ratio through the real proxy, with the model's own tokenizer and window (CONTRACT.md,
"Memory behaviour"): litellm's map and the model's encoding for a known model, 128,000 tokens
and `o200k_base` for an unknown one.
"""

import httpx
import pytest
import tiktoken

from memory import count_tokens

UNKNOWN = "a-model-litellm-does-not-know"
TEXT = "Grüße aus Lisboa — 東京で会いましょう, the quick brown fox. " * 20


def ask(proxy, text, model):
    """One user message; moim's response headers."""
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    response = httpx.post(proxy.url + "/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.headers


@pytest.mark.parametrize(
    ("model", "encoding", "window"),
    [
        ("gpt-4", "cl100k_base", 8192),
        ("gpt-3.5-turbo", "cl100k_base", 16385),
        ("gpt-4o-mini", "o200k_base", 128_000),
        (UNKNOWN, "o200k_base", 128_000),
    ],
)
def test_the_fill_ratio_is_counted_in_the_models_encoding_against_its_window(
    proxy, model, encoding, window
):
    count_tokens("warm up", model)  # tiktoken finds litellm's bundled encoding files
    tokens = 6 + len(tiktoken.get_encoding(encoding).encode(TEXT))  # priming and framing: 3 + 3
    other = "o200k_base" if encoding == "cl100k_base" else "cl100k_base"
    assert tokens != 6 + len(tiktoken.get_encoding(other).encode(TEXT))
    assert ask(proxy, TEXT, model)["x-memory-fill-ratio"] == f"{tokens / window:.4f}"
