"""A user holds at most `MAX_CURRENT_FACTS` current facts, however they are written.

Every request of a user reads all their current facts to choose the block's: one import of
100,000 made each of their requests hold the GIL every other user's request needs for 1.5 s.
Past the limit the API and imports answer a 400 (`too_many_facts`) and store nothing; a
changed value of a key already held, and chat, go on as before.
"""

import json

import httpx
from click.testing import CliRunner

from memory.store.fact_limit import MAX_CURRENT_FACTS
from proxy.cli import main


def api(proxy, user):
    return httpx.Client(
        base_url=proxy.root + "/v1/memory", headers={"X-Memory-User-Id": user}, timeout=60
    )


def import_file(template, facts, message=None):
    """An import file of `facts` current facts like `template` (an exported row), keys k0…"""
    lines = [json.dumps({**template, "id": n + 1, "key": f"k{n}"}) for n in range(facts)]
    if message is not None:
        lines.insert(0, json.dumps(message))
    return "\n".join(lines).encode()


def exported_fact(proxy):
    """A current fact row as `/v1/memory/export` writes it (set for, and forgotten by, `tmp`)."""
    with api(proxy, "tmp") as tmp:
        tmp.post("/facts", json={"key": "pet", "value": "a dog named Rex"})
        [row] = [json.loads(line) for line in tmp.get("/export").text.splitlines()]
        tmp.delete("")
    return row


def test_past_the_limit_a_new_key_is_refused_and_a_changed_one_is_not(proxy):
    template = exported_fact(proxy)
    with api(proxy, "ann") as ann:
        filled = ann.post("/import", content=import_file(template, MAX_CURRENT_FACTS))
        assert filled.status_code == 200, filled.text

        refused = ann.post("/facts", json={"key": "one_more", "value": "past the limit"})
        changed = ann.post("/facts", json={"key": "k7", "value": "a cat named Tom"})

        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "too_many_facts"
        assert changed.status_code == 200
        assert ann.get("/facts/one_more/history").status_code == 404
        assert ann.delete("/facts/k8").status_code == 200
        assert ann.post("/facts", json={"key": "one_more", "value": "room now"}).status_code == 200
        assert ann.get("/stats").json()["facts"] == MAX_CURRENT_FACTS


def test_an_import_past_the_limit_is_refused_whole(proxy):
    template = exported_fact(proxy)
    message = {
        "type": "message",
        "session_id": "s1",
        "message_key": "k#1",
        "content_hash": "k",
        "role": "user",
        "content": "My kayak is at berth 12",
        "created_at": 1_700_000_000,
    }
    with api(proxy, "bob") as bob:
        body = import_file(template, MAX_CURRENT_FACTS + 1, message)
        refused = bob.post("/import", content=body)

        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "too_many_facts"
        stats = bob.get("/stats").json()
        assert (stats["messages"], stats["facts"]) == (0, 0)


def test_chat_goes_on_for_a_user_at_the_limit(proxy, upstream):
    template = exported_fact(proxy)
    with api(proxy, "cal") as cal:
        assert cal.post("/import", content=import_file(template, MAX_CURRENT_FACTS)).is_success
    with proxy.client(default_headers={"X-Memory-User-Id": "cal"}) as client:
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "My name is Dana."}]
        )
    proxy.flush()
    assert answer.choices[0].message.content.startswith("echo: ")
    with api(proxy, "cal") as cal:
        assert cal.get("/facts/name/history").status_code == 404  # not captured: no room
        assert cal.get("/stats").json()["messages"] == 2


def test_an_operators_import_is_not_capped(proxy, tmp_path):
    """`moim memory import` (and `moim copy`) move a database whole, whatever its users hold."""
    path = tmp_path / "past-the-limit.jsonl"
    path.write_bytes(import_file(exported_fact(proxy), MAX_CURRENT_FACTS + 1))
    env = {"MOIM_DB": str(tmp_path / "cli.db"), "MOIM_CONFIG": str(tmp_path / "none.yaml")}
    (tmp_path / "none.yaml").write_text("")
    assert CliRunner().invoke(main, ["migrate"], env=env).exit_code == 0

    result = CliRunner().invoke(main, ["memory", "import", "--user", "dee", str(path)], env=env)
    listed = CliRunner().invoke(main, ["facts", "list", "--user", "dee"], env=env)

    assert result.exit_code == 0, result.output
    assert len([line for line in listed.output.splitlines() if line.startswith("k")]) == (
        MAX_CURRENT_FACTS + 1
    )
