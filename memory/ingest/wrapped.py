"""A user message a RAG front end wrapped in its retrieved documents: the user's own words.

Open WebUI (its default RAG template) and others like it send the user's last message, for that
request only, as a task over the documents they retrieved: `<context>` … `</context>` and the
question in `<user_query>` … `</user_query>`; the next request resends the bare message. moim
stores what it is sent (the log is verbatim), but the documents are not the user's words: were
they indexed as the user's turn, a returns policy or a manual page would be recalled in later
conversations as something the user said, and read for facts. So only the query is indexed and
read for facts. Both tags are needed: a user who writes `<context>` alone is indexed as typed.
"""

from __future__ import annotations

import re

_QUERY = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)


def own_words(text: str) -> str:
    """`text`, or the query inside it when a RAG front end wrapped it in retrieved documents
    (a `<context>` … `</context>` block and a `<user_query>` … `</user_query>` one)."""
    if "</context>" not in text or "<context>" not in text or "</user_query>" not in text:
        return text
    found = _QUERY.search(text)
    return found.group(1) if found is not None and found.group(1) else text
