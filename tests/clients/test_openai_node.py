"""openai-node (the `openai` npm package), run for real against moim under Node.

The package is pinned in `tests/clients/node/package.json` (the `node` fixture installs it:
tests/clients/conftest.py). `round_trip.mjs` says the fact (chat, not streamed), flushes,
asks in a new conversation (chat, streamed) and embeds a text; the fake upstream shows what
moim sent.
"""

import json
import subprocess
from pathlib import Path

from tests.clients.round_trip import FACT, QUESTION, USER, assert_recalled
from tests.upstream_api import embedding_of

NODE_DIR = Path(__file__).parent / "node"


def test_openai_node_round_trip_and_embeddings(node, proxy, upstream):
    done = subprocess.run(
        [node, "round_trip.mjs", proxy.url, USER, FACT, QUESTION],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["said"] == "echo: " + FACT
    assert result["answer"] == "echo: " + QUESTION
    assert result["embedding"] == embedding_of(FACT)
    said, asked, embedded = upstream.requests
    assert "stream" not in said.json and asked.json["stream"] is True
    assert "user-agent" in asked.headers and "OpenAI/JS" in asked.headers["user-agent"]
    assert_recalled(upstream, asked.json["messages"])
    assert embedded.path == "/v1/embeddings"
    assert embedded.json["encoding_format"] == "base64"  # openai-node's default, decoded by it
