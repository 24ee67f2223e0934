"""The room a request leaves in its model's context window, and the cap it sets on the block.

The fill ratio counts a request's messages (`memory.count_message_tokens`: their text, tool
calls, a legacy function call, and names). A provider counts more against the window: the
tool and function definitions the request offers (and moim's own memory tools, when
`X-Memory-Tools` is on), a response schema, and each image, audio clip or file among the
messages. An agent with many tools near its window was pushed over it by a block sized for its
messages alone. `room_left` takes them out of the room too:

- definitions (chat's `tools`, `functions`, `response_format`; the Responses API's `tools`,
  `text`) are counted with tiktoken over their compact JSON. Providers render them otherwise
  (OpenAI writes a function as a TypeScript-like signature, with fewer tokens than its JSON
  schema), so this is a fair, conservative estimate. They are counted only when the room could
  be smaller than the largest block: a token is at least a byte, so definitions never cost
  more tokens than the request has bytes, and with that much room to spare the block fits
  whatever they cost (most requests: nothing is serialised or counted).
- moim's memory tools are counted whenever the header (or config) turns them on, as the
  mode offers them, on any route (through litellm, or with `n` > 1, the loop does not add
  them: the estimate is then conservative). Their results, which later rounds of the loop
  append, are not known when the block is made: they are not counted.
- an image, audio or file part counts `MEDIA_PART_TOKENS` (OpenAI's largest image: 1,536
  tokens for the patch-counted models, 1,105 for GPT-4o's tiles). A long audio clip, a PDF
  of many pages or a model that counts images more may cost more; a provider's refusal of a
  request too long for its window is then retried without the block (`proxy/overflow.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memory import Settings, count_tokens
from proxy.identity import Identity
from proxy.tools import SCHEMAS, offered

if TYPE_CHECKING:
    from proxy.exchange import Conversation

MEDIA_PART_TOKENS = 1_536
# Chat's image, audio and file parts, and the Responses API's.
_MEDIA_TYPES = frozenset({"image_url", "input_audio", "file", "input_image", "input_file"})
# Per excerpt, the characters around its text: its heading line and speaker prefixes.
_EXCERPT_FRAME_CHARS = 120
# The block's own lines (its delimiters, preamble, section lines), and the framing of its own
# system message (memory.count_message_tokens: 3 a message), with a margin.
_BLOCK_FRAME_TOKENS = 256
_MESSAGE_FRAME_TOKENS = 8
# moim's tool schemas as the loop sends them, serialised once.
_SCHEMA_JSON = {name: json.dumps(schema, separators=(",", ":")) for name, schema in SCHEMAS.items()}


def room_left(
    conversation: Conversation, who: Identity, tokens: int, window: int, size: int, largest: int
) -> int:
    """The tokens the window has left for the block: less the request's `tokens` (its
    messages as measured), the reply it reserves, its media parts and the definitions it
    offers (counted only when the room could be under `largest`, the largest block; `size`
    is the request body's bytes)."""
    model = conversation.model
    room = window - tokens - conversation.reply_tokens
    room -= conversation.media_parts * MEDIA_PART_TOKENS
    if who.tools:
        room -= sum(count_tokens(_SCHEMA_JSON[name], model) for name in offered(who.mode))
    if conversation.definitions and room < largest + size:
        room -= definition_tokens(conversation.definitions, model, room)
    return room


def definition_tokens(definitions: Iterable[Any], model: str, past: int) -> int:
    """Tokens of tool, function and schema definitions, over their compact JSON; a list (of
    tools) item by item, so each tool's count is remembered from one request to the next.

    Counted until the total is over `past` (the room: none is left then, whatever the rest):
    a request offering 100,000 tools (30 MB) was counted whole, ~10 s of CPU on the request
    path, for a window of thousands of tokens."""
    total = 0
    for definition in definitions:
        items = definition if isinstance(definition, list) else [definition]
        for item in items:
            text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
            total += count_tokens(text, model)
            if total > past:
                return total
    return total


def media_parts(messages: Sequence[Mapping[str, Any]]) -> int:
    """Parts of the messages' content that are no text: images, audio, files."""
    count = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for part in content if _is_media(part))
    return count


def _is_media(part: Any) -> bool:
    """Whether a content part is an image, audio or file."""
    return isinstance(part, Mapping) and part.get("type") in _MEDIA_TYPES


def largest_block(settings: Settings) -> int:
    """Tokens the largest block the settings allow may take: a token at most every half
    character of excerpt, the facts' cap, and the block's own lines."""
    excerpts = max(
        (r.max_excerpts * (r.max_chars + _EXCERPT_FRAME_CHARS) for r in settings.tier_rules),
        default=0,
    )
    return 2 * excerpts + settings.facts_max_tokens + _BLOCK_FRAME_TOKENS


def block_budget(asked: int | None, room: int, largest: int) -> int | None:
    """The cap on the block's tokens: the client's (`X-Memory-Context-Budget`), and no more
    than the `room` the context window has once the request and the reply it reserves are
    in, so memory never pushes a request that fits over the window (the provider would
    refuse it); a request already over gets no block, and the provider's own error. None
    when nothing caps it: the room then holds the `largest` block, and the block is not
    counted on the request path."""
    if room >= largest:
        return asked
    left = max(room - _MESSAGE_FRAME_TOKENS, 0)
    return left if asked is None else min(asked, left)
