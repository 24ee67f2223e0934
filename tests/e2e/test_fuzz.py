"""Whatever a client sends, moim answers without a 5xx of its own and keeps running.

CONTRACT.md, "Errors": a 4xx for bad input, never a 5xx caused by the memory layer. The
fake upstream answers every plain model name with an echo, so any 5xx here is moim's: the
model names that make it fail on purpose (`error-500`, `broken`, …) and `provider/…` names
(litellm, which would leave this machine) are never generated.

Strings include lone UTF-16 surrogates (`"\\ud800"` in the JSON), which are not Unicode:
moim must refuse them with a 400, not fail on them later. Any value of a body may also be
hostile JSON: nested ~100 to 5,000 levels deep, or an integer past SQLite's 64 bits (or
Python's 4,300 digits); and every path parameter (fact key or id, the `/u/{user}` user) and
integer query parameter gets huge numbers and over-long ids. Each must be a 4xx in OpenAI's
shape, never a RecursionError's or OverflowError's 500. Every route is driven: chat, the
memory API (facts by key, delete, flush, import, export, search), models, metrics; and a
second proxy with proxy keys (`auth.keys`) gets any route with any `Authorization`.

The strategies are public so `bench/fuzz.py` can drive them at volume. In the default
suite each endpoint gets 20 to 300 examples (fewer where a request reaches the memory
layer); `MOIM_FUZZ_EXAMPLES` (default 300) scales them all.
"""

import copy
import json
import os
import string
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from urllib.parse import quote

import httpx
import pytest
import sqlean
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from memory import MemoryLayer, Settings
from proxy.app import build_app
from proxy.config import Config, ProxyKey
from proxy.serving import uvicorn_options
from proxy.upstream import LITELLM_PREFIXES
from tests.conftest import Proxy, serve_app
from tests.upstream import MODELS

EXAMPLES = int(os.environ.get("MOIM_FUZZ_EXAMPLES", "300"))  # bodies refused early: cheap
PIPELINE_EXAMPLES = max(EXAMPLES // 3, 1)  # requests that reach recall, storage or the model
SPECIAL_MODELS = {"error-400", "error-401", "error-429", "error-500", "slow", "broken", *MODELS} - {
    "gpt-4o-mini",
    "gpt-4o",
}
MEMORY_HEADERS = (
    "x-memory-user-id",
    "x-memory-session-id",
    "x-memory-mode",
    "x-memory-context-budget",
    "x-memory-timestamp",
    "x-memory-tools",
    "x-sm-user-id",
    "x-sm-conversation-id",
    "x-openwebui-user-id",
    "x-openwebui-chat-id",
    "x-litellm-end-user-id",
    "x-request-id",
)
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")

# -- strategies --------------------------------------------------------------------------------

# Lone UTF-16 surrogates: json.dumps escapes them (`"\\ud800"`), and json.loads gives them
# back as a str that no UTF-8 encoder accepts.
lone_surrogates = st.lists(
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "a", " "]), min_size=1, max_size=4
).map("".join)
texts = st.text(max_size=40) | lone_surrogates
scalars = st.none() | st.booleans() | st.integers() | st.floats() | texts
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=10,
)


def _harmless_model(name):
    prefix = name.split("/", 1)[0] if "/" in name else None
    return name.strip() not in SPECIAL_MODELS and prefix not in LITELLM_PREFIXES


models = (
    st.sampled_from(["gpt-4o-mini", "gpt-4o", "gpt-3.5-turbo", "claude-x", "llama3"])
    | st.text(min_size=1, max_size=30)
).filter(_harmless_model)
roles = st.sampled_from(["user", "assistant", "system", "developer", "tool", "function"]) | (
    st.text(max_size=12)
)
# The fake upstream reads list content as dicts with a string `text` when `type` is "text"
# (anything else makes *it* fail with a 500), so parts vary everywhere but there.
content_parts = st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=200)})
    | st.fixed_dictionaries(
        {
            "type": st.just("image_url"),
            "image_url": st.fixed_dictionaries({"url": st.text(max_size=30)}),
        }
    )
    | st.dictionaries(st.text(max_size=8), json_values, max_size=3).filter(
        lambda part: part.get("type") != "text"
    ),
    max_size=4,
)
contents = st.none() | st.text(max_size=400) | lone_surrogates | content_parts | scalars
tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.text(max_size=10),
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {"name": st.text(max_size=10), "arguments": st.text(max_size=40)}
            ),
        }
    )
    | json_values,
    max_size=2,
)
messages = st.fixed_dictionaries(
    {"role": roles, "content": contents},
    optional={
        "name": st.text(max_size=10) | json_values,
        "tool_calls": tool_calls,
        "tool_call_id": st.text(max_size=10) | json_values,
    },
)
chat_bodies = st.fixed_dictionaries(
    {"model": models, "messages": st.lists(messages, min_size=1, max_size=6)},
    optional={
        "stream": st.booleans(),
        "user": st.text(max_size=20) | json_values,
        "temperature": st.floats(allow_nan=False) | json_values,
        "n": st.integers(0, 3),
        # the fake upstream reads `stream_options` as a mapping (anything else makes it fail)
        "stream_options": st.dictionaries(
            st.sampled_from(["include_usage", "x"]), json_values, max_size=2
        ),
        "tools": json_values,
        "response_format": json_values,
        "extra": json_values,
    },
)
# What HTTP allows in a header value: printable ASCII, not empty, no surrounding blanks.
printable = (
    st.text(alphabet=string.printable[:95], min_size=1, max_size=40).map(str.strip).filter(bool)
)
header_values = {
    "x-memory-mode": st.sampled_from(["auto", "read", "write", "off", "AUTO", "Off"]) | printable,
    "x-memory-context-budget": st.integers(-5, 10**30).map(str) | printable,
    "x-memory-timestamp": st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "1e308",
            "-1e308",
            "0",
            "2024-02-30",
            "9999-12-31T23:59:59-23:59",
            "0001-01-01T00:00:00+14:00",
            "2024-01-01T00:00:00Z",
        ]
    )
    | st.floats().map(repr)
    | st.datetimes().map(lambda d: d.isoformat())
    | printable,
    "x-memory-tools": st.sampled_from(["on", "off", "true", "1"]) | printable,
}
memory_headers = st.dictionaries(
    st.sampled_from(MEMORY_HEADERS),
    printable,
    max_size=5,
).flatmap(
    lambda chosen: st.fixed_dictionaries(
        {name: header_values.get(name, printable) for name in chosen}
    )
)


def jsonl(items):
    return "\n".join(json.dumps(item) for item in items).encode()


export_items = st.fixed_dictionaries(
    {
        "session_id": st.text(max_size=10),
        "message_key": st.text(max_size=10),
        "content_hash": st.text(max_size=10),
        "role": roles,
        "content": st.text(max_size=200) | lone_surrogates,
        "created_at": st.floats() | st.integers(),
    },
    optional={
        "type": st.sampled_from(["message", "fact"]) | json_values,
        "id": json_values,
        "name": json_values,
        "payload": json_values,
        "model": json_values,
        "tokens": json_values,
        "partial": json_values,
        "key": json_values,
        "value": json_values,
        "category": json_values,
    },
)
import_bodies = (
    st.binary(max_size=300)
    | st.lists(json_values, max_size=4).map(jsonl)
    | st.lists(export_items, min_size=1, max_size=4).map(jsonl)
)
# Integers past SQLite's 64-bit INTEGER, as JSON text (json.loads gives a Python int), and
# one past Python's 4,300 digits (json.loads refuses it: a ValueError).
HUGE_INTEGERS = (
    "99999999999999999999999",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1" * 5000,
)
huge_integers = st.sampled_from(HUGE_INTEGERS) | st.integers(min_value=2**63).map(str)
fact_keys = st.sampled_from(
    ["name", "city", "diet", "pet", "name/first", ".", "%2F", *HUGE_INTEGERS[:4]]
)
fact_bodies = (
    st.fixed_dictionaries(
        {"key": fact_keys | texts | json_values, "value": st.text(max_size=60) | json_values},
        optional={
            "category": st.text(max_size=12) | json_values,
            "policy": json_values,
            "pinned": json_values,
            "ttl_seconds": json_values,
        },
    ).map(lambda d: json.dumps(d).encode())
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=200)
)
search_params = st.fixed_dictionaries(
    {"q": st.text(max_size=60)},
    optional={"k": st.integers(-3, 200).map(str) | huge_integers | printable},
)


def _nested(depth, opening):
    """JSON text nested `depth` levels deep: built as text, as json.dumps would recurse."""
    closing = "]" if opening == "[" else "}"
    return opening * depth + "1" + closing * depth


deep_json = st.builds(
    _nested,
    st.sampled_from([101, 990, 5000]) | st.integers(95, 5000),
    st.sampled_from(["[", '{"a":']),
)
# JSON text that json.loads takes, but moim must refuse or store without failing.
hostile_json = deep_json | huge_integers
SPLICE = "\x00hostile\x00"  # stands for the hostile JSON text in a value until it is dumped


def _plant(value, index):
    """A copy of `value` whose `index`-th node (walk order, modulo their number) is SPLICE."""
    value = copy.deepcopy(value)
    slots = []
    stack = [value]
    while stack:
        item = stack.pop()
        keys = list(item) if isinstance(item, dict) else range(len(item))
        for key in keys:
            slots.append((item, key))
            if isinstance(item[key], (dict, list)):
                stack.append(item[key])
    if not isinstance(value, (dict, list)) or not slots:
        return SPLICE
    parent, key = slots[index % len(slots)]
    parent[key] = SPLICE
    return value


def _dump_planted(value, raw):
    return json.dumps(value).replace(json.dumps(SPLICE), raw)


def hostile(values):
    """JSON bodies from `values`, one value anywhere in each replaced by hostile JSON."""
    return st.builds(
        lambda value, index, raw: _dump_planted(_plant(value, index), raw).encode(),
        values,
        st.integers(0, 10**6),
        hostile_json,
    )


hostile_chat_bodies = hostile(chat_bodies)
hostile_fact_bodies = hostile(
    st.fixed_dictionaries(
        {"key": fact_keys, "value": st.text(max_size=60)},
        optional={"category": st.just("personal"), "pinned": st.booleans()},
    )
)
# JSONL with one value of one line hostile (the other lines are what an export holds).
hostile_import_bodies = st.builds(
    lambda items, index, raw: "\n".join(
        _dump_planted(item, raw) for item in _plant(items, index)
    ).encode(),
    st.lists(export_items, min_size=1, max_size=3),
    st.integers(0, 10**6),
    hostile_json,
)


def _in_path(text):
    return quote(text, safe="")


FACT_ACTIONS = (("DELETE", ""), ("GET", "/history"), ("POST", "/pin"), ("POST", "/unpin"))
# (method, path suffix) and a fact key: often one the fuzz also sets, so pin, history and
# delete find something to work on; or a fact id past SQLite's integers.
fact_key_requests = st.tuples(
    st.sampled_from(FACT_ACTIONS), fact_keys | st.text(min_size=1, max_size=20) | huge_integers
)
# Users of the `/u/{user}` path form: any text, and ids around the 256-character limit.
path_users = (
    st.text(min_size=1, max_size=20)
    | st.text(min_size=250, max_size=300)
    | st.integers(250, 300).map(lambda n: "u" * n)
    | huge_integers
)


def fact_key_route(action, key):
    method, suffix = action
    return method, f"/v1/memory/facts/{_in_path(key)}{suffix}"


# (method, path) of every route that takes no body.
upkeep_routes = st.one_of(
    st.sampled_from(
        [
            ("DELETE", "/v1/memory"),
            ("POST", "/v1/memory/flush"),
            ("GET", "/metrics"),
            ("GET", "/health"),
            ("GET", "/health/readiness"),
        ]
    ),
    path_users.map(lambda user: ("GET", f"/u/{_in_path(user)}/v1/models")),
)
read_routes = st.sampled_from(
    [
        ("GET", "/v1/memory/stats"),
        ("GET", "/v1/memory/export"),
        ("GET", "/v1/memory/facts"),
        ("GET", "/v1/models"),
        ("GET", "/models"),
    ]
)
any_route = fact_key_requests.map(lambda c: fact_key_route(*c)) | upkeep_routes | read_routes
# With proxy keys: the configured ones, their near misses, anything, or none at all.
FUZZ_KEYS = (
    ProxyKey("sk-fuzz-alice", user_id="alice"),
    ProxyKey("sk-fuzz-team", users=("bob", "carol")),
    ProxyKey("sk-fuzz-admin", admin=True),
)
valid_authorizations = st.sampled_from([f"Bearer {k.key}" for k in FUZZ_KEYS])
authorizations = st.one_of(  # about half of them valid
    valid_authorizations,
    valid_authorizations,
    valid_authorizations,
    valid_authorizations,
    st.none(),
    st.sampled_from(["Bearer", "bearer sk-fuzz-admin", "sk-fuzz-admin", "Basic eA=="]),
    st.sampled_from([k.key for k in FUZZ_KEYS]).map(lambda key: f"Bearer {key[:-1]}"),
    printable.map(lambda value: f"Bearer {value}"),
    printable,
)


def _with_key(headers, authorization, as_x_api_key):
    """The headers with the authorization as `Authorization`, or its key as `x-api-key`."""
    if authorization is None:
        return headers
    if not as_x_api_key:
        return {**headers, "authorization": authorization}
    key = authorization.removeprefix("Bearer ").strip() or authorization
    return {**headers, "x-api-key": key}


keyed_headers = st.builds(_with_key, memory_headers, authorizations, st.booleans())


def presents_a_key(headers):
    """Whether a request with these headers carries one of FUZZ_KEYS (CONTRACT.md, "Chat":
    `Authorization: Bearer <proxy key>`; README: `x-api-key` too)."""
    authorization = headers.get("authorization", "")
    token = authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""
    return (token or headers.get("x-api-key", "").strip()) in {k.key for k in FUZZ_KEYS}


# -- the proxy under fuzz ----------------------------------------------------------------------


@contextmanager
def fuzzed_proxy(directory, upstream, embedder, **fields):
    memory = Settings(db_path=directory / "moim.db")
    config = Config(memory=memory, upstream_base_url=upstream.url, **fields)
    layer = MemoryLayer(memory, embedder_factory=lambda _: embedder)
    with (
        serve_app(build_app(config, layer), **uvicorn_options(config)) as root,
        httpx.Client(base_url=root, timeout=30) as http,
    ):
        yield Proxy(root + "/v1", root, config, layer), http
    # a fresh connection: a long-lived one may report a stale FTS5 index (see test_faults)
    with closing(sqlean.connect(str(memory.db_path))) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory, upstream, embedder):
    with fuzzed_proxy(tmp_path_factory.mktemp("fuzz"), upstream, embedder) as proxy_and_http:
        yield proxy_and_http


@pytest.fixture(scope="module")
def fuzzed_with_keys(tmp_path_factory, upstream, embedder):
    directory = tmp_path_factory.mktemp("fuzz-keys")
    with fuzzed_proxy(
        directory, upstream, embedder, keys=FUZZ_KEYS, upstream_api_key="sk-provider"
    ) as proxy_and_http:
        yield proxy_and_http


def fuzz_settings(examples):
    """No shrinking and one bug per test: a failure is reported as found, within seconds
    (the plain examples at the end of this module are the minimal cases). Derandomized, so
    every run tries the same inputs; bench/fuzz.py explores further at random."""
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        report_multiple_bugs=False,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


def settle(http):
    """Wait until the server has logged the crash behind a 5xx, before pytest reports ours.

    CPython 3.11 before 3.11.8 keeps `ast` construction state per interpreter, not per
    thread (python/cpython#106905): the server thread formatting its traceback while pytest
    formats ours can end the whole session in an INTERNALERROR. The server logs right after
    sending the 500, on its one event loop, so one more round trip orders the two.
    """
    http.get("/health")


def not_moims_fault(response, http):
    if response.status_code >= 500:
        settle(http)
    assert response.status_code < 500, (response.status_code, response.text)


def answered_in_openai_shape(response, http):
    """No 5xx of moim's own, and an error in OpenAI's shape. The fake provider fails on some
    values it reads itself (`stream_options`, a text part's `text`): that 5xx is relayed,
    with `x-memory-mode` as on every chat response moim builds; a crash in moim has none."""
    if response.status_code >= 500 and "x-memory-mode" in response.headers:
        return
    not_moims_fault(response, http)
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}, (
            response.status_code,
            response.text,
        )


def still_healthy(http):
    assert http.get("/health").status_code == 200
    metrics = http.get("/metrics").text
    assert "moim_memory_write_failures_total 0" in metrics, metrics


@pytest.mark.slow
@fuzz_settings(EXAMPLES)
@given(body=json_values, path=st.sampled_from(CHAT_PATHS))
def test_chat_any_json_value(fuzzed, body, path):
    _, http = fuzzed
    not_moims_fault(
        http.post(
            path, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
        ),
        http,
    )


@pytest.mark.slow
@fuzz_settings(EXAMPLES)
@given(body=st.binary(max_size=500), path=st.sampled_from(CHAT_PATHS))
def test_chat_any_bytes(fuzzed, body, path):
    _, http = fuzzed
    not_moims_fault(http.post(path, content=body), http)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(body=chat_bodies, headers=memory_headers, path=st.sampled_from(CHAT_PATHS))
def test_chat_shaped_bodies_with_any_memory_headers(fuzzed, body, headers, path):
    proxy, http = fuzzed
    response = http.post(path, content=json.dumps(body).encode(), headers=headers)
    not_moims_fault(response, http)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(body=chat_bodies, user=path_users)
def test_chat_any_user_in_the_path(fuzzed, body, user):
    _, http = fuzzed
    path = f"/u/{quote(user, safe='')}/v1/chat/completions"
    not_moims_fault(http.post(path, content=json.dumps(body).encode()), http)


@pytest.mark.slow
@fuzz_settings(EXAMPLES // 2)
@given(body=import_bodies, headers=memory_headers)
def test_import_any_body(fuzzed, body, headers):
    _, http = fuzzed
    not_moims_fault(http.post("/v1/memory/import", content=body, headers=headers), http)


@pytest.mark.slow
@fuzz_settings(EXAMPLES)
@given(body=fact_bodies, headers=memory_headers)
def test_facts_any_body(fuzzed, body, headers):
    _, http = fuzzed
    not_moims_fault(http.post("/v1/memory/facts", content=body, headers=headers), http)


HOSTILE = {"x-memory-user-id": "hostile"}  # the body is what these vary


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(body=hostile_chat_bodies, path=st.sampled_from(CHAT_PATHS))
def test_chat_a_deep_or_huge_value_anywhere(fuzzed, body, path):
    _, http = fuzzed
    answered_in_openai_shape(http.post(path, content=body), http)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(body=hostile_fact_bodies)
def test_facts_a_deep_or_huge_value_anywhere(fuzzed, body):
    _, http = fuzzed
    answered_in_openai_shape(http.post("/v1/memory/facts", content=body, headers=HOSTILE), http)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(body=hostile_import_bodies)
def test_import_a_deep_or_huge_value_anywhere(fuzzed, body):
    _, http = fuzzed
    answered_in_openai_shape(http.post("/v1/memory/import", content=body, headers=HOSTILE), http)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(params=search_params, headers=memory_headers)
def test_search_any_query(fuzzed, params, headers):
    _, http = fuzzed
    not_moims_fault(http.get("/v1/memory/search", params=params, headers=headers), http)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(
    headers=memory_headers,
    path=st.sampled_from(
        ["/v1/memory/stats", "/v1/memory/export", "/v1/memory/facts", "/v1/models"]
    ),
)
def test_reads_with_any_memory_headers(fuzzed, headers, path):
    _, http = fuzzed
    not_moims_fault(http.get(path, headers=headers), http)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(request=fact_key_requests, headers=st.just({}) | memory_headers, seed=st.booleans())
def test_fact_key_routes_with_any_key(fuzzed, request, headers, seed):
    _, http = fuzzed
    action, key = request
    if seed:  # a fact of that key exists, so pin, unpin, history and delete do their work
        body = json.dumps({"key": key, "value": "fuzzed"}).encode()
        not_moims_fault(http.post("/v1/memory/facts", content=body, headers=headers), http)
    method, path = fact_key_route(action, key)
    not_moims_fault(http.request(method, path, headers=headers), http)


@pytest.mark.slow
@fuzz_settings(EXAMPLES // 10)  # a flush or a delete waits for the writer
@given(route=upkeep_routes, headers=memory_headers)
def test_upkeep_routes_with_any_memory_headers(fuzzed, route, headers):
    _, http = fuzzed
    method, path = route
    not_moims_fault(http.request(method, path, headers=headers), http)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(route=any_route, headers=keyed_headers)
def test_with_proxy_keys_any_route_any_authorization(fuzzed_with_keys, route, headers):
    _, http = fuzzed_with_keys
    method, path = route
    response = http.request(method, path, headers=headers)
    not_moims_fault(response, http)
    if not presents_a_key(headers) and not path.startswith("/health"):
        # 401; or no such route at all, which the router answers before anyone is asked
        assert response.status_code in (401, 404, 405), (response.status_code, response.text)


@pytest.mark.slow
@fuzz_settings(PIPELINE_EXAMPLES)
@given(body=chat_bodies, headers=keyed_headers, path=st.sampled_from(CHAT_PATHS))
def test_with_proxy_keys_chat_any_authorization(fuzzed_with_keys, body, headers, path):
    _, http = fuzzed_with_keys
    response = http.post(path, content=json.dumps(body).encode(), headers=headers)
    not_moims_fault(response, http)
    if not presents_a_key(headers):
        assert response.status_code == 401, (response.status_code, response.text)


def test_the_keyed_proxy_survived_the_fuzz(fuzzed_with_keys):
    proxy, http = fuzzed_with_keys
    admin = {"authorization": "Bearer sk-fuzz-admin"}
    assert http.get("/health").status_code == 200
    metrics = http.get("/metrics", headers=admin).text
    assert "moim_memory_write_failures_total 0" in metrics, metrics
    assert proxy.layer.store.integrity_ok()


def test_the_proxy_survived_the_fuzz(fuzzed):
    proxy, http = fuzzed
    still_healthy(http)
    assert proxy.layer.store.integrity_ok()
    with proxy.client() as client:
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "still there?"}]
        )
    assert reply.choices[0].message.content == "echo: still there?"


# -- what the fuzz found, pinned as plain examples ---------------------------------------------

IMPORTED = {
    "type": "message",
    "session_id": "s-1",
    "message_key": "k#1",
    "content_hash": "k",
    "role": "user",
    "content": "I keep bees on the roof",
    "created_at": 1700000000.0,
}


@pytest.mark.parametrize(
    ("field", "raw"),
    [
        ("tokens", "{}"),
        ("tokens", '"many"'),
        ("tokens", "[1]"),
        ("tokens", "1e400"),
        ("id", "[1]"),
        ("id", '"abc"'),
        ("id", "1.5"),
        ("id", str(2**70)),
        ("name", '{"first": "Ana"}'),
        ("model", "[1]"),
        ("created_at", "NaN"),
        ("created_at", "Infinity"),
        pytest.param("created_at", str(10**400), id="created_at-10**400"),
    ],
)
def test_import_refuses_an_item_whose_field_has_the_wrong_type(fuzzed, field, raw):
    _, http = fuzzed
    user = f"import-{field}-{abs(hash(raw)) % 10**6}"
    line = json.dumps({**IMPORTED, field: "__RAW__"}).replace('"__RAW__"', raw)
    response = http.post(
        "/v1/memory/import",
        content=line.encode(),
        headers={"x-memory-user-id": user, "connection": "close"},
    )
    settle(http)
    assert response.status_code == 400, (response.status_code, response.text)
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert http.get("/v1/memory/stats", headers={"x-memory-user-id": user}).json()["messages"] == 0


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        (
            "/v1/chat/completions",
            '{"model": "gpt-4o-mini", "messages": '
            '[{"role": "user", "content": "half a pair: \\ud83d"}]}',
            "invalid_json",
        ),
        (
            "/v1/chat/completions",
            '{"model": "gpt-4o-mini", "messages": '
            '[{"role": "user", "content": "hi"}], "user": "\\udc00"}',
            "invalid_json",
        ),
        ("/v1/memory/facts", '{"key": "name", "value": "\\udfff"}', "invalid_json"),
        ("/v1/memory/import", json.dumps({**IMPORTED, "content": "\ud800"}), "invalid_jsonl"),
        # the surrogate's own bytes (CESU-8), not escaped: a 500 when the block went in
        (
            "/v1/chat/completions",
            b'{"model": "gpt-4o-mini", "messages": '
            b'[{"role": "user", "content": "half a pair: \xed\xa0\xbd"}]}',
            "invalid_json",
        ),
        # a UTF-16 body (json.loads reads it) with an escaped one
        (
            "/v1/chat/completions",
            '{"model": "gpt-4o-mini", "messages": '
            '[{"role": "user", "content": "half a pair: \\ud83d"}]}'.encode("utf-16"),
            "invalid_json",
        ),
    ],
)
def test_a_lone_surrogate_in_the_json_is_refused_with_a_400(fuzzed, path, body, code):
    _, http = fuzzed
    user = {"x-memory-user-id": f"surrogate-{abs(hash(body)) % 10**6}"}
    response = http.post(
        path, content=body if isinstance(body, bytes) else body.encode(), headers=user
    )
    assert response.status_code == 400, (response.status_code, response.text)
    assert response.json()["error"]["code"] == code
    http.post("/v1/memory/flush")
    stats = http.get("/v1/memory/stats", headers=user).json()
    assert (stats["messages"], stats["facts"]) == (0, 0)


def test_a_surrogate_pair_is_text_like_any_other(fuzzed):
    _, http = fuzzed
    user = {"x-memory-user-id": "surrogate-pair"}
    body = '{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}'
    response = http.post("/v1/chat/completions", content=body.encode(), headers=user)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "echo: \U0001f600"


def chat_with(raw):
    """A chat body whose field `x` is the JSON text `raw`."""
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "x": "X"}
    return json.dumps(body).replace('"X"', raw)


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/v1/chat/completions", chat_with(_nested(990, "[")), "invalid_json"),
        ("/v1/chat/completions", _nested(5000, '{"a":'), "invalid_json"),
        (
            "/v1/memory/facts",
            json.dumps({"key": "k", "value": "X"}).replace('"X"', _nested(990, "[")),
            "invalid_json",
        ),
        ("/v1/memory/import", _nested(990, "["), "invalid_jsonl"),
        (
            "/v1/memory/import",
            json.dumps({**IMPORTED, "name": "X"}).replace('"X"', _nested(990, "[")),
            "invalid_jsonl",
        ),
    ],
    ids=["chat", "chat-objects", "facts", "import", "import-field"],
)
def test_json_nested_990_deep_is_refused_with_a_400(fuzzed, path, body, code):
    """json.loads raised RecursionError: a plain-text 500."""
    _, http = fuzzed
    user = {"x-memory-user-id": f"deep-{abs(hash(body)) % 10**6}", "connection": "close"}
    response = http.post(path, content=body.encode(), headers=user)
    settle(http)
    assert response.status_code == 400, (response.status_code, response.text)
    assert response.json()["error"]["code"] == code
    assert "nested deeper than 100 levels" in response.json()["error"]["message"]
    http.post("/v1/memory/flush")
    stats = http.get("/v1/memory/stats", headers=user).json()
    assert (stats["messages"], stats["facts"]) == (0, 0)


def test_json_nested_100_deep_is_taken(fuzzed):
    _, http = fuzzed
    response = http.post("/v1/chat/completions", content=chat_with(_nested(99, "[")).encode())
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("key", HUGE_INTEGERS)
@pytest.mark.parametrize("action", FACT_ACTIONS, ids=lambda action: action[0] + action[1])
def test_a_fact_id_past_sqlites_integers_is_a_key_no_fact_has(fuzzed, action, key):
    """int(key) reached SQLite: OverflowError, a plain-text 500."""
    _, http = fuzzed
    user = {"x-memory-user-id": "huge-ids", "connection": "close"}
    assert http.post(
        "/v1/memory/facts", json={"key": "pet", "value": "a cat"}, headers=user
    ).is_success
    response = http.request(*fact_key_route(action, key), headers=user)
    settle(http)
    assert response.status_code in (400, 404), (response.status_code, response.text)
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize("field", ["tokens", "id"])
@pytest.mark.parametrize("number", HUGE_INTEGERS[:4])
def test_an_import_line_with_an_integer_past_sqlites_is_refused(fuzzed, field, number):
    """A huge `tokens` reached SQLite: OverflowError, a plain-text 500."""
    _, http = fuzzed
    user = {"x-memory-user-id": f"huge-{field}", "connection": "close"}
    line = json.dumps({**IMPORTED, field: "X"}).replace('"X"', number)
    response = http.post("/v1/memory/import", content=line.encode(), headers=user)
    settle(http)
    assert response.status_code == 400, (response.status_code, response.text)
    assert response.json()["error"]["code"] == "invalid_jsonl"
    assert http.get("/v1/memory/stats", headers=user).json()["messages"] == 0


@pytest.mark.parametrize("stamp", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_a_non_finite_memory_timestamp_is_refused(fuzzed, stamp):
    _, http = fuzzed
    response = http.post(
        "/v1/chat/completions",
        headers={"x-memory-timestamp": stamp},
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "My bike is red"}]},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "X-Memory-Timestamp"


@pytest.mark.parametrize(
    "stamp",
    [
        "1e20",
        "1e308",
        "-1e308",
        "-62135596800",
        "9999-12-31T23:59:59-23:59",
        "0001-01-01T00:00:00+14:00",
        "2024-01-01T00:00:00Z",
        "1700000000",
    ],
)
def test_a_memory_timestamp_moim_accepts_is_one_it_can_store_and_recall(fuzzed, stamp):
    """Refusing an out-of-range time is fine; accepting it and then failing every later
    recall and search of that user is not."""
    _, http = fuzzed
    user = {"x-memory-user-id": f"stamp-{abs(hash(stamp)) % 10**6}"}
    told = http.post(
        "/v1/chat/completions",
        headers={**user, "x-memory-timestamp": stamp},
        json={
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "My bike is red and fast"}],
        },
    )
    if told.status_code == 400:
        return
    assert told.status_code == 200, told.text
    http.post("/v1/memory/flush")
    assert http.get("/v1/memory/stats", headers=user).json()["messages"] == 2
    asked = http.post(
        "/v1/chat/completions",
        headers=user,
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Is my bike red?"}]},
    )
    assert asked.status_code == 200
    assert asked.headers.get("x-memory-error") is None
    assert int(asked.headers["x-memory-chunks-injected"]) > 0
    found = http.get("/v1/memory/search", params={"q": "bike"}, headers=user)
    assert found.status_code == 200, found.text
    assert found.json()["results"]


def test_concurrent_imports_index_each_message_once(make_proxy):
    """Import indexes in its request while the writer indexes too: each message must still
    end with exactly its chunks, one vector each, and no vector of a deleted chunk."""
    proxy = make_proxy()

    def import_notes(user):
        lines = [
            json.dumps(
                {
                    **IMPORTED,
                    "session_id": f"s-{user}",
                    "message_key": f"k{i}#1",
                    "content_hash": f"k{i}",
                    "created_at": 1700000000.0 + i,
                    "content": f"{user} note {i}: the tomatoes need water",
                }
            )
            for i in range(30)
        ]
        return httpx.post(
            proxy.root + "/v1/memory/import",
            content="\n".join(lines).encode(),
            headers={"x-memory-user-id": user},
            timeout=60,
        )

    users = [f"importer-{n}" for n in range(3)]
    with ThreadPoolExecutor(len(users)) as pool:
        statuses = [r.status_code for r in pool.map(import_notes, users)]
    proxy.flush()
    store = proxy.layer.store
    counts = {
        "statuses": statuses,
        "messages": store.read("SELECT count(*) FROM messages")[0][0],
        "chunks": store.read("SELECT count(*) FROM chunks")[0][0],
        "vectors": store.read("SELECT count(*) FROM chunk_vectors")[0][0],
        "orphan vectors": store.read(
            "SELECT count(*) FROM chunk_vectors WHERE chunk_id NOT IN (SELECT id FROM chunks)"
        )[0][0],
    }
    assert counts == {
        "statuses": [200, 200, 200],
        "messages": 90,
        "chunks": 90,
        "vectors": 90,
        "orphan vectors": 0,
    }
