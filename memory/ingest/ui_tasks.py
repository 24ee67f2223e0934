"""Background task requests of chat UIs: not conversations, so not memory.

Chat UIs that users point at an OpenAI base URL send, beside the chat, requests of their own
through the same endpoint and the same model: Open WebUI asks for a title, tags, follow-up
questions, search queries, an image prompt, an autocompletion, an emoji; LibreChat and
LobeChat for a title. Each is one user message (after any system prompt the UI adds): an
instruction and a copy of the chat's transcript. Taken for a conversation, it gets a memory
block (the user pays for it two or three times a turn), and its prompt (a copy of the chat)
and its reply (a title) are stored as the user's words, to come back in recall as duplicates
and noise. With Open WebUI's chat id header, in the chat's own session too.

`ui_task` tells them by their shape, narrowly (docs/dropin.md lists the templates read):

- the request holds no assistant, tool or function message and exactly one user message;
- one of its messages carries a known UI's instruction AND the transcript in the form that UI
  writes it (Open WebUI, in the user message: `### Task:` with a `<chat_history>` block of
  `USER: …` lines, or its tool-choice prompt over `Query: History:` and the chat's last turns,
  each in triple quotes;
  LibreChat: its title instruction with `User: … / AI: …` lines, or its `||>User:` /
  `||>Response:` markers; LobeChat: its summarizer system prompt over a `role: …` transcript,
  or a `<conversation>` of role tags).

Words alone never match: a user who types "### Task: write a title for my blog post" is
remembered. A miss costs what moim did before (the task stored as a turn); a false match costs
a user's message, so every rule asks for both the instruction and the embedded transcript.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from memory.block.tokens import message_text

OPEN_WEBUI = "open-webui"
LIBRECHAT = "librechat"
LOBECHAT = "lobechat"

# Messages a task request never holds: a task is asked in one go, nothing answered yet.
_ANSWERED = frozenset({"assistant", "tool", "function"})
_INSTRUCTING = frozenset({"system", "developer"})

# Open WebUI renders `{{MESSAGES…}}` as one `ROLE: text` line a message (role upper-cased).
_TASK_HEADING = re.compile(r"^### Task:", re.MULTILINE)
_UPPER_ROLE_LINE = re.compile(r"(?:USER|ASSISTANT|SYSTEM):")
# Its emoji and merge-responses (MoA) tasks embed a message, or the models' answers, instead.
_EMOJI_OPENING = "Your task is to reflect the speaker's likely facial expression"
_MOA_OPENING = "You have been provided with a set of responses from various models"
# Its tool choice (function calling in its default mode, before a chat turn with tools): the
# tools' specs as system prompt, then the chat's last messages and the query it copies.
_TOOLS_SYSTEM = "Available Tools: "
_TOOLS_QUERY = re.compile(r'Query: (?:Query: |History:\n(?:USER|ASSISTANT|SYSTEM): """)')

# LibreChat's title instructions (its agents' structured and completion methods, its legacy
# clients), each followed by the transcript it builds.
_LIBRECHAT_OPENINGS = (
    "Analyze this conversation and provide:",
    "Provide a concise, 5-word-or-less title for the conversation",
    "Please generate a concise, 5-word-or-less title for the conversation",
    "Write a concise title for this conversation",
)
# Each transcript is a first marker and a later second one, each searched for once: a lazy
# `first.*?second` is tried from every first marker to the end of the text, quadratic on a
# pasted log of `User:` lines with no `AI:` one (minutes for 1 MB).
_USER_LINE = re.compile(r"^User: ", re.MULTILINE)
_AI_LINE = re.compile(r"^AI: ", re.MULTILINE)
_LEGACY_USER = re.compile(r'^[^\S\n]*\|\|>User:\s*"', re.MULTILINE)
_LEGACY_RESPONSE = re.compile(r'\|\|>Response:\s*"')

# LobeChat's title chain: this system prompt, then the chat as `role: text` lines (1.x) or as
# role tags inside `<conversation>` (2.x).
_LOBECHAT_SYSTEM = "You are a professional conversation summarizer."
_LOWER_ROLE_LINE = re.compile(r"(?:user|assistant|system): ")
_CONVERSATION_OPENS = re.compile(r"<conversation>\s*<(?:user|assistant|system)>")
_CONVERSATION_ENDS = re.compile(r"</(?:user|assistant|system)>\s*</conversation>")


def ui_task(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The chat UI whose background task `messages` are (`"open-webui"`, `"librechat"`,
    `"lobechat"`), or None for a conversation (anything else, including when unsure).

    Reads roles first, so a conversation under way (an assistant message in it) costs one
    look at a few roles; only a request of one user message has its text read.
    """
    user: str | None = None
    instructions: list[str] = []
    for message in messages:
        role = message.get("role")
        if role in _ANSWERED:
            return None
        if role == "user":
            if user is not None:
                return None
            user = message_text(message)
        elif role in _INSTRUCTING:
            instructions.append(message_text(message))
    if user is None:
        return None
    if _open_webui(user):  # sent as the user message, never as a system prompt
        return OPEN_WEBUI
    if any(_librechat(text) for text in (user, *instructions)):
        return LIBRECHAT
    if _TOOLS_QUERY.match(user) and any(s.startswith(_TOOLS_SYSTEM) for s in instructions):
        return OPEN_WEBUI
    if any(s.lstrip().startswith(_LOBECHAT_SYSTEM) for s in instructions) and _lobechat(user):
        return LOBECHAT
    return None


def _open_webui(text: str) -> bool:
    """A `### Task:` instruction with a `<chat_history>` transcript (title, tags, follow-ups,
    queries, image prompt), or with an empty one and the `<text>` to complete (an
    autocompletion in a new chat); or the emoji or merge-responses instruction with what it
    embeds."""
    stripped = text.lstrip()
    if stripped.startswith(_EMOJI_OPENING):
        return "Message: ```" in text and text.rstrip().endswith("```")
    if stripped.startswith(_MOA_OPENING):
        return 'Responses from models: """' in text
    start = text.find("<chat_history>")
    if start < 0:
        return False
    end = text.find("</chat_history>", start)
    if end < 0 or not _TASK_HEADING.search(text, 0, start):
        return False
    history = text[start + len("<chat_history>") : end].strip()
    if not history:
        tail = text[end:]
        return "<text>" in tail and "</text>" in tail
    return _UPPER_ROLE_LINE.match(history) is not None


def _librechat(text: str) -> bool:
    """One of LibreChat's title instructions, then its transcript: `User: …` and `AI: …`
    lines, or its legacy `||>User:` / `||>Response:` markers."""
    stripped = text.lstrip()
    if not stripped.startswith(_LIBRECHAT_OPENINGS):
        return False
    return _in_turn(text, _USER_LINE, _AI_LINE) or _in_turn(text, _LEGACY_USER, _LEGACY_RESPONSE)


def _lobechat(text: str) -> bool:
    """The user message of LobeChat's title chain: the chat as `role: text` lines, or a
    `<task>` with the chat in a `<conversation>` of role tags."""
    stripped = text.lstrip()
    if stripped.startswith("<task>"):
        return _in_turn(stripped, _CONVERSATION_OPENS, _CONVERSATION_ENDS)
    return _LOWER_ROLE_LINE.match(stripped) is not None


def _in_turn(text: str, first: re.Pattern[str], then: re.Pattern[str]) -> bool:
    """Whether `then` matches somewhere after the first match of `first` (linear time)."""
    found = first.search(text)
    return found is not None and then.search(text, found.end()) is not None
