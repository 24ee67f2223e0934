"""proxy/inspector/access.py and the `inspector:` config section: the signed cookie, CSRF tokens,
which users a viewer sees, and which clients a keyless inspector answers."""

import time

import pytest
from starlette.requests import Request

from proxy.config import Config, ConfigError, InspectorConfig, ProxyKey, from_mapping
from proxy.inspector.access import (
    LoginNeeded,
    Refused,
    Signer,
    Viewer,
    key_digest,
    viewer_of,
)

ADMIN = ProxyKey("sk-admin-key", admin=True)
ALICE = ProxyKey("sk-alice-key", user_id="alice")
TEAM = ProxyKey("sk-team-key", users=("bob", "carol"))
ANY = ProxyKey("sk-any-user-key")
METRICS = ProxyKey("sk-metrics-key", metrics_only=True)


def request(client="127.0.0.1", host="127.0.0.1:8080", cookie=None):
    headers = [(b"host", host.encode())]
    if cookie is not None:
        headers.append((b"cookie", f"moim_ui={cookie}".encode()))
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/ui",
        "headers": headers,
        "client": (client, 50000),
        "scheme": "http",
        "server": ("127.0.0.1", 8080),
        "query_string": b"",
    }
    return Request(scope)


# -- the cookie --------------------------------------------------------------------------------


def test_a_cookie_opens_with_its_signer_only_and_not_after_it_expires():
    signer = Signer(None)
    value, session = signer.cookie(ALICE)

    assert signer.open(value) == {
        "s": session,
        "k": key_digest(ALICE.key),
        "e": pytest.approx(time.time() + 12 * 3600, abs=5),
    }
    assert Signer(None).open(value) is None  # another process's random secret
    assert signer.open(signer.cookie(ALICE, now=time.time() - 13 * 3600)[0]) is None
    assert signer.open(value[:-1] + ("A" if value[-1] != "A" else "B")) is None
    assert signer.open("") is None and signer.open("x.y.z") is None


def test_a_configured_secret_keeps_cookies_valid_across_restarts():
    secret = "s" * 32
    value, _ = Signer(secret).cookie(ADMIN)

    assert Signer(secret).open(value) is not None


def test_csrf_tokens_are_tied_to_the_browser_session():
    signer = Signer(None)

    assert signer.csrf_ok("one", signer.csrf("one"))
    assert not signer.csrf_ok("two", signer.csrf("one"))
    assert not signer.csrf_ok("one", "")


# -- who sees which users ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "only"),
    [(ADMIN, None), (ANY, None), (ALICE, ("alice",)), (TEAM, ("bob", "carol"))],
)
def test_a_viewer_sees_the_users_its_key_may_act_for(key, only):
    viewer = Viewer(key, "s")

    assert viewer.only == only
    assert viewer.may_see("bob") is (only is None or "bob" in only)


def test_without_a_login_a_viewer_sees_no_user_unless_no_keys_are_configured():
    assert Viewer(None, "s").only == () and not Viewer(None, "s").may_see("alice")
    assert Viewer(None, "s", open=True).only is None


def test_with_keys_the_cookie_must_name_a_configured_key_that_is_not_metrics_only():
    config = Config(keys=(ADMIN, METRICS))
    signer = Signer(None)

    viewer = viewer_of(request(cookie=signer.cookie(ADMIN)[0]), config, signer)
    assert viewer.key == ADMIN
    for cookie in (None, signer.cookie(METRICS)[0], signer.cookie(ALICE)[0]):
        with pytest.raises(LoginNeeded):
            viewer_of(request(cookie=cookie), config, signer)
    # the login page itself: a viewer without a key, who sees no one
    anonymous = viewer_of(request(cookie=signer.cookie(None)[0]), config, signer, True)
    assert anonymous.key is None and anonymous.only == ()


@pytest.mark.parametrize(
    ("client", "host", "answered"),
    [
        ("127.0.0.1", "127.0.0.1:8080", True),
        ("127.0.0.2", "localhost:8080", True),
        ("::1", "[::1]:8080", True),
        ("203.0.113.9", "127.0.0.1:8080", False),
        ("127.0.0.1", "evil.example", False),
        ("127.0.0.1", "10.0.0.5:8080", False),
    ],
)
def test_without_keys_only_a_loopback_client_naming_a_loopback_host_is_answered(
    client, host, answered
):
    config, signer = Config(), Signer(None)
    if answered:
        assert viewer_of(request(client, host), config, signer) is None  # no cookie yet
    else:
        with pytest.raises(Refused):
            viewer_of(request(client, host), config, signer)
    remote = Config(inspector=InspectorConfig(allow_remote=True))
    assert viewer_of(request(client, host), remote, signer) is None


# -- the inspector: section of config.yaml -----------------------------------------------------


def test_inspector_settings_default_to_on_ten_requests_loopback_and_a_random_secret():
    assert from_mapping({}).inspector == InspectorConfig(True, 10, False, None)


def test_inspector_settings_are_read_from_their_section():
    section = {"enabled": False, "history": 0, "allow_remote": True, "secret": "x" * 32}

    assert from_mapping({"inspector": section}).inspector == InspectorConfig(
        False, 0, True, "x" * 32
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"history": -1}, "inspector.history: must be from 0 to 1000"),
        ({"history": 1001}, "inspector.history: must be from 0 to 1000"),
        ({"secret": "short-secret"}, "inspector.secret: must be at least 32 characters"),
        ({"enabled": "yes"}, "inspector.enabled: expected bool"),
        ({"histroy": 5}, "did you mean inspector.history?"),
    ],
)
def test_bad_inspector_settings_name_their_key(section, message):
    with pytest.raises(ConfigError, match=message):
        from_mapping({"inspector": section})


def test_a_secret_of_the_wrong_type_is_not_shown():
    with pytest.raises(ConfigError) as error:
        from_mapping({"inspector": {"secret": 123456789}})

    assert "123456789" not in str(error.value)
