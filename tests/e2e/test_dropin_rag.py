"""A RAG front end (Open WebUI's default template) wraps the user's last message in the
documents it retrieved, for that request only, and resends the bare message next turn. The
documents are not the user's words: only the query is indexed and read for facts
(memory/ingest/wrapped.py); the log keeps the message as sent."""

import pytest

from memory.ingest.wrapped import own_words
from tests.e2e.test_recall import block_in

pytestmark = pytest.mark.both_backends

RAG = (
    "### Task:\nRespond to the user query using the provided context.\n\n<context>\n"
    "Returns policy, section 4: items bought online can be returned within 30 days; the "
    "returns desk code is RG-4410-DOC. I live in Reykjavik, wrote the policy's author.\n"
    "</context>\n\n<user_query>\n{}\n</user_query>"
)


def test_the_documents_around_a_users_message_are_not_recalled_as_theirs(proxy, upstream):
    asked = "Can I still return the lamp I bought online last week? I live in Porto by the way."
    upstream.script[:] = [{"content": "Yes, within 30 days."}, {"content": "ok"}]
    with proxy.client() as client:
        wrapped = [{"role": "user", "content": RAG.format(asked)}]
        client.chat.completions.create(model="gpt-4o-mini", messages=wrapped)
        proxy.flush()
        question = [{"role": "user", "content": "What's the returns desk code, and the lamp?"}]
        client.chat.completions.create(model="gpt-4o-mini", messages=question)
        block = block_in(upstream.last_json["messages"]) or ""
    facts = {f.key: f.value for f in proxy.layer.facts("default")}

    assert "RG-4410-DOC" not in block and "lamp I bought online" in block
    assert facts.get("home_city") == "Porto"
    assert RAG.format(asked) in [m.content for m in proxy.layer.store.messages("default")]


@pytest.mark.parametrize(
    ("text", "own"),
    [
        (RAG.format("Is it open on Sundays?"), "Is it open on Sundays?"),
        ("I wrote <context> in my notes and <user_query> too.", None),
        ("<user_query>just this</user_query>", None),
    ],
)
def test_only_a_message_with_both_blocks_is_read_as_its_query(text, own):
    assert own_words(text) == (own if own is not None else text)
