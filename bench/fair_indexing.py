"""How long one user's turn waits to become searchable behind another user's large message.

Run from the repository root:

    /work/venv/bin/python bench/fair_indexing.py [--size 1048576] [--slice 64]

One process: the fake upstream (tests/upstream.py, replies of at most 200 characters) and
moim with the bundled embedding model, each under uvicorn in a thread, a fresh temporary
store. Alice sends one message of `--size` characters (English-like words); as soon as it
is answered, Bob sends a short turn. Printed: how long after his answer Bob's turn is
searchable (polled every 20 ms), and how long Alice's message takes to be indexed whole.
`--slice` sets `memory.index_slice_chunks` where the code has it (issue 12, item 5); run the
same script on older code to compare. Asserts nothing (STYLE.md 18).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from memory import Settings  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from tests.conftest import serve_app, wait_ready  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402

WORDS = "reactor valve pressure nominal shift log entry coolant pump sensor reading stable".split()


def big_text(size: int) -> str:
    rng = random.Random(7)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS) + (str(rng.randrange(1000)) if rng.random() < 0.2 else "")
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def chat(root: str, user: str, text: str) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    headers = {"x-memory-user-id": user}
    response = httpx.post(root + "/v1/chat/completions", json=body, headers=headers, timeout=120)
    response.raise_for_status()


def found(root: str, user: str, query: str, text: str) -> bool:
    response = httpx.get(
        root + "/v1/memory/search",
        params={"q": query, "k": 5},
        headers={"x-memory-user-id": user},
        timeout=60,
    )
    return any(hit["text"] == text for hit in response.json().get("results", []))


def pending(root: str) -> int:
    stats = httpx.get(root + "/v1/memory/stats", timeout=60).json()
    return int(stats["pending"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1 << 20, help="characters in Alice's message")
    parser.add_argument("--slice", type=int, default=None, help="memory.index_slice_chunks")
    args = parser.parse_args()
    names = {f.name for f in fields(Settings)}  # older code has no slices
    extra = (
        {"index_slice_chunks": args.slice} if args.slice and "index_slice_chunks" in names else {}
    )
    slices = getattr(Settings(**extra), "index_slice_chunks", None)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, python "
        f"{platform.python_version()}; code: {ROOT}; slice: {slices or 'none, whole messages'}"
    )
    bob_text = "Bob here: my locker code is quokka4242"
    with tempfile.TemporaryDirectory() as tmp, serve_upstream() as upstream:
        config = Config(
            upstream_base_url=upstream.url, memory=Settings(db_path=Path(tmp) / "m.db", **extra)
        )
        with serve_app(build_app(config)) as root:
            wait_ready(root, timeout=120)
            chat(root, "warm", "warming up the model")
            while pending(root):
                time.sleep(0.05)
            alice = big_text(args.size)
            sent = time.monotonic()
            chat(root, "alice", alice)
            alice_answered = time.monotonic()
            chat(root, "bob", bob_text)
            bob_answered = time.monotonic()
            while not found(root, "bob", "locker code quokka4242", bob_text):
                time.sleep(0.02)
            bob_searchable = time.monotonic()
            while pending(root):
                time.sleep(0.1)
            alice_indexed = time.monotonic()
    print(f"Alice's message: {len(alice):,} characters, answered in {alice_answered - sent:.2f} s")
    print(f"Bob's turn searchable {bob_searchable - bob_answered:.2f} s after his answer")
    print(f"Alice's message indexed whole {alice_indexed - alice_answered:.1f} s after hers")


if __name__ == "__main__":
    main()
