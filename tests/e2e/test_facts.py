"""Semantic memory through the real proxy: facts the user states, or sets through the API, are
in every later block under their policy's heading, at every tier; a new value supersedes the
old one, which stays in the history; forgetting archives; TTLs expire; users never share.

CONTRACT.md, "Memory API" and "The memory block"; the CLI group `moim facts` on a temp DB.
"""

import json
import time

import httpx
import pytest
from click.testing import CliRunner

from proxy.cli import main

pytestmark = pytest.mark.both_backends

BLOCK_START = "=== Memory Context ==="
KNOWN = "[Known about the user]"
SILENT = "[Use silently — do not mention]"
AVOID = "[Do not bring up unless the user does]"
PAST = "[Relevant past context]"


def say(proxy, text, user="ann", **kwargs):
    """One chat turn as `user` through the openai SDK; the raw response (for headers)."""
    with proxy.client(default_headers={"X-Memory-User-Id": user}) as client:
        return client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": text}], **kwargs
        )


def block_sent(upstream):
    """The MOIM block the upstream received in the last request, or None."""
    first = upstream.last_json["messages"][0]
    if first["role"] != "system" or not first["content"].startswith(BLOCK_START):
        return None
    return first["content"]


def section(block, heading):
    """The lines under one section heading of a block."""
    lines = block.splitlines()
    if heading not in lines:
        return []
    body = lines[lines.index(heading) + 1 :]
    end = next((i for i, line in enumerate(body) if not line.startswith("- ")), len(body))
    return body[:end]


def api(proxy, user="ann"):
    return httpx.Client(
        base_url=proxy.root + "/v1/memory", headers={"X-Memory-User-Id": user}, timeout=10
    )


def test_a_name_said_once_is_in_later_blocks_even_when_the_context_is_nearly_full(
    make_proxy, upstream
):
    proxy = make_proxy(settings={"context_windows": {"gpt-4o-mini": 300}})
    say(proxy, "Hi! My name is Dana.")
    proxy.flush()

    # ρ ≈ 0.82, and room left in the window for the block (which never pushes a request over)
    long_question = "Please summarise the plot of a long novel for me. " * 20
    response = say(proxy, long_question)

    assert response.headers["x-memory-tier"] == "3"
    assert float(response.headers["x-memory-fill-ratio"]) >= 0.70
    assert response.headers["x-memory-facts-injected"] == "1"
    block = block_sent(upstream)
    assert section(block, KNOWN) == ["- name: Dana"]
    assert PAST not in block


def test_moving_supersedes_the_old_city_which_stays_in_the_history(make_proxy, upstream):
    proxy = make_proxy(settings={"context_windows": {"gpt-4o-mini": 300}})
    say(proxy, "I live in Berlin")
    proxy.flush()
    say(proxy, "Big news: I moved from Berlin to Lisbon")
    proxy.flush()

    say(proxy, "Where should I go for dinner tonight? " * 25)

    assert section(block_sent(upstream), KNOWN) == ["- home city: Lisbon"]
    with api(proxy) as client:
        history = client.get("/facts/home_city/history").json()
        current = client.get("/facts").json()["facts"]
    assert [(f["value"], f["status"], f["source"]) for f in history["facts"]] == [
        ("Berlin", "superseded", "user_stated"),
        ("Lisbon", "active", "user_stated"),
    ]
    assert [(f["key"], f["value"]) for f in current] == [("home_city", "Lisbon")]


def test_a_correction_of_what_was_said_before_supersedes_the_city(proxy, upstream):
    say(proxy, "I live in Manchester.")
    proxy.flush()
    say(
        proxy, "Small correction to what I said before: I actually live in Salford, not Manchester."
    )
    proxy.flush()

    say(proxy, "Which city do I live in?")

    assert section(block_sent(upstream), KNOWN) == ["- home city: Salford"]


def test_an_avoid_fact_appears_only_under_the_do_not_bring_up_heading(proxy, upstream):
    with api(proxy) as client:
        client.post(
            "/facts",
            json={"key": "ex", "value": "Sam", "category": "relationship", "policy": "avoid"},
        ).raise_for_status()
        client.post(
            "/facts",
            json={
                "key": "tone",
                "value": "short answers",
                "category": "preference",
                "policy": "adapt",
            },
        )
        client.post("/facts", json={"key": "name", "value": "Dana", "category": "profile"})

    say(proxy, "What should I cook tonight?")

    block = block_sent(upstream)
    assert section(block, KNOWN) == ["- name: Dana"]
    assert section(block, SILENT) == ["- tone: short answers"]
    assert section(block, AVOID) == ["- ex: Sam"]
    assert block.count("Sam") == 1


def test_forgetting_archives_the_fact_out_of_the_block_into_its_history(proxy, upstream):
    say(proxy, "My name is Dana")
    proxy.flush()
    with api(proxy) as client:
        deleted = client.delete("/facts/name")
        history = client.get("/facts/name/history").json()["facts"]
        again = client.delete("/facts/name")

    say(proxy, "What is my name?")

    assert deleted.status_code == 200
    assert (deleted.json()["key"], deleted.json()["status"]) == ("name", "archived")
    assert [(f["value"], f["status"]) for f in history] == [("Dana", "archived")]
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "fact_not_found"
    assert block_sent(upstream) is None or KNOWN not in block_sent(upstream)


@pytest.mark.parametrize(
    "ended",
    ["I'm no longer a nurse.", "I am not a nurse anymore", "I'm no longer a nurse at St Mary's"],
)
def test_a_job_said_to_be_over_leaves_the_known_facts(proxy, upstream, ended):
    """'I'm a nurse' set the job title; 'I'm no longer a nurse' left it in every later block
    under [Known about the user], as true."""
    say(proxy, "I'm a nurse at St Mary's.")
    say(proxy, ended)
    proxy.flush()

    say(proxy, "What do I do for a living?", extra_headers={"X-Memory-Mode": "read"})

    assert "nurse" not in " ".join(section(block_sent(upstream) or "", KNOWN))
    with api(proxy) as client:
        assert "job_title" not in [f["key"] for f in client.get("/facts").json()["facts"]]


@pytest.mark.parametrize(
    "ended",
    ["I quit my job at St Mary's.", "I've retired!", "I was made redundant last week."],
)
def test_a_job_that_ended_leaves_the_known_facts(proxy, upstream, ended):
    """'I quit my job at St Mary's', 'I've retired' forgot nothing: every later block still
    said the user was a nurse at St Mary's (session 24)."""
    say(proxy, "I work as a nurse at St Mary's.")
    say(proxy, ended)
    proxy.flush()

    say(proxy, "What do I do for a living?", extra_headers={"X-Memory-Mode": "read"})

    known = " ".join(section(block_sent(upstream) or "", KNOWN))
    assert "nurse" not in known and "St Mary" not in known
    with api(proxy) as client:
        assert client.get("/facts").json()["facts"] == []
        history = client.get("/facts/employer/history").json()
    assert [(f["value"], f["status"]) for f in history["facts"]] == [("St Mary's", "archived")]


def test_a_pet_that_died_and_a_car_sold_leave_the_known_facts_but_not_another_pet(proxy, upstream):
    """'my cat died', 'we sold the car' left the cat and the car in every later block."""
    for text in (
        "I have a cat called Rufus.",
        "I have a dog called Pip.",
        "My car is a Fiat 500 now.",
        "My sister's dog died.",
        "My cat died last week.",
        "We sold the car.",
    ):
        say(proxy, text)
    proxy.flush()

    say(proxy, "Any pets or cars?", extra_headers={"X-Memory-Mode": "read"})

    assert section(block_sent(upstream) or "", KNOWN) == ["- pet (pip): dog named Pip"]


@pytest.mark.parametrize(
    "changed",
    [
        "Big change: I left nursing, I'm a software tester at Acme now.",
        "I'm now a software tester at Acme.",
        "I've started a new job as a software tester at Acme.",
    ],
)
def test_a_new_job_in_another_trade_supersedes_the_old_one(proxy, upstream, changed):
    """'I'm a software tester at Acme now' set nothing ('tester' was no job): every later
    block still said the user was a nurse at St Mary's."""
    say(proxy, "I work as a nurse at St Mary's.")
    proxy.flush()
    say(proxy, changed)
    proxy.flush()

    say(proxy, "Where do I work these days?", extra_headers={"X-Memory-Mode": "read"})

    known = section(block_sent(upstream) or "", KNOWN)
    assert "- employer: Acme" in known and "- job title: software tester" in known
    assert "nurse" not in " ".join(known) and "St Mary" not in " ".join(known)


@pytest.mark.parametrize(
    "said, known",
    [
        (("I work at Stripe.", "I no longer work at Google."), ("employer", "Stripe")),
        (("I live in Lisbon.", "I don't live in Boston anymore."), ("home_city", "Lisbon")),
        (("I'm vegetarian now. I'm not vegan anymore.",), ("diet", "vegetarian")),
    ],
    ids=["employer", "home", "diet"],
)
def test_a_value_said_to_be_over_leaves_another_current_value_known(proxy, said, known):
    """'I no longer work at Google' archived the employer whatever it was: Stripe, said
    before, was gone from every later block."""
    for text in said:
        say(proxy, text)
    proxy.flush()
    with api(proxy) as client:
        facts = [(f["key"], f["value"]) for f in client.get("/facts").json()["facts"]]
    assert facts == [known]


def test_saying_forget_my_name_archives_it_too(proxy):
    say(proxy, "My name is Dana")
    proxy.flush()
    say(proxy, "Please forget my name")
    proxy.flush()

    with api(proxy) as client:
        assert client.get("/facts").json() == {"facts": []}
        history = client.get("/facts/name/history").json()["facts"]
    assert [f["status"] for f in history] == ["archived"]


def test_a_fact_past_its_ttl_is_no_longer_injected_and_turns_stale(proxy, upstream):
    ttl = 5.0  # long enough for one chat turn on a busy machine; the test waits it out
    with api(proxy) as client:
        made = client.post(
            "/facts",
            json={
                "key": "trip",
                "value": "in Rome this week",
                "category": "episodic_event",
                "ttl_seconds": ttl,
            },
        )
        client.post("/facts", json={"key": "name", "value": "Dana", "category": "profile"})
        say(proxy, "Any tips for today?")
        before = section(block_sent(upstream), KNOWN)
        time.sleep(max(0.0, made.json()["expires_at"] - time.time()) + 0.05)
        say(proxy, "Any tips for today?")
        after = section(block_sent(upstream), KNOWN)
        proxy.flush()  # the lifecycle step (expired → stale) runs in the background writer
        statuses = {f["key"]: f["status"] for f in client.get("/facts?status=all").json()["facts"]}

    assert made.json()["expires_at"] == pytest.approx(made.json()["created_at"] + ttl)
    assert before == ["- name: Dana", "- trip: in Rome this week"]
    assert after == ["- name: Dana"]
    assert statuses == {"trip": "stale", "name": "active"}


def test_a_fact_past_its_ttl_is_not_listed_as_current_before_any_turn(proxy):
    with api(proxy) as client:
        made = client.post("/facts", json={"key": "trip", "value": "Rome", "ttl_seconds": 0.2})
        time.sleep(max(0.0, made.json()["expires_at"] - time.time()) + 0.05)
        current = client.get("/facts").json()["facts"]
        stale = client.get("/facts?status=stale").json()["facts"]
        history = client.get("/facts/trip/history").json()["facts"]

    assert current == []
    assert [(f["key"], f["status"]) for f in stale] == [("trip", "stale")]
    assert [f["status"] for f in history] == ["stale"]


def test_a_fact_past_its_ttl_is_not_counted_active_in_the_stats(proxy):
    with api(proxy) as client:
        made = client.post("/facts", json={"key": "trip", "value": "Rome", "ttl_seconds": 0.2})
        client.post("/facts", json={"key": "home", "value": "Leeds"})
        time.sleep(max(0.0, made.json()["expires_at"] - time.time()) + 0.05)
        stats = client.get("/stats").json()

    assert stats["facts"] == 1  # home; the trip has expired


def test_one_users_facts_never_reach_another_user(proxy, upstream):
    say(proxy, "My name is Dana and I live in Berlin", user="ann")
    proxy.flush()

    say(proxy, "What is my name and where do I live?", user="bob")
    bob_block = block_sent(upstream)
    with api(proxy, user="bob") as bob:
        bob_facts = bob.get("/facts?status=all").json()
        bob_history = bob.get("/facts/name/history")
    with api(proxy, user="ann") as ann:
        ann_id = ann.get("/facts").json()["facts"][0]["id"]
    with api(proxy, user="bob") as bob:
        bob_delete = bob.delete(f"/facts/{ann_id}")

    assert bob_block is None or "Dana" not in bob_block
    assert bob_facts == {"facts": []}
    assert bob_history.status_code == 404
    assert bob_delete.status_code == 404
    with api(proxy, user="ann") as ann:
        assert [f["value"] for f in ann.get("/facts").json()["facts"]] == ["Dana", "Berlin"]


def test_the_id_returned_on_write_is_accepted_by_delete(proxy):
    with api(proxy) as client:
        made = client.post(
            "/facts", json={"key": "Favourite Colour", "value": "green", "category": "preference"}
        ).json()
        deleted = client.delete(f"/facts/{made['id']}")
        listed = client.get("/facts").json()

    assert set(made) == {
        "id",
        "key",
        "value",
        "category",
        "policy",
        "pinned",
        "status",
        "confidence",
        "source",
        "created_at",
        "updated_at",
        "expires_at",
    }
    assert (made["key"], made["policy"], made["pinned"], made["source"]) == (
        "favourite_colour",
        "speak",
        False,
        "api",
    )
    assert (deleted.json()["id"], deleted.json()["status"]) == (made["id"], "archived")
    assert listed == {"facts": []}


def test_pinned_facts_come_first_and_unpin_restores_the_order(proxy, upstream):
    with api(proxy) as client:
        client.post("/facts", json={"key": "name", "value": "Dana", "category": "profile"})
        client.post("/facts", json={"key": "pet", "value": "a cat", "category": "profile"})
        pinned = client.post("/facts/pet/pin").json()
        say(proxy, "Hello there")
        with_pin = section(block_sent(upstream), KNOWN)
        unpinned = client.post("/facts/pet/unpin").json()
        missing = client.post("/facts/nothing/pin")

    assert (pinned["pinned"], unpinned["pinned"]) == (True, False)
    assert with_pin == ["- pet: a cat", "- name: Dana"]
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"value": "Dana"}, "key"),
        ({"key": "name"}, "value"),
        ({"key": "name", "value": ""}, "value"),
        ({"key": "name", "value": "x" * 501}, "value"),
        ({"key": "!!!", "value": "Dana"}, "key"),
        ({"key": "name", "value": "Dana", "category": "Not A Word"}, "category"),
        ({"key": "name", "value": "Dana", "policy": "shout"}, "policy"),
        ({"key": "name", "value": "Dana", "pinned": "yes"}, "pinned"),
        ({"key": "name", "value": "Dana", "ttl_seconds": -1}, "ttl_seconds"),
        ({"key": "name", "value": "Dana", "ttl_seconds": 10**400}, "ttl_seconds"),
        ({"key": "name", "value": "Dana", "ttl_seconds": True}, "ttl_seconds"),
        ([1, 2], None),
    ],
)
def test_bad_fact_requests_get_openai_shaped_400s(proxy, body, param):
    with api(proxy) as client:
        response = client.post("/facts", json=body)
        listed = client.get("/facts").json()

    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert error["message"]
    assert listed == {"facts": []}


def test_a_body_that_is_not_json_an_infinite_ttl_and_an_unknown_status_are_400s(proxy):
    json_type = {"content-type": "application/json"}
    with api(proxy) as client:
        not_json = client.post("/facts", content=b"{not json", headers=json_type)
        infinite = client.post(
            "/facts",
            headers=json_type,
            content=b'{"key": "k", "value": "v", "ttl_seconds": Infinity}',
        )
        bad_status = client.get("/facts?status=deleted")

    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == "invalid_json"
    # not a JSON number at all: refused where the body is read (proxy/request_json.py)
    assert (infinite.status_code, infinite.json()["error"]["code"]) == (400, "invalid_json")
    assert bad_status.status_code == 400
    assert bad_status.json()["error"]["param"] == "status"


def test_export_carries_every_fact_row_and_import_restores_them(proxy):
    with api(proxy) as ann:
        ann.post("/facts", json={"key": "home_city", "value": "Berlin", "category": "profile"})
        ann.post("/facts", json={"key": "home_city", "value": "Lisbon", "category": "profile"})
        exported = ann.get("/export").text
    with api(proxy, user="cat") as cat:
        imported = cat.post("/import", content=exported.encode())
        history = cat.get("/facts/home_city/history").json()["facts"]

    facts = [json.loads(line) for line in exported.splitlines()]
    assert [(f["type"], f["value"], f["status"]) for f in facts] == [
        ("fact", "Berlin", "superseded"),
        ("fact", "Lisbon", "active"),
    ]
    assert imported.status_code == 200
    assert [(f["value"], f["status"]) for f in history] == [
        ("Berlin", "superseded"),
        ("Lisbon", "active"),
    ]


# -- the CLI -----------------------------------------------------------------------------------


def moim(tmp_path, *args):
    """Run `moim facts …` on a temporary database (`moim migrate` makes it); the click result."""
    env = {"MOIM_DB": str(tmp_path / "cli.db"), "MOIM_CONFIG": str(tmp_path / "none.yaml")}
    (tmp_path / "none.yaml").write_text("")
    if not (tmp_path / "cli.db").exists():
        assert CliRunner().invoke(main, ["migrate"], env=env).exit_code == 0
    return CliRunner().invoke(main, ["facts", *args], env=env)


def test_cli_sets_lists_pins_and_forgets_facts_with_history(tmp_path):
    first = moim(tmp_path, "set", "Home City", "Berlin", "--user", "ann")
    moim(tmp_path, "set", "home_city", "Lisbon", "--user", "ann", "--pin")
    listed = moim(tmp_path, "list", "--user", "ann", "--json")
    unpinned = moim(tmp_path, "unpin", "home_city", "--user", "ann")
    pinned = moim(tmp_path, "pin", "home_city", "--user", "ann")
    deleted = moim(tmp_path, "delete", str(json.loads(first.stdout)["id"]), "--user", "ann")
    history = moim(tmp_path, "history", "home_city", "--user", "ann", "--json")
    others = moim(tmp_path, "list", "--user", "bob", "--status", "all")

    assert first.exit_code == 0, first.output
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["key"], r["value"], r["pinned"], r["source"]) for r in rows] == [
        ("home_city", "Lisbon", True, "cli")
    ]
    assert json.loads(unpinned.stdout)["pinned"] is False
    assert json.loads(pinned.stdout)["pinned"] is True
    assert deleted.stdout == "archived home_city of ann\n"
    assert [
        (json.loads(line)["value"], json.loads(line)["status"])
        for line in history.stdout.splitlines()
    ] == [
        ("Berlin", "superseded"),
        ("Lisbon", "archived"),
    ]
    assert (others.exit_code, others.stdout) == (0, "")


def test_cli_reports_bad_input_and_missing_facts(tmp_path):
    bad = moim(tmp_path, "set", "name", "", "--user", "ann")
    missing = moim(tmp_path, "delete", "name", "--user", "ann")
    no_history = moim(tmp_path, "history", "name", "--user", "ann")

    assert bad.exit_code == 2 and "'value' must be 1 to 500 characters long" in bad.output
    assert missing.exit_code == 1 and "no current fact 'name'" in missing.output
    assert no_history.exit_code == 1


@pytest.mark.parametrize("command", ["list", "set", "delete", "history", "pin", "unpin"])
def test_every_facts_command_has_help_text(command):
    result = CliRunner().invoke(main, ["facts", command, "--help"])

    assert result.exit_code == 0
    assert result.output.split("\n\n")[1].strip()  # the summary under the usage line


def test_a_new_job_and_a_new_dose_supersede_the_old_values_in_the_history(proxy, upstream):
    say(proxy, "I'm a backend engineer at Zalando, mostly Java and Kotlin services.")
    say(proxy, "My doctor put me on 10 mg of lisinopril last month for blood pressure.")
    proxy.flush()
    say(proxy, "Update on my life: I started at Spotify this week as a staff engineer.")
    say(proxy, "Also the doctor raised my lisinopril to 20 mg because my readings were high.")
    proxy.flush()

    say(proxy, "Where do I work now?", extra_headers={"X-Memory-Mode": "read"})

    known = section(block_sent(upstream), KNOWN)
    assert {"- employer: Spotify", "- job title: staff engineer"} <= set(known)
    assert "- medication (lisinopril): lisinopril 20 mg" in known
    assert not any("Zalando" in line or "10 mg" in line for line in known)
    with api(proxy) as client:
        employer = client.get("/facts/employer/history").json()["facts"]
        dose = client.get("/facts/medication:lisinopril/history").json()["facts"]
    assert [(f["value"], f["status"]) for f in employer] == [
        ("Zalando", "superseded"),
        ("Spotify", "active"),
    ]
    assert [(f["value"], f["status"]) for f in dose] == [
        ("lisinopril 10 mg", "superseded"),
        ("lisinopril 20 mg", "active"),
    ]


def test_a_moved_date_leads_the_block_as_a_fact(proxy, upstream):
    say(proxy, "My partner and I are getting married! The wedding is on 14 September in Bath.")
    proxy.flush()
    say(proxy, "Bad news: we moved the wedding to 21 September at Prior Park.")
    proxy.flush()

    say(proxy, "When is my wedding?", extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    assert "- current (wedding): 21 September at Prior Park" in section(block, KNOWN)
    assert block.index("21 September") < block.index("14 September")


def test_a_dose_changed_without_naming_the_drug_updates_the_one_medication(proxy, upstream):
    say(proxy, "I've been on sertraline, 50 mg, since last autumn and it has helped a lot.")
    proxy.flush()
    say(proxy, "The anxiety crept back, so I saw the GP and they upped my dose to 100 mg.")
    proxy.flush()

    say(proxy, "What dose am I on?", extra_headers={"X-Memory-Mode": "read"})

    known = section(block_sent(upstream), KNOWN)
    assert "- medication (sertraline): sertraline 100 mg" in known
    assert not any("medication (unnamed)" in line for line in known)
    with api(proxy) as client:
        dose = client.get("/facts/medication:sertraline/history").json()["facts"]
    assert [(f["value"], f["status"]) for f in dose] == [
        ("sertraline 50 mg", "superseded"),
        ("sertraline 100 mg", "active"),
    ]


def test_a_new_dose_with_no_medication_on_file_is_not_stored(proxy):
    say(proxy, "They upped my dose to 100 mg last week.")
    proxy.flush()

    with api(proxy) as client:
        facts = client.get("/facts").json()["facts"]
    assert not any(f["key"].startswith("medication") for f in facts)


def test_taken_off_one_drug_and_on_another_leaves_only_the_new_one(proxy, upstream):
    say(proxy, "The doctor has me on 5 mg of amlodipine for my blood pressure.")
    proxy.flush()
    say(proxy, "She's taken me off amlodipine and I'm on ramipril now, 2.5 mg.")
    proxy.flush()

    say(proxy, "Which tablets do I take?", extra_headers={"X-Memory-Mode": "read"})

    known = section(block_sent(upstream), KNOWN)
    assert "- medication (ramipril): ramipril 2.5 mg" in known
    assert not any("amlodipine" in line for line in known)


def test_im_at_an_employer_now_in_a_sentence_about_work_supersedes_the_old_one(proxy, upstream):
    say(proxy, "I'm a backend engineer at Shopify, on the checkout team.")
    proxy.flush()
    say(proxy, "I'm at Stripe now, started two weeks ago on the billing team.")
    say(proxy, "I'm at Heathrow now, boarding in twenty minutes.")
    proxy.flush()

    say(proxy, "Where do I work?", extra_headers={"X-Memory-Mode": "read"})

    known = section(block_sent(upstream), KNOWN)
    assert "- employer: Stripe" in known
    assert not any("Shopify" in line or "Heathrow" in line for line in known)


def test_an_update_said_as_the_new_state_leads_the_block_before_the_old_value(proxy, upstream):
    say(proxy, "The new flat is in Hackney, we got the keys on Friday and it's tiny.")
    say(proxy, "Our wedding is on the 3rd of October at the town hall, small and simple.")
    proxy.flush()
    say(proxy, "We've moved out of Hackney, we're in Walthamstow now, much more space.")
    say(proxy, "Slight change of plan: the wedding is now on the 9th of November.")
    proxy.flush()

    say(
        proxy, "Where do we live, and when is the wedding?", extra_headers={"X-Memory-Mode": "read"}
    )

    block = block_sent(upstream)
    known = section(block, KNOWN)
    assert {"- home city: Walthamstow", "- current (wedding): the 9th of November"} <= set(known)
    for new, old in (("Walthamstow", "Hackney"), ("9th of November", "3rd of October")):
        assert old not in block or block.index(new) < block.index(old)
    with api(proxy) as client:
        home = client.get("/facts/home_city/history").json()["facts"]
    assert [(f["value"], f["status"]) for f in home] == [
        ("Hackney", "superseded"),
        ("Walthamstow", "active"),
    ]


def test_figures_of_speech_and_the_assistants_words_state_no_fact(proxy, upstream):
    say(proxy, "I live in Leeds, near the university.")
    proxy.flush()
    history = [
        {"role": "user", "content": "Big news: I've moved to Accenture, the team is lovely."},
        {"role": "assistant", "content": "Congratulations! So you've moved to Lisbon, then?"},
        {
            "role": "user",
            "content": "I'm allergic to bullshit, and my dose of patience went up to 11.",
        },
    ]
    with proxy.client(default_headers={"X-Memory-User-Id": "ann"}) as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=history)
    proxy.flush()

    say(proxy, "Where do I live?", extra_headers={"X-Memory-Mode": "read"})

    known = section(block_sent(upstream), KNOWN)
    assert "- home city: Leeds" in known
    assert not any(word in "\n".join(known) for word in ("Accenture", "Lisbon", "bullshit", "11"))
    with api(proxy) as client:
        keys = {f["key"] for f in client.get("/facts").json()["facts"]}
    assert keys == {"home_city"}
