"""What "why this block" keeps of a request is bounded: the inspector holds each user's last
requests in RAM (`inspector.history` of them, for 256 users), and a request's question and
model name are the client's, up to `server.max_body_bytes` (32 MiB) each. Kept whole, ten
pasted documents of a few MB a user held gigabytes until a restart.

Through the real proxy and its inspector, over HTTP.
"""

import html
import re

import httpx

from memory import MemoryLayer
from proxy.inspector.ring import QUERY_CHARS, TEXT_CHARS
from tests.e2e.test_inspector import browser, chat  # noqa: F401 (a fixture)

PASTED = "the kayak log line " * 10_000  # 190,000 characters
MODEL = "gpt-4o-mini-" + "x" * 50_000


def _field(page, name):
    found = re.search(rf"<dt>{name}</dt><dd>(?:<pre>)?(.*?)(?:</pre>)?</dd>", page.text, re.S)
    assert found is not None, name
    return html.unescape(found.group(1))


def test_why_this_block_keeps_a_long_question_and_model_name_cut(proxy, browser):  # noqa: F811
    body = {"model": MODEL, "messages": [{"role": "user", "content": PASTED + "where is it?"}]}
    headers = {"x-memory-user-id": "alice", "x-request-id": "req-pasted"}
    answer = httpx.post(proxy.url + "/chat/completions", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text

    page = browser(proxy).get("/ui/users/alice/why", params={"request": "req-pasted"})

    assert page.status_code == 200
    query, model = _field(page, "Query"), _field(page, "Model")
    # a long message's end leads its query (memory/recall/query.py): the question is shown
    assert query.startswith("kayak log line") and "where is it?" in query
    assert query.endswith("…")
    assert len(query) <= QUERY_CHARS + 1
    assert model.startswith("gpt-4o-mini-xxx") and model.endswith("…")
    assert len(model) <= TEXT_CHARS + 1


def test_a_user_forgotten_by_another_process_is_not_shown(proxy, browser):  # noqa: F811
    """`moim memory delete` beside a running server forgets the user in the database; the
    server's ring still held their last blocks, which quote what was forgotten."""
    said = "My sailboat is called Gaivota and is moored in Lagos"
    chat(proxy, "ana", said)
    proxy.flush()
    chat(proxy, "ana", "What is the name of my sailboat?", x_request_id="req-boat")
    inspector = browser(proxy)
    assert "Gaivota" in inspector.get("/ui/users/ana/why", params={"request": "req-boat"}).text

    other = MemoryLayer(proxy.config.memory)  # as `moim memory delete` opens it
    try:
        assert other.forget("ana") > 0
    finally:
        other.close()

    assert inspector.get("/ui/users/ana/why", params={"request": "req-boat"}).status_code == 404
    page = inspector.get("/ui/users/ana/why")
    assert "Gaivota" not in page.text and "my sailboat" not in page.text
