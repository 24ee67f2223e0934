"""The web inspector at /ui through the real proxy, over HTTP with httpx: every page, the login
and its cookie, CSRF, which users a key sees, loopback only without keys, escaping of stored
text, and "why this block" after real chat requests.

tests/e2e/test_inspector_browser.py drives the same pages in a real browser.
"""

import base64
import re
from pathlib import Path

import httpx
import pytest

from memory import Turn
from proxy.config import InspectorConfig, ProxyKey
from tests.e2e.test_recall import LAPTOP, converse, say

KEYS = (
    ProxyKey("sk-alice-key", user_id="alice"),
    ProxyKey("sk-team-key", users=("bob", "carol")),
    ProxyKey("sk-admin-key", admin=True),
    ProxyKey("sk-metrics-key", metrics_only=True),
)
KAYAK = "I keep my red kayak at the marina in Porto"
TEMPLATES = Path(__file__).resolve().parents[2] / "proxy" / "inspector" / "templates"


def csrf_of(page):
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


@pytest.fixture
def browser():
    """`browser(proxy)`: a new httpx client keeping its own cookies, like a browser; all are
    closed after the test."""
    clients = []

    def open_one(proxy):
        clients.append(httpx.Client(base_url=proxy.root, timeout=60, follow_redirects=False))
        return clients[-1]

    yield open_one
    for client in clients:
        client.close()


def log_in(browser, proxy, key):
    client = browser(proxy)
    form = client.get("/ui/login")
    answer = client.post("/ui/login", data={"key": key, "csrf": csrf_of(form)})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui"
    return client


def chat(proxy, user, text, key="sk-client", **headers):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    headers = {k.replace("_", "-"): v for k, v in headers.items()}
    headers = {"authorization": f"Bearer {key}", "x-memory-user-id": user, **headers}
    answer = httpx.post(proxy.url + "/chat/completions", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer


@pytest.fixture
def keyed(make_proxy):
    return make_proxy(keys=KEYS, upstream_api_key="sk-provider")


# -- the pages ---------------------------------------------------------------------------------


def test_every_page_shows_what_is_stored(proxy, browser):
    say(proxy, [{"role": "user", "content": KAYAK}], "alice", X_Memory_Session_Id="trip")
    proxy.flush()
    proxy.layer.set_fact("alice", "home_city", "Porto")
    answer = chat(proxy, "alice", "Where is my kayak kept?", x_request_id="req-kayak")
    proxy.flush()
    client = browser(proxy)

    users = client.get("/ui")
    assert users.status_code == 200
    assert users.headers["content-type"].startswith("text/html")
    row = r">alice</a>\s*</td>\s*<td [^>]*>4</td>\s*<td [^>]*>2</td>\s*<td [^>]*><a [^>]*>1</a>"
    assert re.search(row, users.text)  # messages, sessions, facts
    sessions = client.get("/ui/users/alice")
    assert "trip" in sessions.text and KAYAK in sessions.text  # the session and its opening
    turns = client.get("/ui/users/alice/sessions/trip")
    assert KAYAK in turns.text and "assistant" in turns.text
    facts = client.get("/ui/users/alice/facts")
    assert 'value="Porto"' in facts.text
    history = client.get("/ui/users/alice/facts/history", params={"key": "home_city"})
    assert "Porto" in history.text and "active" in history.text
    found = client.get("/ui/users/alice/search", params={"q": "kayak marina"})
    assert KAYAK in found.text
    assert re.search(r"<strong>\d\.\d{3}</strong>", found.text)  # the final score
    why = client.get("/ui/users/alice/why")
    assert "req-kayak" in why.text
    one = client.get("/ui/users/alice/why", params={"request": "req-kayak"})
    assert "=== Memory Context ===" in one.text and KAYAK in one.text
    assert f"Tier</dt><dd>{answer.headers['x-memory-tier']}:" in one.text
    assert answer.headers["x-memory-fill-ratio"] in one.text
    assert all(p.headers["cache-control"] == "no-store" for p in (users, one))


def test_a_session_id_of_any_characters_links_to_its_turns(proxy, browser):
    odd = "imported/2024 #1?&x"
    message = {"role": "user", "content": KAYAK}
    proxy.layer.remember(Turn("alice", odd, "gpt-4o-mini", (message,), None, 1_700_000_000.0))
    client = browser(proxy)

    link = re.search(r'href="(/ui/users/alice/sessions/[^"]+)"', client.get("/ui/users/alice").text)
    page = client.get(link.group(1).replace("&amp;", "&"))

    assert page.status_code == 200 and KAYAK in page.text
    assert "imported/2024 #1?&amp;x" in page.text


def test_search_shows_each_hits_lexical_dense_fused_and_final_score(proxy, browser):
    say(proxy, [{"role": "user", "content": KAYAK}], "alice")
    proxy.flush()
    hit = proxy.layer.search("alice", "red kayak marina", 1)[0]

    page = browser(proxy).get("/ui/users/alice/search", params={"q": "red kayak marina", "k": 1})

    row = page.text[page.text.index("<tbody>") :]
    cells = [f"{hit.score:.3f}", f"{hit.fused_score:.3f}", f"{hit.lexical_score:.3g}"]
    cells += [f"#{hit.lexical_rank}", f"{hit.similarity:.3f}", f"#{hit.dense_rank}"]
    assert all(cell in row for cell in cells), cells


def test_the_search_api_gives_the_scores_the_inspector_shows(proxy):
    say(proxy, [{"role": "user", "content": KAYAK}], "alice")
    proxy.flush()
    hit = proxy.layer.search("alice", "red kayak marina", 1)[0]

    found = httpx.get(
        proxy.root + "/v1/memory/search",
        params={"q": "red kayak marina", "k": 1},
        headers={"x-memory-user-id": "alice"},
        timeout=60,
    ).json()["results"][0]

    assert found["lexical_score"] == hit.lexical_score and found["lexical_rank"] == hit.lexical_rank
    assert found["fused_score"] == round(hit.fused_score, 6) and found["dense_rank"] == 1
    assert found["similarity"] == round(hit.similarity, 4)


def test_why_this_block_names_what_was_left_out_and_why(proxy, browser):
    say(proxy, [{"role": "user", "content": KAYAK}], "alice")
    proxy.flush()
    messages = [
        {"role": "user", "content": KAYAK},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Where did I say the kayak is?"},
    ]
    body = {"model": "gpt-4o-mini", "messages": messages}
    headers = {"x-memory-user-id": "alice", "x-request-id": "req-present"}
    httpx.post(proxy.url + "/chat/completions", json=body, headers=headers, timeout=60)

    page = browser(proxy).get("/ui/users/alice/why", params={"request": "req-present"})

    assert page.status_code == 200
    left_out = page.text[page.text.index("Left out") :]
    assert "present" in left_out and "already in the request" in left_out
    assert KAYAK in left_out


def test_why_this_block_names_the_gate_that_withheld_a_keyword_match(proxy, browser):
    """A turn the question matched by keyword, withheld by the abstention gate, was said to be
    left out for 'no keyword match', naming memory.min_similarity, not the gate's setting."""
    converse(proxy, "alice", LAPTOP)
    never = [{"role": "user", "content": "What is the brand of my docking station?"}]
    say(proxy, never, "alice", X_Memory_Mode="read", X_Request_Id="req-gate")

    page = browser(proxy).get("/ui/users/alice/why", params={"request": "req-gate"})

    left_out = page.text[page.text.index("Left out") :]
    assert "Thunderbolt dock" in left_out
    assert "memory.min_answerable" in left_out


def test_the_history_is_off_with_inspector_history_zero(make_proxy, browser):
    proxy = make_proxy(inspector=InspectorConfig(history=0))
    chat(proxy, "alice", "hello there", x_request_id="req-1")

    page = browser(proxy).get("/ui/users/alice/why")

    assert "inspector.history</code> is 0" in page.text and "req-1" not in page.text


def test_the_inspector_is_off_with_inspector_enabled_false(make_proxy, browser):
    proxy = make_proxy(inspector=InspectorConfig(enabled=False))

    assert browser(proxy).get("/ui").status_code == 404
    assert browser(proxy).get("/ui/static/inspector.css").status_code == 404


def test_the_stylesheet_is_served_by_moim_and_pages_load_nothing_else(proxy, browser):
    client = browser(proxy)
    css = client.get("/ui/static/inspector.css")
    page = client.get("/ui")

    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert re.findall(r'(?:src|href)="([^"#]+)"', page.text) == ["/ui/static/inspector.css", "/ui"]
    assert "<script" not in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy


# -- facts through the forms -------------------------------------------------------------------


def test_a_fact_is_set_edited_pinned_and_forgotten_through_the_forms(proxy, browser):
    client = browser(proxy)
    token = csrf_of(client.get("/ui/users/alice/facts"))
    post = lambda path, **data: client.post(f"/ui/users/alice/facts{path}", data=data)  # noqa: E731

    assert (
        post("", key="Home City", value="Porto", category="profile", csrf=token).status_code == 303
    )
    assert post("", key="home_city", value="Lisbon", existing="1", csrf=token).status_code == 303
    assert post("/pin", key="home_city", csrf=token).status_code == 303
    assert proxy.layer.list_facts("alice", "active")[0].pinned is True
    assert post("/forget", key="home_city", csrf=token).status_code == 303

    history = proxy.layer.fact_history("alice", "home_city")
    assert [(f.value, f.status, f.category) for f in history] == [
        ("Porto", "superseded", "profile"),
        ("Lisbon", "archived", "profile"),
    ]
    assert "Lisbon" in client.get("/ui/users/alice/facts").text  # shown as history


def test_a_bad_fact_value_is_a_400_page_naming_it(proxy, browser):
    client = browser(proxy)
    token = csrf_of(client.get("/ui/users/alice/facts"))

    answer = client.post("/ui/users/alice/facts", data={"key": "k", "value": " ", "csrf": token})

    assert answer.status_code == 400 and "&#39;value&#39; must be 1 to 500" in answer.text
    assert proxy.layer.list_facts("alice") == []


@pytest.mark.parametrize("token", [None, "", "forged", "other-session"])
def test_a_form_without_this_sessions_csrf_token_is_refused(proxy, token, browser):
    client = browser(proxy)
    client.get("/ui")  # this browser's cookie
    if token == "other-session":
        token = csrf_of(browser(proxy).get("/ui/users/alice/facts"))
    data = {"key": "city", "value": "Rome"} | ({} if token is None else {"csrf": token})

    answer = client.post("/ui/users/alice/facts", data=data)

    assert answer.status_code == 403
    assert proxy.layer.list_facts("alice") == []


# -- who may look ------------------------------------------------------------------------------


def test_without_keys_only_loopback_clients_with_a_loopback_host_are_answered(proxy, browser):
    client = browser(proxy)

    assert client.get("/ui").status_code == 200
    assert client.get("/ui", headers={"host": "localhost"}).status_code == 200
    # a page elsewhere that rebinds its DNS name to 127.0.0.1 sends its own name
    assert client.get("/ui", headers={"host": "evil.example"}).status_code == 403
    # a remote client behind a reverse proxy on this machine (uvicorn reads X-Forwarded-For)
    assert client.get("/ui", headers={"x-forwarded-for": "203.0.113.9"}).status_code == 403


def test_allow_remote_answers_any_client_without_keys(make_proxy, browser):
    proxy = make_proxy(inspector=InspectorConfig(allow_remote=True))

    answer = browser(proxy).get("/ui", headers={"x-forwarded-for": "203.0.113.9"})

    assert answer.status_code == 200


@pytest.mark.parametrize(
    "path", ["/ui", "/ui/users/alice", "/ui/users/alice/facts", "/ui/users/alice/why"]
)
def test_with_keys_every_page_asks_for_a_login(keyed, path, browser):
    answer = browser(keyed).get(path, headers={"authorization": "Bearer sk-admin-key"})

    assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"


def test_with_keys_a_form_without_a_login_changes_nothing(keyed, browser):
    client = browser(keyed)
    token = csrf_of(client.get("/ui/login"))

    answer = client.post("/ui/users/alice/facts", data={"key": "k", "value": "v", "csrf": token})

    assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"
    assert keyed.layer.list_facts("alice") == []


@pytest.mark.parametrize("key", ["sk-nobody-key", "", "sk-metrics-key"])
def test_a_login_with_a_key_that_is_not_a_moim_users_key_is_refused(keyed, key, browser):
    client = browser(keyed)
    token = csrf_of(client.get("/ui/login"))

    answer = client.post("/ui/login", data={"key": key, "csrf": token})

    assert answer.status_code == 401 and "set-cookie" not in answer.headers
    assert client.get("/ui").status_code == 303
    assert key not in answer.text or key == ""


def test_a_login_form_without_its_csrf_token_is_refused(keyed, browser):
    client = browser(keyed)
    client.get("/ui/login")

    assert client.post("/ui/login", data={"key": "sk-admin-key"}).status_code == 403


def test_failed_logins_from_one_address_are_limited_and_others_still_log_in(keyed, browser):
    """Ten failures in a minute from an address: its next login is a 429 with Retry-After,
    even with a right key (checking it would tell a guesser); other addresses are not held."""
    guesser = browser(keyed)
    token = csrf_of(guesser.get("/ui/login"))
    there = {"x-forwarded-for": "203.0.113.9"}  # uvicorn trusts it from loopback
    for guess in range(10):
        data = {"key": f"sk-guess-{guess}", "csrf": token}
        assert guesser.post("/ui/login", data=data, headers=there).status_code == 401

    held = guesser.post("/ui/login", data={"key": "sk-admin-key", "csrf": token}, headers=there)

    assert held.status_code == 429 and "set-cookie" not in held.headers
    assert 1 <= int(held.headers["retry-after"]) <= 60
    assert "too many failed logins" in held.text
    elsewhere = browser(keyed)
    token = csrf_of(elsewhere.get("/ui/login"))
    data = {"key": "sk-admin-key", "csrf": token}
    answer = elsewhere.post("/ui/login", data=data, headers={"x-forwarded-for": "198.51.100.7"})
    assert answer.status_code == 303 and "moim_ui" in elsewhere.cookies


def test_failed_logins_from_addresses_that_are_no_addresses_count_as_one(keyed, browser):
    """A forwarded address that is not an IP address (a proxy passing on the client's own
    X-Forwarded-For) counts under one name: each was a name of its own, up to the header's
    16 KiB, ten thousand of them kept (160 MB), and each a fresh ten guesses."""
    guesser = browser(keyed)
    token = csrf_of(guesser.get("/ui/login"))
    for guess in range(10):
        there = {"x-forwarded-for": f"{guess}-" + "x" * 8000}
        data = {"key": f"sk-guess-{guess}", "csrf": token}
        assert guesser.post("/ui/login", data=data, headers=there).status_code == 401

    there = {"x-forwarded-for": "yet-another-name"}
    held = guesser.post("/ui/login", data={"key": "sk-admin-key", "csrf": token}, headers=there)

    assert held.status_code == 429


def test_the_login_cookie_is_httponly_samesite_strict_signed_and_holds_no_key(keyed, browser):
    client = browser(keyed)
    token = csrf_of(client.get("/ui/login"))
    answer = client.post("/ui/login", data={"key": "sk-admin-key", "csrf": token})

    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    value = client.cookies["moim_ui"]
    assert "sk-admin-key" not in value and "sk-admin-key" not in cookie_payload(value)
    assert csrf_of(client.get("/ui")) != token  # a login starts a new browser session
    data, mac = value.split(".")
    forged = browser(keyed)
    forged.cookies.set("moim_ui", data + "." + mac[:-2] + ("AA" if mac[-2:] != "AA" else "BB"))
    assert forged.get("/ui").status_code == 303


def cookie_payload(value):
    data = value.split(".")[0]
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode()


def test_an_admin_sees_every_user(keyed, browser):
    chat(keyed, "alice", "hello from alice", key="sk-alice-key")
    chat(keyed, "bob", "hello from bob", key="sk-team-key")
    keyed.flush()
    client = log_in(browser, keyed, "sk-admin-key")

    users = client.get("/ui").text

    assert ">alice</a>" in users and ">bob</a>" in users
    assert client.get("/ui/users/bob/why").status_code == 200


def test_a_users_key_sees_only_its_own_users_memory(keyed, browser):
    chat(keyed, "alice", "hello from alice", key="sk-alice-key")
    chat(keyed, "bob", "hello from bob", key="sk-team-key", x_request_id="req-bob")
    keyed.flush()
    keyed.layer.set_fact("bob", "secret_plan", "bob's plan")
    client = log_in(browser, keyed, "sk-alice-key")
    token = csrf_of(client.get("/ui"))

    users = client.get("/ui").text
    assert ">alice</a>" in users and "bob" not in users
    for path in ("", "/sessions/s", "/facts", "/facts/history?key=secret_plan", "/why"):
        answer = client.get(f"/ui/users/bob{path}")
        assert answer.status_code == 403, path
        assert "hello from bob" not in answer.text and "plan" not in answer.text
    assert client.get("/ui/users/bob/search", params={"q": "hello"}).status_code == 403
    for path in ("/facts", "/facts/pin", "/facts/forget"):
        data = {"key": "secret_plan", "value": "stolen", "csrf": token}
        assert client.post(f"/ui/users/bob{path}", data=data).status_code == 403
    assert [f.value for f in keyed.layer.list_facts("bob")] == ["bob's plan"]

    team = log_in(browser, keyed, "sk-team-key")
    assert ">bob</a>" in team.get("/ui").text and "alice" not in team.get("/ui").text
    assert team.get("/ui/users/alice/facts").status_code == 403
    assert "req-bob" in team.get("/ui/users/bob/why").text


def test_a_key_for_a_user_id_with_a_space_sees_that_users_memory_and_no_other(make_proxy, browser):
    # The store keeps "john smith" as the namespace "~john%20smith"; the key names the id
    # as clients send it, and the inspector must mean the same user the API does.
    keys = (
        ProxyKey("sk-john-key", user_id="john smith"),
        ProxyKey("sk-list-key", users=("john smith",)),
        ProxyKey("sk-odd-key", user_id="~john%20smith"),  # a raw id, not a namespace
        ProxyKey("sk-admin-key", admin=True),
    )
    proxy = make_proxy(keys=keys, upstream_api_key="sk-provider")
    chat(proxy, "john smith", "hello from john", key="sk-john-key")
    proxy.flush()
    for key in ("sk-john-key", "sk-list-key"):
        client = log_in(browser, proxy, key)
        assert 'href="/ui/users/~john%2520smith"' in client.get("/ui").text
        assert "hello from john" in _all_turns(client, "~john%2520smith")
    odd = log_in(browser, proxy, "sk-odd-key")
    assert odd.get("/ui/users/~john%2520smith").status_code == 403
    assert "hello from john" not in _all_turns(odd, "~john%2520smith")


def _all_turns(client, user_path):
    """Every session page of a user, as one text (empty when the user is refused)."""
    page = client.get(f"/ui/users/{user_path}")
    if page.status_code != 200:
        return ""
    links = re.findall(r'href="(/ui/users/[^"]+/sessions/[^"]+)"', page.text)
    return "".join(client.get(link).text for link in links)


def test_logging_out_clears_the_cookie(keyed, browser):
    client = log_in(browser, keyed, "sk-admin-key")
    token = csrf_of(client.get("/ui"))

    answer = client.post("/ui/logout", data={"csrf": token})

    assert answer.status_code == 303 and "Max-Age=0" in answer.headers["set-cookie"]
    assert client.get("/ui").status_code == 303


def test_a_cookie_copied_before_a_logout_no_longer_logs_in(keyed, browser):
    """Logging out ends the login on the server: a copy of the cookie (another tab's, one read
    off the machine) is refused as the browser's own is, its forms too."""
    client = log_in(browser, keyed, "sk-admin-key")
    copied, token = client.cookies["moim_ui"], csrf_of(client.get("/ui"))
    assert client.post("/ui/logout", data={"csrf": token}).status_code == 303

    replayed = browser(keyed)
    replayed.cookies.set("moim_ui", copied)
    assert replayed.get("/ui").status_code == 303
    assert replayed.get("/ui/users/alice").headers.get("location") == "/ui/login"
    form = {"csrf": token, "key": "pet", "value": "a cat"}
    assert replayed.post("/ui/users/alice/facts", data=form).status_code in (303, 403)
    assert keyed.layer.list_facts("alice") == []


# -- stored text is shown, never run -----------------------------------------------------------

SCRIPT = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def test_stored_markup_is_escaped_on_every_page(proxy, browser):
    say(proxy, [{"role": "user", "content": f"kayak {SCRIPT}"}], "alice", X_Memory_Session_Id="s1")
    proxy.flush()
    proxy.layer.set_fact("alice", "note", SCRIPT)
    chat(proxy, "alice", f"kayak? {SCRIPT}", x_request_id="req-x")
    client = browser(proxy)
    paths = [
        "/ui",
        "/ui/users/alice",
        "/ui/users/alice/sessions/s1",
        "/ui/users/alice/facts",
        "/ui/users/alice/facts/history?key=note",
        "/ui/users/alice/search?q=kayak",
        "/ui/users/alice/why",
        "/ui/users/alice/why?request=req-x",
    ]
    for path in paths:
        page = client.get(path)
        assert page.status_code == 200, path
        assert "<script" not in page.text and "<img" not in page.text, path
    assert (
        "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in client.get(paths[3]).text
    )


def test_no_template_marks_anything_safe():
    texts = [path.read_text() for path in TEMPLATES.glob("*.html")]

    assert texts and not any(re.search(r"\|\s*safe|autoescape\s+false|Markup", t) for t in texts)


@pytest.mark.both_backends
def test_the_users_and_sessions_pages_on_either_store(make_proxy, browser):
    proxy = make_proxy()
    chat(proxy, "alice", KAYAK, x_memory_session_id="s-kayak")
    proxy.flush()
    client = browser(proxy)

    users = client.get("/ui")
    sessions = client.get("/ui/users/alice")

    assert users.status_code == 200, users.text
    assert ">alice</a>" in users.text
    assert sessions.status_code == 200, sessions.text
    assert "s-kayak" in sessions.text and KAYAK in sessions.text
