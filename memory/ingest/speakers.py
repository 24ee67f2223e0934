"""Who said a turn: the message's `name`, or a speaker label the client wrote into its text.

Clients name speakers two ways: OpenAI's `name` field, or the text itself ("Caroline: I went
to the support group yesterday"), as transcripts and multi-party apps do. Recall should not
depend on which (issue 16): a labelled turn is indexed as if its label were its `name`, the
label cut from the text, so both embed as `Caroline: …`, both rank by the same terms (a
speaker's name is kept out of the lexical search, memory/recall/retrieval.py), and both read
`Caroline: …` in the block. The stored message stays verbatim; only derived rows change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# One to three capitalised words, a colon, then the turn; at the very start of the text.
_LABEL = re.compile(r"\A\s*([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30}){0,2}):[ \t]+(?=\S)")
# Words that open a line of prose, not a speaker ("Update: we moved to Lisbon").
_NOT_SPEAKERS = frozenset(
    "note update edit correction remember context background also info reminder question "
    "answer summary example warning error todo ps tip step goal problem task fyi btw re "
    "subject important p.s. q a user assistant human ai bot system".split()
)


# OpenAI's few-shot convention: example dialogue sent as messages named `example_user` and
# `example_assistant` (SillyTavern and other character frontends send a character's example
# dialogue so, as system messages or as user and assistant turns). They are the prompt's, not
# the user's words: stored, never recalled.
EXAMPLE_SPEAKERS = frozenset({"example_user", "example_assistant"})


def is_an_example(name: str | None) -> bool:
    """Whether a message named `name` is example dialogue (`EXAMPLE_SPEAKERS`)."""
    return name is not None and name.strip().lower() in EXAMPLE_SPEAKERS


def several_speakers(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the request's user messages carry two or more speakers' names (examples aside).

    A multi-agent team's group chat (AutoGen, CrewAI) sends the other agents' words as user
    messages with their `name`, as a chat room sends each member's: moim cannot tell which
    speaker is its user, so facts are not read from named messages there. One name (a chat
    that names its user, a transcript's first speaker) is the user's."""
    names = {
        name.strip()
        for m in messages
        if m.get("role") == "user"
        and isinstance(name := m.get("name"), str)
        and name.strip()
        and not is_an_example(name)
    }
    return len(names) >= 2


# The most of a `name` the derived rows keep: OpenAI's own limit for it. A client may send
# any string, and a longer one filled what the model embeds and the excerpt's room, so the
# turn was never recalled.
MAX_SPEAKER_CHARS = 64


def split_speaker(name: str | None, text: str) -> tuple[str | None, str]:
    """(speaker, text): `name` (on one line, cut to `MAX_SPEAKER_CHARS`) and `text` when a
    name is given or the text has no label; else the label's name and the text after it.

    >>> split_speaker(None, "Caroline: I went to a support group.")
    ('Caroline', 'I went to a support group.')
    """
    if name:
        return " ".join(name.split())[:MAX_SPEAKER_CHARS], text
    match = _LABEL.match(text)
    if match is None or match.group(1).lower() in _NOT_SPEAKERS:
        return name, text
    return match.group(1), text[match.end() :]
