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
    """One user message, recalled for and not stored (`read`); moim's response headers."""
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    headers = {"x-memory-mode": "read"}
    response = httpx.post(proxy.url + "/chat/completions", json=body, headers=headers, timeout=60)
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


def words(tokens):
    """One user message that makes a request of exactly `tokens` tokens in o200k_base."""
    count_tokens("warm up", UNKNOWN)
    text = "word" + " word" * (tokens - 7)
    assert 6 + len(tiktoken.get_encoding("o200k_base").encode(text)) == tokens
    return text


@pytest.mark.parametrize(
    ("tokens", "tier", "ratio"),
    [(63_999, "0", "0.5000"), (64_000, "1", "0.5000"), (76_799, "1", "0.6000")],
)
def test_an_unknown_model_at_a_boundary_gets_the_tier_of_its_exact_count(
    proxy, tokens, tier, ratio
):
    # One message far past the length moim counts by sampling: near a threshold, an estimate
    # a few tokens high put a request just below 0.50 (or 0.60) in the next tier.
    headers = ask(proxy, words(tokens), UNKNOWN)
    assert (headers["x-memory-tier"], headers["x-memory-fill-ratio"]) == (tier, ratio)
