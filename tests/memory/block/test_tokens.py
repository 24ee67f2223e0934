"""memory/block/tokens.py: request tokens with tiktoken, and context windows from litellm's map."""

import json
import random
from pydoc_data.topics import topics

import pytest
import tiktoken

from memory.block import tokens
from memory.block.tokens import (
    context_window,
    count_block_tokens,
    count_message_tokens,
    count_tokens,
    encoding_for,
    message_text,
    sampled,
)
from memory.remembered import Remembered


def o200k():
    # After moim's first count, tiktoken has o200k_base loaded from litellm's bundled files.
    count_tokens("warm up", "gpt-4o-mini")
    return tiktoken.get_encoding("o200k_base")


def test_gpt_4o_mini_counts_in_o200k_base():
    assert encoding_for("gpt-4o-mini").name == "o200k_base"


def test_unknown_model_counts_in_o200k_base():
    assert encoding_for("my-local-llama").name == "o200k_base"
    assert encoding_for("ollama/llama3").name == "o200k_base"


def test_count_message_tokens_of_a_known_request():
    messages = [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "name": "ana", "content": "What's the capital of Portugal?"},
    ]
    moim = count_message_tokens(messages, "gpt-4o-mini")
    encoding = o200k()
    expected = (
        3  # the reply's priming
        + 3
        + len(encoding.encode("You are a terse assistant."))
        + 3
        + len(encoding.encode("What's the capital of Portugal?"))
        + 1
        + len(encoding.encode("ana"))
    )
    assert moim == expected == 23


def test_count_message_tokens_counts_text_parts_and_tool_calls():
    calls = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather"},
                {"type": "image_url", "image_url": {"url": "x"}},
                {"type": "text", "text": "in Paris?"},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]
    encoding = o200k()
    expected = (
        3
        + 3
        + len(encoding.encode("Weather\nin Paris?"))
        + 3
        + len(encoding.encode(json.dumps(calls)))
    )
    assert count_message_tokens(messages, "gpt-4o-mini") == expected


def test_special_token_text_is_counted_as_plain_text():
    assert count_tokens("<|endoftext|>", "gpt-4o-mini") > 1


def test_message_text_of_each_content_shape():
    assert message_text({"content": "plain"}) == "plain"
    assert message_text({"content": [{"type": "text", "text": "a"}, {"text": "b"}]}) == "a\nb"
    assert message_text({"content": None}) == ""
    assert message_text({}) == ""


def test_context_window_from_litellms_map():
    assert context_window("gpt-4o-mini") == 128_000
    assert context_window("openai/gpt-4o-mini") == 128_000


def test_context_window_override_wins():
    assert context_window("gpt-4o-mini", {"gpt-4o-mini": 400}) == 400
    assert context_window("my-local-llama", {"my-local-llama": 8192}) == 8192


def test_context_window_of_an_unknown_model_is_the_default():
    assert context_window("my-local-llama") == 128_000
    assert context_window("my-local-llama", {}, default=32_768) == 32_768


def test_long_natural_text_is_counted_within_three_percent():
    # Python's own language reference, as natural technical prose: 200,000 characters, far
    # above the exact-count limit, so the sampled path estimates it.
    reference = "\n\n".join(topics[name] for name in sorted(topics))[:200_000]
    exact = len(o200k().encode(reference, disallowed_special=()))
    estimate = count_tokens(reference, "gpt-4o-mini")
    assert estimate == pytest.approx(exact, rel=0.03)


def test_a_long_text_is_sampled_unless_counted_exactly():
    reference = "\n\n".join(topics[name] for name in sorted(topics))[:100_000]
    messages = [{"role": "user", "content": reference}, {"role": "user", "content": "Hi"}]
    exact = 9 + len(o200k().encode(reference)) + len(o200k().encode("Hi"))
    assert sampled(messages) and not sampled(messages[1:])
    assert count_message_tokens(messages, "gpt-4o-mini") != exact
    assert count_message_tokens(messages, "gpt-4o-mini", exact=True) == exact


def test_text_at_the_exact_limit_is_counted_exactly():
    text = ("moim remembers. " * 1500)[:24_000]
    assert count_tokens(text, "gpt-4o-mini") == len(o200k().encode(text))


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4", "some-unknown-model"])
def test_a_shed_encoding_still_encodes_and_decodes(model):
    # moim drops tiktoken's Python copy of the rank table (memory); the encoder must not need it.
    encoding = encoding_for(model)
    text = "Grüße aus Lisboa — 東京で会いましょう 🙂"
    tokens = encoding.encode(text)
    assert encoding.decode(tokens) == text
    assert count_tokens(text, model) == len(tokens)


def test_the_rank_table_moim_sheds_is_where_tiktoken_keeps_it():
    # Pins the reliance on tiktoken's internals: if `_mergeable_ranks` is renamed, shedding
    # silently stops (27 MB more per encoding) and this fails instead.
    assert vars(encoding_for("gpt-4o-mini"))["_mergeable_ranks"] == {}


# Pieces the pre-tokenizers join across line breaks when they can: runs of breaks, blank and
# indented lines, CRLF, punctuation before a break, a slash after one, Unicode breaks, specials.
_PIECES = [
    *("a", "Z", "é", "中", "😀", "Ω", "ǅ", "\u0301", "1", "123", "1234", "'s", "'S", "'"),
    *(" ", "  ", "\t", "\xa0", "\u200b", "\u2028", "\x85", "\x0b", "\x0c"),
    *("\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\n\t", "\n/x"),
    *(".", ",", ":", "…", "!", "?", "-", "=", "[", "]", "/", "//", '"', "<|endoftext|>"),
    *("=== End Memory ===", "  - ", "[Relevant past context]", "\n  user: ", "\n\t/", "\x1c"),
]


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4", "text-davinci-003"])
def test_a_block_counted_line_by_line_counts_as_a_whole(model):
    encoding = encoding_for(model)
    rng = random.Random(7)
    texts = ["".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 60))) for _ in range(3000)]
    texts.append("=== Memory Context ===\nRecalled.\n\n[Relevant past context]\n  user: hi\n/x")
    for text in texts:
        assert count_block_tokens(text, model) == len(encoding.encode(text, disallowed_special=()))


def test_a_long_texts_count_is_remembered_without_its_text(monkeypatch):
    """An agent resends its tool results (2-20 kB each) with every request: a long text's
    count is looked up, not encoded again, held under Python's hash of the text (no text), at
    most as many as `_LONG_COUNTS` holds, the same count as encoding it, and let go at a forget."""
    tokens.forget_counted_texts()
    monkeypatch.setattr(tokens, "_LONG_COUNTS", Remembered(3))
    results = [f"line {i}: " + "ok " * (3000 + i) for i in range(5)]
    history = [{"role": "tool", "tool_call_id": "call_1", "content": results[0]}]
    first = tokens.count_message_tokens(history, "gpt-4o-mini")
    encoded = []
    monkeypatch.setattr(tokens, "_count_long", lambda text, enc: encoded.append(text) or 0)

    assert tokens.count_message_tokens(history, "gpt-4o-mini") == first  # not encoded again
    assert encoded == []
    for text in results[1:]:
        tokens.count_tokens(text, "gpt-4o-mini")
    assert len(tokens._LONG_COUNTS) == 3
    tokens.count_message_tokens(history, "gpt-4o-mini")  # the oldest went first: encoded again
    assert encoded == [*results[1:], results[0]]
    tokens.forget_counted_texts()
    assert len(tokens._LONG_COUNTS) == 0


def test_a_long_texts_estimate_and_exact_count_are_remembered_apart():
    """Near a tier threshold the request is counted again exactly: a remembered estimate of
    a text past `_EXACT_LIMIT` must not answer for its exact count, nor the other way."""
    tokens.forget_counted_texts()
    rng = random.Random(3)
    pieces = ["alpha", "beta,", "gamma\n", "δelta", "x=1;", '{"k": 2}']
    text = " ".join(rng.choice(pieces) for _ in range(9000))
    exact = len(o200k().encode(text))
    estimate = count_tokens(text, "gpt-4o-mini")
    assert estimate != exact  # sampled: a few tokens off
    history = [{"role": "tool", "tool_call_id": "call_1", "content": text}]
    framing = count_message_tokens(history, "gpt-4o-mini") - estimate
    assert count_message_tokens(history, "gpt-4o-mini", exact=True) == exact + framing
    assert count_message_tokens(history, "gpt-4o-mini") == estimate + framing


def _call(call_id, arguments, first="id"):
    function = {"name": "read_file", "arguments": arguments}
    fields = {"id": call_id, "type": "function", "function": function}
    return dict(sorted(fields.items(), key=lambda item: item[0] != first))


@pytest.mark.parametrize(
    "calls",
    [
        [_call("call_1", '{"path": "a.py"}')],
        [_call("call_1", '{"path": "a.py"}', first="function")],  # another order, other JSON
        [_call("call_1", '{"path": "a.py"}'), _call("call_2", '{"q": "é \\"x\\""}')],
        [{"id": "call_1", "function": {"name": "f", "arguments": {"path": "a.py"}}}],
        [{"id": "call_1", "index": 0, "function": {"name": "f", "arguments": "{}"}}],
        [{"id": "call_1", "index": True, "function": {"name": "f", "arguments": "{}"}}],
        [{"id": None, "function": {"name": "f", "arguments": "{}"}}],
        {"name": "legacy", "arguments": '{"a": 1}'},
    ],
)
def test_calls_count_as_their_json_remembered_or_not(calls):
    """A message's calls count as their JSON, remembered (strings) or not (other values)."""
    message = {"role": "assistant", "content": None}
    message["function_call" if isinstance(calls, dict) else "tool_calls"] = calls
    written = len(o200k().encode(json.dumps(calls, ensure_ascii=False)))
    for _ in range(2):  # counted, then looked up
        assert count_message_tokens([message], "gpt-4o-mini") == 3 + 3 + written


def test_a_calls_count_is_remembered_without_their_text(monkeypatch):
    """An agent resends every call it made: calls of string fields are counted once, held
    under Python's hash of their fields (no text), at most as many as `_CALL_COUNTS` holds,
    each the count of its own JSON (one argument changed counts again), let go at a forget."""
    tokens.forget_counted_texts()
    monkeypatch.setattr(tokens, "_CALL_COUNTS", Remembered(3))
    made = [
        {"role": "assistant", "tool_calls": [_call(f"c{i}", f'{{"n": {i}}}')]} for i in range(5)
    ]
    counts = [count_message_tokens([m], "gpt-4o-mini") for m in made]
    written = []
    counting = tokens._count_text
    monkeypatch.setattr(tokens, "_count_text", lambda t, *a: written.append(t) or counting(t, *a))

    assert [count_message_tokens([m], "gpt-4o-mini") for m in made[2:]] == counts[2:]
    assert written == [""] * 3  # only each message's empty content: no call written again
    changed = {"role": "assistant", "tool_calls": [_call("c4", '{"n": 4, "more": "words"}')]}
    own = 3 + 3 + len(o200k().encode(json.dumps(changed["tool_calls"])))
    assert count_message_tokens([changed], "gpt-4o-mini") == own != counts[4]
    assert len(tokens._CALL_COUNTS) == 3
    written.clear()
    count_message_tokens(made[:1], "gpt-4o-mini")  # the oldest went first: written again
    assert json.dumps(made[0]["tool_calls"]) in written
    tokens.forget_counted_texts()
    assert len(tokens._CALL_COUNTS) == 0
