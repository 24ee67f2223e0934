"""A credential a user pastes in chat is no fact: a fact is in every later block, so the key
would go with each request the user makes, in every session (docs/recall-quality.md: secrets
are never a fact). The turn itself is stored, as any is, and recalled when it is relevant.

The official openai SDK talks to the real proxy, in front of the stand-in provider.
"""

import httpx
import pytest

KEY = "sk-proj-Q7f2Lm9Xa4Rt8Zc1Vb6Np3Hs"
SAID = {
    "an OpenAI key": f"Remember that my OpenAI key is {KEY}.",
    "a key in a note": f"Please remember that I use {KEY} for the staging app.",
    "an AWS key": "Remember that the staging server uses AKIAIOSFODNN7EXAMPLE.",
}


def _say(proxy, text, session):
    with proxy.client(default_headers={"X-Memory-User-Id": "ivy"}) as client:
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Memory-Session-Id": session},
        )


@pytest.mark.parametrize("said", SAID)
def test_a_credential_said_in_chat_is_not_captured_as_a_fact(proxy, upstream, said):
    _say(proxy, SAID[said], "s-1")
    _say(proxy, "Remember that I skip breakfast on Mondays.", "s-1")
    proxy.flush()

    _say(proxy, "Any ideas for a quick lunch?", "s-2")
    facts = httpx.get(proxy.root + "/v1/memory/facts", headers={"X-Memory-User-Id": "ivy"})

    assert [f["value"] for f in facts.json()["facts"]] == ["I skip breakfast on Mondays"]
    block = "\n".join(m["content"] for m in upstream.last_json["messages"] if m["role"] == "system")
    facts_shown = block.split("[Relevant past context]")[0]  # excerpts quote turns, as recalled
    assert "): I skip breakfast on Mondays" in facts_shown
    assert KEY not in facts_shown and "AKIA" not in facts_shown
    assert len(proxy.layer.store.messages("ivy")) == 6  # every turn stored, the key's too
