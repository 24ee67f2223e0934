"""The Vercel AI SDK (`ai` and `@ai-sdk/openai` on npm), run for real against moim under Node.

Its OpenAI provider speaks the Responses API by default. `node/ai_sdk.mjs` says the fact,
flushes, asks in a new conversation (streamed), then makes a tool call and sends its result
back, as `generateText` does with a tool; the user is named in the base URL's path.
"""

import json
import subprocess
from pathlib import Path

from tests.clients.round_trip import FACT, QUESTION, USER, block_in

NODE_DIR = Path(__file__).parent / "node"

WEATHER = "What is the weather in Paris?"


def test_ai_sdk_round_trip_and_a_tool_call_stored_once(node, proxy, upstream):
    done = subprocess.run(
        [node, "ai_sdk.mjs", f"{proxy.root}/u/{USER}/v1", FACT, QUESTION, WEATHER],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    proxy.flush()

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "said": "echo: " + FACT,
        "answer": "echo: " + QUESTION,
        "weather": "echo: " + WEATHER,
    }
    asked = upstream.requests[1]
    assert asked.path == "/v1/responses" and asked.json["stream"] is True
    block = block_in(asked.json["input"])
    assert block is not None and "Whiskers" in block
    said = [(m.role, m.content) for m in proxy.layer.store.messages(USER)]
    assert said[-4:] == [
        ("user", WEATHER),
        ("assistant", ""),  # the call
        ("tool", "Sunny in Paris"),
        ("assistant", "echo: " + WEATHER),
    ]
    assert said.count(("user", WEATHER)) == 1
