"""Step 2, measure: how full is the model's context?

Tokens are counted with tiktoken in the model's encoding (`o200k_base` when unknown), from
the encoding files litellm ships, so nothing is fetched at run time. Context windows come
from litellm's bundled model map JSON, read without importing litellm (importing it costs
~2.5 s and ~165 MB); config overrides win; unknown models get a default.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import tiktoken

from memory.remembered import Remembered

# OpenAI's cookbook accounting: every message costs a few tokens of framing.
_TOKENS_PER_MESSAGE = 3
_TOKENS_PER_REPLY = 3
# Above this many characters a text is counted by sampling (see `_count_text`).
_EXACT_LIMIT = 24_000


def _litellm_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def encoding_for(model: str) -> tiktoken.Encoding:
    """The tiktoken encoding of a model, loaded offline from litellm's bundled files."""
    package = _litellm_dir()
    if package is not None:
        # tiktoken reads this once per process to find its cache; litellm ships cl100k/o200k.
        os.environ.setdefault(
            "TIKTOKEN_CACHE_DIR", str(package / "litellm_core_utils" / "tokenizers")
        )
    name = model.split("/")[-1]
    try:
        encoding = tiktoken.encoding_for_model(name)
    except KeyError:
        encoding = tiktoken.get_encoding("o200k_base")
    _shed_rank_table(encoding)
    return encoding


def _shed_rank_table(encoding: tiktoken.Encoding) -> None:
    """Drop tiktoken's Python copy of the encoding's rank table.

    The Rust encoder that counts holds its own copy; the Python dict (200k entries for
    o200k) only serves pickling the encoding, and costs ~27 MB of resident memory.
    """
    if isinstance(getattr(encoding, "_mergeable_ranks", None), dict):
        encoding._mergeable_ranks = {}


def _model_map() -> dict[str, Any]:
    package = _litellm_dir()
    if package is None:
        return {}
    path = package / "model_prices_and_context_window_backup.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        return {}
    return data


def context_window(model: str, overrides: Mapping[str, int] = {}, default: int = 128_000) -> int:
    """The model's input context window in tokens: config, then litellm's map, then default."""
    if model in overrides:
        return overrides[model]
    windows = _context_windows()
    for name in (model, model.split("/", 1)[-1]):
        if name in windows:
            return windows[name]
    return default


@cache
def _context_windows() -> dict[str, int]:
    """Model name → input context window, from litellm's map (only this part of it is kept)."""
    windows = {}
    for name, entry in _model_map().items():
        if isinstance(entry, dict):
            size = entry.get("max_input_tokens") or entry.get("max_tokens")
            if isinstance(size, int) and size > 0:
                windows[name] = size
    return windows


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message's content, whether a string or a list of parts.

    A refusal is the model's text too: an assistant message with `content` null and its words
    in `refusal` (chat's structured outputs), or a `refusal` part (the Responses API), as the
    proxy stores it; so a client resending the refusal in its history sends the message moim
    stored, not a new one."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, Mapping):
                continue
            if isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                parts.append(part["refusal"])
        return "\n".join(parts)
    refusal = message.get("refusal")
    return refusal if content is None and isinstance(refusal, str) else ""


def call_arguments(message: Mapping[str, Any]) -> str:
    """The arguments of a message's function calls, one call a line: the answer of a reply
    made to a forced function (`Turn.answer_in_call`)."""
    said = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str) and arguments.strip():
            said.append(arguments)
    return "\n".join(said)


def count_tokens(text: str, model: str) -> int:
    """Tokens of one text in the model's encoding."""
    return _count_text(text, encoding_for(model))


def count_block_tokens(text: str, model: str) -> int:
    """Tokens of a text made of lines that recur (the MOIM block), counted line by line.

    Equal to `count_tokens`: where the encoding's pre-tokenizer never joins text across the
    line breaks the text is cut at, the tokens of the whole are the tokens of its pieces, and
    each piece's count is remembered (`_count_short`): a block's fixed lines, its facts and
    the turns recalled again cost nothing the next time (a 2,000-character block: ~0.45 ms).
    """
    encoding = encoding_for(model)
    if encoding.name not in _LINEWISE or len(text) > _EXACT_LIMIT:
        return _count_text(text, encoding)
    return sum(_count_text(piece, encoding) for piece in _LINE_BREAK.split(text))


# o200k_base's and cl100k_base's pre-tokenizers (tiktoken's patterns) keep a run of line
# breaks in one piece with whitespace before it, and let a piece of punctuation take the line
# breaks (o200k: and slashes) after it, but no piece goes on past a line break into text that
# does not start with whitespace or "/", nor into spaces or tabs before such text (an
# indented line: the break ends its piece, as the next text is no break). Cut there, a text
# is encoded exactly as in one go (tests/memory/block/test_tokens.py checks it on random
# texts). A block's passage is its heading (the session, the date, the cosine: rarely the same
# twice) and its indented turns (the same turns come back): cut apart, the turns' counts are
# remembered (a u1k block: 0.13-0.14 -> 0.06-0.07 ms of CPU). Other encodings (p50k's `\s+`
# pieces, for one) are counted whole.
_LINEWISE = frozenset({"o200k_base", "cl100k_base"})
_LINE_BREAK = re.compile(r"(?<=\n)(?=[^\s/]|[ \t]+[^\s])")


def count_message_tokens(
    messages: Sequence[Mapping[str, Any]], model: str, exact: bool = False
) -> int:
    """Tokens of a chat request's messages, with OpenAI's per-message framing; a text past
    `_EXACT_LIMIT` characters is estimated (`_count_long`) unless `exact`."""
    encoding = encoding_for(model)
    total = _TOKENS_PER_REPLY
    for message in messages:
        total += _TOKENS_PER_MESSAGE + _count_text(message_text(message), encoding, exact)
        for calls in (message.get("tool_calls"), message.get("function_call")):  # legacy: one
            if calls:
                total += _count_calls(calls, encoding, exact)
        name = message.get("name")
        if isinstance(name, str):
            total += 1 + _count_text(name, encoding, exact)
    return total


def sampled(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether `count_message_tokens` estimates the messages' count: one of the texts it
    counts (content, tool calls as JSON; a name is at most 64 characters) is too long to
    encode whole on every request."""
    for message in messages:
        if len(message_text(message)) > _EXACT_LIMIT:
            return True
        for calls in (message.get("tool_calls"), message.get("function_call")):
            if calls and len(json.dumps(calls, ensure_ascii=False)) > _EXACT_LIMIT:
                return True
    return False


def _count_text(text: str, encoding: tiktoken.Encoding, exact: bool = False) -> int:
    """Tokens of a text; short texts are remembered, as clients resend them every turn, and
    longer ones by their hash (`_LONG_COUNTS`), the estimate and the exact count apart."""
    if len(text) <= _CACHED_LIMIT:
        return _count_short(text, encoding)

    def make() -> int:
        if exact:
            return len(encoding.encode(text, disallowed_special=()))
        return _count_long(text, encoding)

    return _LONG_COUNTS.get((text, encoding.name, exact), make)


# A 40-turn history of ~19k characters costs ~1.4 ms to encode on every request; the turns
# repeat from one request to the next. At most 2,048 texts of ≤ 4,000 characters are kept
# (≤ 8 MB).
_CACHED_LIMIT = 4_000


@lru_cache(maxsize=2048)
def _count_short(text: str, encoding: tiktoken.Encoding) -> int:
    return len(encoding.encode(text, disallowed_special=()))


# An agent resends every tool result (2-20 kB of code, JSON, logs) with every request: a
# history of 120k tokens took ~60 ms to encode again each time. The counts of longer texts
# are remembered under Python's own (keyed, per process) hash of the text, so no text is
# held (`memory/remembered.py`); at most 4,096.
_LONG_COUNTS: Remembered[int] = Remembered(4096)


def forget_counted_texts() -> None:
    """Let go of every text held with its count (a user forgotten: their texts go too)."""
    _count_short.cache_clear()
    _LONG_COUNTS.clear()
    _CALL_COUNTS.clear()


def _count_calls(calls: Any, encoding: tiktoken.Encoding, exact: bool) -> int:
    """Tokens of a message's calls as JSON (`json.dumps`). Calls of string fields (as every
    client sends them: id, type, a function's name and arguments) are remembered under their
    fields in order, which alone make that JSON: no JSON is written for calls counted before.
    Writing it was half of counting an agent's history again (0.23 of 0.41 ms at 487 kB: each
    call's arguments, 0.1-6 kB of JSON in a string, escaped again)."""

    def make() -> int:
        return _count_text(json.dumps(calls, ensure_ascii=False), encoding, exact)

    fields = _string_fields(calls)
    if fields is None:
        return make()
    return _CALL_COUNTS.get((fields, encoding.name, exact), make)


# The counts of recent messages' calls, under Python's hash of their fields (no text held):
# an agent resends every call it made with every request. At most 4,096.
_CALL_COUNTS: Remembered[int] = Remembered(4096)


def _string_fields(calls: Any) -> tuple[Any, ...] | None:
    """The calls' names and string values in order, an object's within it; None when one
    holds another kind of value (a number, a list, a null), whose JSON this does not fix:
    `True` and `1` hash alike, `json.dumps` writes them apart."""
    if isinstance(calls, Mapping):
        return _object_fields(calls)
    if not isinstance(calls, list):
        return None
    fields: list[Any] = ["list"]
    for call in calls:
        held = _object_fields(call) if isinstance(call, Mapping) else None
        if held is None:
            return None
        fields.append(held)
    return tuple(fields)


def _object_fields(value: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """An object's names and values in order: strings, or objects of strings."""
    fields: list[Any] = ["object"]
    for name, item in value.items():
        if isinstance(item, str):
            fields.append((name, item))
        elif isinstance(item, Mapping) and all(isinstance(v, str) for v in item.values()):
            fields.append((name, ("object", *item.items())))
        else:
            return None
    return tuple(fields)


def _count_long(text: str, encoding: tiktoken.Encoding) -> int:
    """Exact for ordinary texts; for very long ones, exact on samples and scaled.

    A 400k-character paste costs ~40 ms to encode exactly, on the request path. The fill
    ratio only has to place the request in a tier, so past `_EXACT_LIMIT` characters we
    encode twelve evenly spaced 2k-character windows and scale by length (measured within
    ~2.5% on prose, code and tables; three larger windows were 6-19% off).
    """
    if len(text) <= _EXACT_LIMIT:
        return len(encoding.encode(text, disallowed_special=()))
    windows = 12
    width = _EXACT_LIMIT // windows
    step = len(text) / windows
    sampled = 0
    for i in range(windows):
        start = int(step * i + step / 2 - width / 2)
        sampled += len(encoding.encode(text[start : start + width], disallowed_special=()))
    return round(sampled * len(text) / (windows * width))
