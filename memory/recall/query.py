"""Step 3a, the query: what recall searches for in a request.

The last user message says what the user is asking now; a short one ("yes, do that") says
little on its own, so the tail of the turn before it joins it. A long one (a pasted email, a
log) often asks its question at the end, past what the embedder and the keyword search read
of it (their first 254 tokens, 24 terms), so its tail leads the query. A request with no user
message (an agent whose client trimmed its task away, keeping the tool rounds) searches for
the session's latest stored user message, what the agent is working on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory.block.tokens import message_text

# A last user message shorter than this many words ("yes, do that", "why?") says little on
# its own; the preceding assistant turn is added to the query.
_SHORT_QUERY_WORDS = 6
# What recall reads of a question: the model embeds its first 254 tokens and the lexical search
# takes its first 24 terms, well inside this; the rest of a pasted document of megabytes was
# tokenized whole (holding the GIL: 2 MB froze every request for 6 s) and scanned for dates,
# identifiers and names, a few seconds a megabyte each.
QUERY_CHARS = 16_000
_CONTEXT_CHARS = 300
# A last user message longer than this has its last `_TAIL_CHARS` read first: a question after
# a pasted document ("…\n\nUnrelated, but what's my router serial?") was never searched for.
_LONG_CHARS = 1_000
_TAIL_CHARS = 200


def build_query(messages: Sequence[Mapping[str, Any]]) -> str:
    """The last user message (its first `QUERY_CHARS`, led by its tail when it is long), plus
    the tail of the previous turn when it is short."""
    last_user = None
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            last_user = index
            break
    if last_user is None:
        return ""
    text = message_text(messages[last_user]).strip()
    query = text[:QUERY_CHARS]
    if len(text) > _LONG_CHARS:
        query = _tail(text) + "\n" + query
    before = messages[last_user - 1] if last_user > 0 else None
    if len(query.split()) < _SHORT_QUERY_WORDS and before and before.get("role") != "system":
        previous = message_text(before).strip()
        if previous:
            query = previous[-_CONTEXT_CHARS:] + "\n" + query
    return query


def _tail(text: str) -> str:
    """The last `_TAIL_CHARS` of `text` (longer than that), less a word cut at its start."""
    tail = text[-_TAIL_CHARS:]
    if text[-_TAIL_CHARS - 1].isspace():
        return tail
    words = tail.split(maxsplit=1)
    return words[1] if len(words) == 2 else tail


def task_query(messages: Sequence[Mapping[str, Any]], task: str | None) -> str:
    """The query of a request with no user message (an agent whose client trimmed the task
    away, keeping its tool rounds): `task`, the session's latest stored user message, else
    the last thing said in the request (a tool's result, an assistant's text)."""
    if task and task.strip():
        return task[:QUERY_CHARS].strip()
    for message in reversed(messages):
        said = message_text(message)[:QUERY_CHARS].strip()
        if said and message.get("role") != "system":
            return said
    return ""
