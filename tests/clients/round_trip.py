"""The memory round trip of every real client test: said in one conversation, recalled later.

The client says `FACT` in a conversation of its own; after `/v1/memory/flush`, it asks
`QUESTION` in a new conversation, and the request the fake upstream received must carry the
MOIM block with the fact in it.
"""

from memory import BLOCK_END, BLOCK_START

USER = "client-tester"
FACT = "My cat is called Whiskers and she sleeps on the piano every afternoon."
QUESTION = "What is the name of my cat?"
NEEDLE = "Whiskers"


def block_in(messages):
    """The MOIM block in a list of chat messages, or None."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and BLOCK_START in content:
            start = content.index(BLOCK_START)
            return content[start : content.index(BLOCK_END, start) + len(BLOCK_END)]
    return None


def assert_recalled(upstream, messages=None):
    """A chat request asking `QUESTION` (the last one upstream, unless `messages` are given)
    carries the block, and the fact is in it."""
    messages = upstream.last_json["messages"] if messages is None else messages
    block = block_in(messages)
    assert block is not None, messages
    assert NEEDLE in block
    assert any(QUESTION in str(m.get("content")) for m in messages if m["role"] == "user")


def assert_not_recalled_yet(upstream):
    """The first conversation had nothing to recall: no block reached the provider."""
    assert block_in(upstream.last_json["messages"]) is None
