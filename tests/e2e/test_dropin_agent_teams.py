"""A multi-agent team's group chat (AutoGen's, CrewAI's shape): the other agents' words come as
user messages with their `name`. moim cannot tell which speaker is its user, so no fact is read
from a named message there (memory/ingest/speakers.py `several_speakers`); the turns are
stored and recalled as ever. One name alone is the user's own: its facts are read."""

import httpx
import pytest

pytestmark = pytest.mark.both_backends

TEAM = [
    {"role": "system", "content": "You are the Writer in a team. Draft the travel guide."},
    {"role": "user", "name": "Admin", "content": "Team, draft a guide to Kyoto for families."},
    {
        "role": "user",
        "name": "Researcher",
        "content": "I live in Osaka and my name is Kenji, so I know the trains well.",
    },
]


def facts(proxy):
    found = httpx.get(proxy.root + "/v1/memory/facts", headers=proxy.admin_headers()).json()
    return {f["key"]: f["value"] for f in found["facts"]}


def test_an_agent_teams_named_speakers_give_the_user_no_facts(proxy, upstream):
    upstream.script[:] = [{"content": "Draft: Kyoto with kids."}]
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=TEAM)
        proxy.flush()

    stored = [m.content for m in proxy.layer.store.messages("default")]
    assert TEAM[2]["content"] in stored
    assert "home_city" not in facts(proxy) and "name" not in facts(proxy)


def test_one_named_speaker_is_the_user(proxy, upstream):
    upstream.script[:] = [{"content": "Nice to meet you."}]
    said = {"role": "user", "name": "Kenji", "content": "I live in Osaka and my name is Kenji."}
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=[said])
        proxy.flush()

    assert facts(proxy).get("home_city") == "Osaka"
