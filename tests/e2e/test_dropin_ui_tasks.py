"""Chat UIs' background task requests (a title, tags) are not memories (memory/ingest/ui_tasks.py).

Open WebUI, after a chat turn, asks the same model for the chat's title and tags through the
same endpoint, with the same user and chat id headers: one user message, its template with
the chat's transcript in `<chat_history>`. moim took each for a conversation: it injected a
block into it, and stored the prompt (a copy of the chat) and the reply (a title) in the
chat's own session, to come back in recall as duplicates.
"""

import json

import httpx

OWUI = {"X-OpenWebUI-User-Id": "owui-alice", "X-OpenWebUI-Chat-Id": "chat-1"}
SAID = "I adopted a beagle named Biscuit last week, he loves carrots."

TITLE = """### Task:
Generate a concise, 3-5 word title with an emoji summarizing the chat history.
### Guidelines:
- The title should clearly represent the main theme or subject of the conversation.
### Output:
JSON format: {{ "title": "your concise title here" }}
### Chat History:
<chat_history>
{history}
</chat_history>"""

TAGS = """### Task:
Generate 1-3 broad tags categorizing the main themes of the chat history, along with 1-3 more \
specific subtopic tags.

### Output:
JSON format: {{ "tags": ["tag1", "tag2", "tag3"] }}

### Chat History:
<chat_history>
{history}
</chat_history>"""


def sent_upstream(upstream):
    return json.dumps(upstream.last_json["messages"], ensure_ascii=False)


def ask(client, messages, **kwargs):
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=messages, **kwargs
    )
    parsed = raw.parse()
    return raw.headers, list(parsed) if kwargs.get("stream") else parsed


def stored(proxy, user):
    return [(m.role, m.content) for m in proxy.layer.store.messages(user)]


def test_an_open_webui_chat_stores_only_the_chat_not_its_title_and_tags(proxy, upstream):
    with proxy.client(default_headers=OWUI) as client:
        chunks = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": SAID}], stream=True
        )
        reply = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        history = f"USER: {SAID}\nASSISTANT: {reply}"
        for template in (TITLE, TAGS):
            task = [{"role": "user", "content": template.format(history=history)}]
            headers, _ = ask(client, task, stream=False)

            # no block: the body as the client sent it
            assert upstream.last_json == {"model": "gpt-4o-mini", "messages": task, "stream": False}
            assert headers["x-memory-mode"] == "off"
            assert headers["x-memory-skipped"] == "ui-task"
        proxy.flush()
        stats = httpx.get(proxy.url + "/memory/stats", headers=OWUI).json()

        assert stored(proxy, "owui-alice") == [("user", SAID), ("assistant", reply)]
        assert stats["messages"] == 2 and stats["sessions"] == 1

        # the chat's next turn: its session holds nothing of the tasks to bring back
        turn = [
            {"role": "user", "content": SAID},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "Which vegetables can a beagle eat besides carrots?"},
        ]
        headers, _ = ask(client, turn)
        assert headers["x-memory-mode"] == "auto" and "x-memory-skipped" not in headers
        assert "### Task" not in sent_upstream(upstream)
        assert "chat_history" not in sent_upstream(upstream)

    # a new conversation recalls the chat, and nothing of the task prompts nor their replies
    new_chat = {**OWUI, "X-OpenWebUI-Chat-Id": "chat-2"}
    with proxy.client(default_headers=new_chat) as client:
        ask(client, [{"role": "user", "content": "What is the name of the beagle I adopted?"}])
    block = sent_upstream(upstream)
    assert "=== Memory Context ===" in block and "Biscuit" in block
    assert "### Task" not in block and "chat_history" not in block

    metrics = httpx.get(proxy.root + "/metrics").text
    assert 'moim_ui_tasks_total{client="open-webui"} 2.0' in metrics


def test_a_mode_the_client_asks_for_wins_and_config_can_turn_the_rule_off(make_proxy, upstream):
    """`X-Memory-Mode` is the user's word; `memory.skip_ui_tasks: false` stores tasks as before."""
    task = [{"role": "user", "content": TITLE.format(history=f"USER: {SAID}")}]
    proxy = make_proxy()
    with proxy.client(default_headers={**OWUI, "X-Memory-Mode": "write"}) as client:
        headers, _ = ask(client, task)
    assert headers["x-memory-mode"] == "write" and "x-memory-skipped" not in headers

    unskipped = make_proxy(skip_ui_tasks=False)
    with unskipped.client(default_headers=OWUI) as client:
        headers, _ = ask(client, task)
    assert headers["x-memory-mode"] == "auto" and "x-memory-skipped" not in headers

    proxy.flush()
    unskipped.flush()
    assert [role for role, _ in stored(proxy, "owui-alice")] == ["user", "assistant"]
    assert [role for role, _ in stored(unskipped, "owui-alice")] == ["user", "assistant"]


def test_a_user_who_asks_for_a_title_in_words_is_remembered(proxy, upstream):
    """The instruction without a UI's embedded transcript is a user's own message."""
    said = "### Task: write a title for my blog post about adopting Biscuit, my beagle"
    with proxy.client(default_headers=OWUI) as client:
        headers, _ = ask(client, [{"role": "user", "content": said}])
    proxy.flush()

    assert headers["x-memory-mode"] == "auto" and "x-memory-skipped" not in headers
    assert stored(proxy, "owui-alice")[0] == ("user", said)


LIBRECHAT_TITLE = f"""Analyze this conversation and provide:
1. The detected language of the conversation
2. A concise title in the detected language (5 words or less, no punctuation or quotation)

User: {SAID}
AI: Congratulations on Biscuit!"""

LOBECHAT_SYSTEM = """You are a professional conversation summarizer. Generate a concise title that \
captures the essence of the conversation.

Rules:
- Output ONLY the title text, no explanations or additional context"""


def test_librechat_and_lobechat_title_requests_store_nothing(proxy, upstream):
    """Neither sends a chat id: each title request was a conversation of its own (a derived
    session), its prompt a copy of the chat among the user's memories."""
    tasks = {
        "librechat": [{"role": "user", "content": LIBRECHAT_TITLE}],
        "lobechat": [
            {"role": "system", "content": LOBECHAT_SYSTEM},
            {"role": "user", "content": f"user: {SAID}\nassistant: Congratulations on Biscuit!"},
        ],
    }
    with proxy.client(default_headers={"X-Memory-User-Id": "ui-bob"}) as client:
        ask(client, [{"role": "user", "content": SAID}])
        for task in tasks.values():
            headers, _ = ask(client, task, stream=True)
            assert headers["x-memory-skipped"] == "ui-task"
            assert upstream.last_json["messages"] == task
    proxy.flush()

    assert [role for role, _ in stored(proxy, "ui-bob")] == ["user", "assistant"]
    metrics = httpx.get(proxy.root + "/metrics").text
    assert 'moim_ui_tasks_total{client="librechat"} 1.0' in metrics
    assert 'moim_ui_tasks_total{client="lobechat"} 1.0' in metrics
