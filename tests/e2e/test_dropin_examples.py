"""Example dialogue a character frontend sends (SillyTavern's shape): messages named
`example_user` / `example_assistant`, OpenAI's few-shot convention. They are the prompt's, not
the user's words: stored, never recalled, no fact learned from them (memory/ingest/speakers.py).
"""

import httpx
import pytest

from tests.e2e.test_recall import block_in

pytestmark = pytest.mark.both_backends

CARD = {"role": "system", "content": "You are Captain Mara, a gruff starship captain."}
EXAMPLES = [
    {"role": "user", "name": "example_user", "content": "My cabin number is EX-7070-CB."},
    {"role": "assistant", "name": "example_assistant", "content": "Then go below, now."},
    {"role": "user", "name": "example_user", "content": "I'm allergic to cats, Captain."},
    {"role": "assistant", "name": "example_assistant", "content": "Then stay off my deck."},
]


def test_example_dialogue_is_stored_but_never_recalled_nor_made_a_fact(proxy, upstream):
    upstream.script[:] = [{"content": "Aye."}, {"content": "Aye."}, {"content": "ok"}]
    mine = {"role": "user", "content": "My own cabin is deck 4, room 12, by the galley."}
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=[CARD, *EXAMPLES, mine])
        proxy.flush()
        asked = [{"role": "user", "content": "What is my cabin number, and am I allergic?"}]
        client.chat.completions.create(model="gpt-4o-mini", messages=asked)
        block = block_in(upstream.last_json["messages"]) or ""
    facts = httpx.get(proxy.root + "/v1/memory/facts", headers=proxy.admin_headers()).json()

    stored = [m.content for m in proxy.layer.store.messages("default")]
    assert EXAMPLES[0]["content"] in stored  # the log keeps the prompt as sent
    assert "deck 4, room 12" in block
    assert "EX-7070-CB" not in block and "cats" not in block
    assert not [f for f in facts["facts"] if "cat" in f["value"].lower()]
