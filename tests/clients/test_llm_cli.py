"""simonw's `llm` CLI, run for real against moim: a model from `extra-openai-models.yaml`.

`llm` can set only a base URL per model, so the user goes in the path (`/u/{user}/v1`).
Each prompt is a conversation of its own: the fact said in the first is recalled in the second.
The CLI runs as a subprocess with a temporary `LLM_USER_PATH` (its keys, logs and models).
"""

import json
import os
import subprocess
import sys

import pytest

from tests.clients.round_trip import FACT, QUESTION, USER, assert_not_recalled_yet, assert_recalled


@pytest.fixture
def llm(proxy, tmp_path):
    """Run `llm` with one extra model, `moim-mini`, whose api_base is moim."""
    home = tmp_path / "llm"
    home.mkdir()
    (home / "keys.json").write_text(json.dumps({"moim": "sk-client"}))
    (home / "extra-openai-models.yaml").write_text(
        "- model_id: moim-mini\n"
        "  model_name: gpt-4o-mini\n"
        f"  api_base: {proxy.root}/u/{USER}/v1\n"
        "  api_key_name: moim\n"
    )
    env = {**os.environ, "LLM_USER_PATH": str(home), "LLM_LOAD_PLUGINS": ""}
    env.pop("OPENAI_API_KEY", None)

    def run(*args):
        done = subprocess.run(
            [sys.executable, "-m", "llm", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    return run


def test_llm_prompts_round_trip(llm, proxy, upstream):
    said = llm("prompt", "-m", "moim-mini", FACT)  # streamed, llm's default
    assert_not_recalled_yet(upstream)
    proxy.flush()

    answer = llm("prompt", "-m", "moim-mini", "--no-stream", QUESTION)

    assert said == "echo: " + FACT
    assert answer == "echo: " + QUESTION
    assert_recalled(upstream)
    assert [r.path for r in upstream.requests] == ["/v1/chat/completions"] * 2
    assert upstream.requests[0].json["stream"] is True
    assert proxy.layer.stats(USER).messages >= 2


def test_llm_system_prompt_keeps_its_place(llm, proxy, upstream):
    llm("prompt", "-m", "moim-mini", FACT)
    proxy.flush()

    llm("prompt", "-m", "moim-mini", "--system", "Answer in French.", QUESTION)

    messages = upstream.last_json["messages"]
    assert messages[0]["role"] == "system"
    assert "Answer in French." in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": QUESTION}
    assert_recalled(upstream)
