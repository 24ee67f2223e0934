"""proxy/identity.py: who is asking (CONTRACT.md "Who and how"), and how memory is used."""

from datetime import UTC, datetime
from urllib.parse import unquote

import pytest
from starlette.datastructures import Headers

from memory import BLOCK_END, BLOCK_START
from proxy.errors import BadRequest
from proxy.identity import Mode, derive_session_id, identify, user_namespace
from proxy.pipeline import header_values

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}

# CONTRACT order of precedence for the user id.
USER_ALIASES = [
    "X-Memory-User-Id",
    "x-sm-user-id",
    "X-OpenWebUI-User-Id",
    "x-litellm-end-user-id",
]
SESSION_ALIASES = ["X-Memory-Session-Id", "x-sm-conversation-id", "X-OpenWebUI-Chat-Id"]


def who(headers=None, body=BODY, **kwargs):
    return identify(Headers(headers or {}), body, **kwargs)


# -- user ------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", range(len(USER_ALIASES)))
def test_each_user_header_beats_every_later_fallback(position):
    headers = {name: f"user-{i}" for i, name in enumerate(USER_ALIASES) if i >= position}
    body = {**BODY, "user": "body-user"}
    assert who(headers, body, path_user="path-user").user_id == f"user-{position}"


def test_user_headers_are_case_insensitive():
    assert who({"x-memory-user-id": "ana"}).user_id == "ana"
    assert who({"X-SM-USER-ID": "ana"}).user_id == "ana"


def test_body_user_when_no_header():
    assert who({}, {**BODY, "user": "ana@example.com"}, path_user="bob").user_id == (
        "ana@example.com"
    )


def test_safety_identifier_names_the_user_after_the_body_user_and_the_path():
    """OpenAI's successor to `user`: an app that moved to it keeps its users apart; a
    deployment that names its users by path keeps them there."""
    body = {**BODY, "safety_identifier": "hashed-ana"}
    assert who({}, body).user_id == "hashed-ana"
    assert who({}, body, path_user="bob").user_id == "bob"
    assert who({}, {**body, "user": "ana"}).user_id == "ana"
    assert who({"X-Memory-User-Id": "cy"}, body).user_id == "cy"
    with pytest.raises(BadRequest) as raised:
        who({}, {**BODY, "safety_identifier": 7})
    assert (raised.value.status, raised.value.param) == (400, "safety_identifier")


def test_path_user_when_no_header_and_no_body_user():
    assert who({}, BODY, path_user="bob").user_id == "bob"


def test_default_user_when_nothing_says():
    assert who().user_id == "default"


def test_blank_header_and_body_user_fall_through():
    body = {**BODY, "user": "   "}
    assert who({"X-Memory-User-Id": "  ", "x-sm-user-id": "ana"}, body).user_id == "ana"
    assert who({"X-Memory-User-Id": " "}, body, path_user="bob").user_id == "bob"


def test_header_value_is_trimmed():
    assert who({"X-Memory-User-Id": "  ana  "}).user_id == "ana"


def test_bound_user_overrides_every_header():
    headers = {name: "mallory" for name in USER_ALIASES}
    body = {**BODY, "user": "mallory"}
    assert who(headers, body, path_user="mallory", bound_user="alice").user_id == "alice"


def test_blank_body_user_falls_through_and_null_is_no_user():
    assert who({}, {**BODY, "user": ""}, path_user="bob").user_id == "bob"
    assert who({}, {**BODY, "user": None}).user_id == "default"


@pytest.mark.parametrize("bad", [5, 1.5, True, ["ana"], {"id": "ana"}])
def test_a_body_user_that_is_not_a_string_is_a_bad_request(bad):
    with pytest.raises(BadRequest) as raised:
        who({}, {**BODY, "user": bad})
    assert (raised.value.status, raised.value.param) == (400, "user")


@pytest.mark.parametrize(
    "good", ["ana", "ana@example.com", "team:42", "u_1-2.3+x", "é李", "x" * 256, "John_Smith"]
)
def test_a_plain_id_is_its_own_namespace_from_every_source(good):
    """Letters, digits and . _ - @ : + : the namespace it always had."""
    as_header = good.encode().decode("latin-1")  # what HTTP hands over for UTF-8 bytes
    assert who({"X-Memory-User-Id": as_header}).user_id == good
    assert who({}, {**BODY, "user": good}).user_id == good
    assert who({}, BODY, path_user=good).user_id == good
    assert who({}, BODY, bound_user=good).user_id == good


@pytest.mark.parametrize(
    ("given", "namespace"),
    [
        ("John Smith", "~John%20Smith"),
        ("john/smith", "~john%2Fsmith"),
        ("<script>", "~%3Cscript%3E"),
        ("zoë smith", "~zoë%20smith"),
        ("a%20b", "~a%2520b"),
        ("~john%20smith", "~%7Ejohn%2520smith"),
        (" ana", "~%20ana"),
        ("new\nline", "~new%0Aline"),
    ],
)
def test_any_other_id_is_kept_whole_percent_encoded_behind_a_tilde(given, namespace):
    assert user_namespace(given) == namespace
    assert unquote(namespace[1:]) == given  # reversible
    assert who({}, {**BODY, "user": given}).user_id == namespace
    assert who({}, BODY, path_user=given).user_id == namespace
    assert who({}, BODY, bound_user=given).user_id == namespace


def test_an_id_in_a_header_maps_as_it_does_in_the_body():
    assert who({"X-Memory-User-Id": "John Smith"}).user_id == "~John%20Smith"
    assert who({"x-sm-user-id": "a/b"}).user_id == who({}, {**BODY, "user": "a/b"}).user_id


def test_ids_that_differ_only_in_characters_once_replaced_never_share_a_namespace():
    ids = ["john smith", "john/smith", "john_smith", "john%20smith", "john\tsmith", "john  smith"]
    namespaces = {who({}, {**BODY, "user": given}).user_id for given in ids}
    assert len(namespaces) == len(ids)


def test_ids_that_read_alike_are_neither_folded_nor_normalised_into_one():
    """README (Headers): case, fullwidth forms, invisible characters and NFC against NFD."""
    ids = ["alice", "Alice", "ａｌｉｃｅ", "ali\u200bce", "alice\xa0", "caf\u00e9", "cafe\u0301"]
    namespaces = {who({}, {**BODY, "user": given}).user_id for given in ids}
    assert len(namespaces) == len(ids)


@pytest.mark.parametrize(
    ("source", "param"),
    [
        ({"headers": {"X-Memory-User-Id": "x" * 257}}, "X-Memory-User-Id"),
        ({"headers": {"x-litellm-end-user-id": "x" * 257}}, "x-litellm-end-user-id"),
        ({"body": {**BODY, "user": "x" * 257}}, "user"),
        ({"path_user": "x" * 257}, "user_id"),
    ],
)
def test_an_id_over_256_characters_is_refused_naming_its_source(source, param):
    """Cutting ids short would give two long ids with one beginning one namespace."""
    with pytest.raises(BadRequest) as raised:
        who(source.get("headers"), source.get("body", BODY), path_user=source.get("path_user"))
    assert (raised.value.status, raised.value.code, raised.value.param) == (
        400,
        "invalid_user_id",
        param,
    )


def test_utf8_user_id_header_is_decoded_as_utf8():
    latin1_view = "zoë".encode().decode("latin-1")
    assert who({"X-Memory-User-Id": latin1_view}, BODY).user_id == "zoë"


# -- session ---------------------------------------------------------------------------------


@pytest.mark.parametrize("position", range(len(SESSION_ALIASES)))
def test_each_session_header_beats_every_later_fallback(position):
    headers = {name: f"chat-{i}" for i, name in enumerate(SESSION_ALIASES) if i >= position}
    assert who(headers).session_id == f"chat-{position}"


def test_invalid_session_id_is_a_bad_request_naming_the_header():
    with pytest.raises(BadRequest) as raised:
        who({"x-sm-conversation-id": "two words"})
    assert (raised.value.code, raised.value.param) == ("invalid_session_id", "x-sm-conversation-id")


def test_derived_session_is_stable_as_the_conversation_grows():
    opening = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Plan a trip to Porto"},
    ]
    later = [
        *opening,
        {"role": "assistant", "content": "Sure: day one..."},
        {"role": "user", "content": "Add a day in Braga"},
    ]
    first = who({"X-Memory-User-Id": "ana"}, {**BODY, "messages": opening}).session_id
    again = who({"X-Memory-User-Id": "ana"}, {**BODY, "messages": later}).session_id
    assert first == again
    assert first.startswith("s-") and len(first) == 18


def test_derived_session_ignores_an_injected_block():
    plain = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    block = f"{BLOCK_START}\nRecalled.\n{BLOCK_END}\n\nBe brief."
    injected = [{"role": "system", "content": block}, {"role": "user", "content": "hi"}]
    assert derive_session_id("ana", {"messages": plain}) == derive_session_id(
        "ana", {"messages": injected}
    )


def test_derived_session_differs_by_user_and_by_opening():
    messages = [{"role": "user", "content": "Plan a trip to Porto"}]
    other = [{"role": "user", "content": "Plan a trip to Lisbon"}]
    ids = {
        derive_session_id("ana", {"messages": messages}),
        derive_session_id("bob", {"messages": messages}),
        derive_session_id("ana", {"messages": other}),
    }
    assert len(ids) == 3


def test_a_developer_prompt_opens_a_session_as_a_system_prompt_does():
    def session(*opening):
        messages = [{"role": role, "content": text} for role, text in opening]
        return derive_session_id("ana", {"messages": messages})

    ask = ("user", "Summarise the ticket")
    assert session(("developer", "You triage bugs."), ask) != session(
        ("developer", "You write release notes."), ask
    )
    assert session(("developer", "You triage bugs."), ask) == session(
        ("system", "You triage bugs."), ask
    )
    # with a system message the developer one changes nothing: stored sessions keep their ids
    assert session(("system", "Be brief."), ("developer", "You triage bugs."), ask) == session(
        ("system", "Be brief."), ask
    )
    assert session(ask) != session(("developer", "You triage bugs."), ask)


# -- mode, budget, timestamp -----------------------------------------------------------------


def test_mode_defaults_to_auto():
    assert who().mode is Mode.AUTO


@pytest.mark.parametrize(
    "value, mode",
    [("auto", Mode.AUTO), ("read", Mode.READ), ("WRITE", Mode.WRITE), (" off ", Mode.OFF)],
)
def test_mode_header(value, mode):
    assert who({"X-Memory-Mode": value}).mode is mode


def test_what_each_mode_reads_and_writes():
    assert [(m.value, m.reads, m.writes) for m in Mode] == [
        ("auto", True, True),
        ("read", True, False),
        ("write", False, True),
        ("off", False, False),
    ]


def test_the_request_paths_header_dict_reads_as_starlettes_headers():
    # the chat path hands identify a dict of lower-case names (pipeline.header_values)
    sent = [
        (b"x-sm-user-id", b"zo\xc3\xab"),
        (b"x-openwebui-chat-id", b"chat-1"),
        (b"x-memory-mode", b" Read "),
        (b"x-memory-context-budget", b"900"),
        (b"x-memory-tools", b"on"),
        (b"x-memory-timestamp", b"1700000000"),
        (b"x-memory-mode", b"off"),
    ]

    as_dict = identify(header_values(sent), BODY)

    assert as_dict == identify(Headers(raw=sent), BODY)
    assert (as_dict.user_id, as_dict.session_id, as_dict.mode) == ("zoë", "chat-1", Mode.READ)
    assert (as_dict.context_budget, as_dict.tools, as_dict.timestamp) == (900, True, 1.7e9)


def test_unknown_mode_is_a_bad_request():
    with pytest.raises(BadRequest) as raised:
        who({"X-Memory-Mode": "sometimes"})
    assert raised.value.param == "X-Memory-Mode"


def test_memory_disabled_means_off_whatever_the_header():
    assert who({"X-Memory-Mode": "auto"}, memory_enabled=False).mode is Mode.OFF


def test_context_budget():
    assert who().context_budget is None
    assert who({"X-Memory-Context-Budget": "50"}).context_budget == 50
    assert who({"X-Memory-Context-Budget": "0"}).context_budget == 0


@pytest.mark.parametrize("bad", ["-1", "lots", "1.5"])
def test_bad_context_budget_is_a_bad_request(bad):
    with pytest.raises(BadRequest) as raised:
        who({"X-Memory-Context-Budget": bad})
    assert raised.value.param == "X-Memory-Context-Budget"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("1700000000", 1_700_000_000.0),
        ("1700000000.5", 1_700_000_000.5),
        ("2023-04-05T06:07:08Z", datetime(2023, 4, 5, 6, 7, 8, tzinfo=UTC).timestamp()),
        ("2023-04-05T08:07:08+02:00", datetime(2023, 4, 5, 6, 7, 8, tzinfo=UTC).timestamp()),
        ("2023-04-05T06:07:08", datetime(2023, 4, 5, 6, 7, 8, tzinfo=UTC).timestamp()),
        ("2023-04-05", datetime(2023, 4, 5, tzinfo=UTC).timestamp()),
    ],
)
def test_timestamp_header(value, expected):
    assert who({"X-Memory-Timestamp": value}).timestamp == expected


def test_no_timestamp_header_means_now():
    assert who().timestamp is None


def test_bad_timestamp_is_a_bad_request():
    with pytest.raises(BadRequest) as raised:
        who({"X-Memory-Timestamp": "last tuesday"})
    assert raised.value.param == "X-Memory-Timestamp"


# A chat UI's background task (memory/ingest/ui_tasks.py): Open WebUI's title request.
TITLE_TASK = {
    "messages": [
        {
            "role": "user",
            "content": "### Task:\nGenerate a concise title.\n<chat_history>\n"
            "USER: I adopted a beagle\nASSISTANT: Congratulations!\n</chat_history>",
        }
    ]
}


def test_a_chat_uis_background_task_has_memory_off_and_says_which_ui():
    who = identify({}, TITLE_TASK, skip_ui_tasks=True)
    assert (who.mode, who.ui_task) == (Mode.OFF, "open-webui")


@pytest.mark.parametrize("asked", ["auto", "read", "write", "off"])
def test_a_mode_the_client_asks_for_beats_the_ui_task_rule(asked):
    who = identify({"x-memory-mode": asked}, TITLE_TASK, skip_ui_tasks=True)
    assert (who.mode, who.ui_task) == (Mode(asked), None)


def test_without_skip_ui_tasks_a_ui_task_is_a_conversation():
    assert (identify({}, TITLE_TASK).mode, identify({}, TITLE_TASK).ui_task) == (Mode.AUTO, None)
    off = identify({}, TITLE_TASK, memory_enabled=False, skip_ui_tasks=True)
    assert (off.mode, off.ui_task) == (Mode.OFF, None)  # off anyway: no task to count
