"""Latency moim adds to a streamed chat completion, against the upstream and a bare relay.

Run from the repository root:

    /work/venv/bin/python bench/overhead.py [--requests 200] [--warmup 20] [--chunks 10]
        [--delay-ms 1] [--memory-mode read] [--profile 30] [--db PATH] [--million]
        [--million-user] [--peer-litellm PATH/TO/litellm] [--db-url postgresql://… | --pgserver DIR]

One process: the fake upstream (tests/upstream.py), a ~20-line Starlette relay (twice: on
httpx's own transport, and on moim's, proxy/aiohttp_transport.py) and moim, each under uvicorn
in its own thread and loop; the client is raw HTTP over one keep-alive
`httpx.Client` per path, paths interleaved in a fresh random order each round. Stores are
synthetic (public `Store` methods, Zipf-distributed English words so FTS5 has realistic
postings, vectors from a pool of real embeddings plus noise); the query side is real. All
memory-on questions are unique, so the query-embedding cache never answers; one row repeats
a question to show the cache. --million-user adds one user with 1M chunks (its own database
beside --db, built once and reused). --peer-litellm runs the LiteLLM proxy (its `litellm`
command, installed in a virtualenv of its own: `litellm[proxy]==1.106.2`) in a subprocess,
one worker, no memory, routing the same model to the same fake upstream: a measured row.
--db-url adds the memory-on rows on a PostgreSQL store (moim serve with `db: postgresql://…`)
in the same run, interleaved with the others: the URL's database holds u0, u10k and u100k,
its siblings `<name>_1k` and `<name>_empty` the 1k-chunk user alone and nothing, each created
and filled by `populate` on first use and reused after. --pgserver DIR starts (or reuses) a
local PostgreSQL with pgvector from the `pgserver` wheel and uses its database `moim_bench`.
Prints markdown tables, writes bench/results/overhead.json; asserts nothing (STYLE.md 18).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.background import BackgroundTask  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from bench.harness import ensure_database, pgserver_url, sibling_url, vacuum  # noqa: E402
from memory import MemoryLayer, RecallRequest, Settings, count_message_tokens, inject_block  # noqa: E402
from memory.recall.query import build_query  # noqa: E402
from memory.store.fts import search_terms, turn_tail  # noqa: E402
from memory.store.store import NewMessage  # noqa: E402
from proxy.aiohttp_transport import AiohttpTransport  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from tests.conftest import serve_app  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402

MODEL = "gpt-4o-mini"
PEER_KEY = "sk-bench-" + "7f3a9c2e5b8d1f4a6c0e9b2d5f8a1c3e"  # the LiteLLM proxy's master key
SIZES = {"u0": 0, "u10k": 10_000, "u100k": 100_000}
TEMPLATES = [
    "What did we decide last month about the {} and the {} for the {} project?",
    "Can you remind me how I configured the {} with {} before the {} migration?",
    "Which {} did I say I preferred over the {} when we talked about {}?",
    "Summarise what I told you about my {} plans, the {} budget and the {} deadline.",
    "Did I already mention a problem with the {} or the {} during the {} review?",
]
WORDS = [
    w
    for w, _ in sorted(
        json.loads((ROOT / "memory/assets/minilm/tokenizer.json").read_text())["model"][
            "vocab"
        ].items(),
        key=lambda kv: kv[1],
    )
    if w.isascii() and w.isalpha() and len(w) > 2
]
ZIPF = 1.0 / (np.arange(len(WORDS)) + 10.0)
ZIPF /= ZIPF.sum()


def rss_mb() -> float:
    """Resident memory of this process (psutil is not installed: /proc/self/status)."""
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text())[1]) / 1024


def texts(rng: np.random.Generator, n: int, low: int = 30, high: int = 60) -> list[str]:
    """n synthetic chunks of low..high Zipf-distributed words."""
    lengths = rng.integers(low, high + 1, n)
    idx = rng.choice(len(WORDS), size=int(lengths.sum()), p=ZIPF)
    ends = np.cumsum(lengths)
    return [" ".join(WORDS[i] for i in idx[e - k : e]) for e, k in zip(ends, lengths, strict=True)]


def populate(
    layer: MemoryLayer, user: str, size: int, rng: np.random.Generator, pool: dict[str, Any]
) -> float:
    """Give `user` `size` one-chunk messages (if not there yet); seconds taken. A chunk is
    one of 300 pool texts + 10-20 fresh words, its vector the pool text's embedding + noise
    (random vectors have cosines near 0: moim's weak-hit filter would drop every hit)."""
    started, store, now = time.perf_counter(), layer.store, time.time()
    _ = layer.embedder  # loading it re-creates the vector table if the model changed
    if store.count_unindexed():  # only what this call adds has a pool vector to give
        raise SystemExit(
            "populate: the store holds messages it did not index (built by an older moim with "
            "another embedding model or vector layout, which re-indexes everything, or an "
            "interrupted build); their synthetic vectors are lost: build a fresh store"
        )
    for start in range(layer.stats(user).chunks, size, 2000):
        if not pool:
            pool["texts"] = texts(rng, 300, 25, 40)
            pool["vectors"] = layer.embedder.embed_documents(pool["texts"])
        n, js = min(2000, size - start), rng.integers(300, size=min(2000, size - start))
        extra = texts(rng, n, 10, 20)
        contents = [pool["texts"][j] + " " + more for j, more in zip(js, extra, strict=True)]
        pick = dict(zip(contents, js, strict=True))
        rows = [
            NewMessage(
                f"{user}-{start + i}",
                f"h-{user}-{start + i}",
                ("user", "assistant")[i % 2],
                None,
                content,
                "{}",
                MODEL,
                60,
                False,
                now - 86400 * 365 * (1 - (start + i) / size),
            )
            for i, content in enumerate(contents)
        ]
        for s in range(0, n, 200):  # sessions of 200 messages
            store.add_messages(user, f"s-{user}-{(start + s) // 200}", rows[s : s + 200])
        while batch := store.unindexed_messages(1000):
            vectors = pool["vectors"][[pick.get(m.content, 0) for m in batch]]
            vectors = vectors + rng.normal(0, 0.02, vectors.shape).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            previous = None
            for message, vector in zip(batch, vectors, strict=True):
                # as the writer does: the turn before, in the FTS row's context column
                same = previous is not None and previous.session_id == message.session_id
                context = turn_tail(previous.content, 200) if previous and same else ""
                store.add_chunks(message, [message.content], vector[None, :], context)
                previous = message
            store.commit_lexical()  # as the writer does after each batch
    layer.tidy_index(lambda: False)  # as a running moim's writer does when idle
    return time.perf_counter() - started


def relay_app(base_url: str, transport: str = "httpx") -> Starlette:
    """The floor for any Python proxy: forward the body, stream the bytes back. With
    `transport="aiohttp"` its client sends as moim's does (proxy/aiohttp_transport.py), so
    memory off against it is what moim itself adds."""
    held: dict[str, httpx.AsyncClient] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        sender = (
            AiohttpTransport(ssl_context=httpx.create_ssl_context())
            if transport == "aiohttp"
            else None
        )
        async with httpx.AsyncClient(base_url=base_url, timeout=30, transport=sender) as client:
            held["client"] = client
            yield

    async def chat(request: Request) -> StreamingResponse:
        client = held["client"]
        sent = client.build_request(
            "POST",
            "/chat/completions",
            content=await request.body(),
            headers={"content-type": "application/json"},
        )
        upstream = await client.send(sent, stream=True)
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type"),
            background=BackgroundTask(upstream.aclose),
        )

    return Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"])], lifespan=lifespan
    )


@contextmanager
def litellm_proxy(command: Path | None, upstream_url: str, tmp: Path) -> Iterator[str | None]:
    """The LiteLLM proxy (`command` is its `litellm` script), one worker, in front of the
    same fake upstream; None without a command."""
    if command is None:
        yield None
        return
    config = tmp / "litellm.yaml"
    config.write_text(
        json.dumps(
            {
                "model_list": [
                    {
                        "model_name": MODEL,
                        "litellm_params": {
                            "model": f"openai/{MODEL}",
                            "api_base": upstream_url,
                            "api_key": "sk-bench",
                        },
                    }
                ],
                "litellm_settings": {"telemetry": False},
                # LiteLLM refuses to start open; its key check is part of what it costs.
                "general_settings": {"master_key": PEER_KEY},
            }
        )
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = (tmp / "litellm.log").open("w")
    proc = subprocess.Popen(
        [str(command), "--config", str(config), "--port", str(port), "--num_workers", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False"},
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(root + "/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise RuntimeError(f"the LiteLLM proxy did not start; see {tmp / 'litellm.log'}")
        yield root
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def history(rng: np.random.Generator) -> list[dict[str, str]]:
    """A system prompt and six turns (three exchanges): a fixed conversation, one session."""
    system = (
        "You are a careful assistant for a small engineering team. Answer briefly, cite "
        "earlier decisions when they matter, and say so when you are unsure. "
    )
    return [{"role": "system", "content": system}] + [
        {"role": ("user", "assistant")[i % 2], "content": t.capitalize() + "."}
        for i, t in enumerate(texts(rng, 6, 48, 52))
    ]


def question(rng: random.Random) -> str:
    return rng.choice(TEMPLATES).format(*(rng.choice(WORDS[300:6000]) for _ in range(3)))


def request(client: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> dict:
    """One streamed request: ms to first body byte, to last byte, moim's headers."""
    start, first, tail = time.perf_counter(), None, b""
    with client.stream("POST", url, content=body, headers=headers) as response:
        for chunk in response.iter_raw():
            first = first or time.perf_counter()
            tail = (tail + chunk)[-16:]
        end = time.perf_counter()
    return {
        "ttfb": ((first or end) - start) * 1000,
        "ttlb": (end - start) * 1000,
        "ok": response.status_code == 200 and tail.endswith(b"[DONE]\n\n"),
        "status": response.status_code,
        "overhead": float(response.headers.get("x-memory-overhead-ms", "nan")),
        "chunks": int(response.headers.get("x-memory-chunks-injected", "0")),
        "error": response.headers.get("x-memory-error"),
    }


def pct(values: list[float]) -> dict[str, float]:
    return {f"p{q}": float(np.percentile(values, q)) for q in (50, 95, 99)}


def profile(
    layer: MemoryLayer, user: str, messages: list[dict], rng: random.Random, n: int
) -> dict[str, dict[str, float]]:
    """In-process timings (ms) of recall's steps for `user`, and of `layer.recall` itself.
    On Postgres the searches are the database's (`vector_search: db`), with no RAM matrix."""
    steps: dict[str, list[float]] = {}
    s, store, embedder, index = layer.settings, layer.store, layer.embedder, layer.index
    postgres = s.db_url is not None
    if not postgres:
        all_ids, matrix = store.user_vectors(user)  # for the RAM alternative to store.vectors

    def timed(name: str, fn: Any, *args: Any) -> Any:
        t, out = time.perf_counter(), fn(*args)
        steps.setdefault(name, []).append((time.perf_counter() - t) * 1000)
        return out

    for _ in range(n):
        msgs = messages + [{"role": "user", "content": question(rng)}]
        tokens = timed("count_message_tokens", count_message_tokens, msgs, MODEL)
        query = build_query(msgs)
        lexical = timed(
            "lexical_search (Postgres BM25 postings)"
            if postgres
            else "lexical_search (tantivy once verified)",
            store.lexical_search,
            user,
            search_terms(query),
            s.candidates,
            s.lexical_context_weight,
        )
        vector = timed("embed_query (uncached)", embedder.embed_query, query)
        if postgres:
            dense = timed("dense_search (pgvector)", store.dense_search, user, vector, s.candidates)
        else:
            dense = timed(
                "vector search (codes + rescoring)", index.search, user, vector, s.candidates
            )
        found_ids = {*(i for i, _ in lexical), *(i for i, _ in dense)}
        # What recall reads (memory/recall/retrieval.py): a large user's heads from RAM and
        # the lexical-only cosines from the index; SQLite's rows and vectors beside them.
        chunks = timed("store.chunks (rows read lately: RAM)", store.chunks, user, list(found_ids))
        if not postgres:
            large = 0 < s.chunk_heads_from <= index.count(user)
            timed(
                "store.chunk_heads (recall's path: heads in RAM at 20k chunks+)",
                lambda f=list(found_ids), held=large: store.chunk_heads(user, f, (), held),
            )
        missing = [i for i in chunks if i not in dict(dense)]
        timed("store.vectors (lexical-only, SQLite: not recall's)", store.vectors, user, missing)
        if not postgres:
            timed(
                "index.similarities (lexical-only: recall's path)",
                index.similarities,
                user,
                vector,
                missing,
            )
            timed(
                "cosines in RAM instead",
                lambda m=missing, v=vector: matrix[np.searchsorted(all_ids, m)] @ v,
            )
        msgs[-1]["content"] = question(rng)  # a fresh question: the whole recall, uncached
        found = timed(
            "layer.recall (total)",
            layer.recall,
            RecallRequest(user, "s-bench", MODEL, msgs, tokens, 128_000),
        )
        if found.block is not None:
            text = found.block.text
            timed(
                "inject + json.dumps",
                lambda m=msgs, t=text: json.dumps(
                    {"model": MODEL, "messages": inject_block(m, t, s.placement)}
                ).encode(),
            )
    return {name: pct(values) for name, values in steps.items()}


def postgres_layers(url: str, embedder: Any, tmp: Path) -> dict[str, MemoryLayer]:
    """The Postgres stores of the PG rows, each built on first use and reused after: `url`
    holds u0, u10k and u100k (as --db does), its `_1k` sibling the 1k-chunk user alone, its
    `_empty` sibling nothing. `populate` fills them from the generator and seed a fresh
    SQLite store starts from, so stores built fresh on both hold the same chunks and vectors;
    each is vacuumed and analysed before the run (`bench.harness.vacuum` says why).
    Each layer's local journal (unused: these rows only read) goes to `tmp`."""
    layers, rng, pool = {}, np.random.default_rng(7), {}
    users: tuple[tuple[str, str, dict[str, int]], ...] = (
        ("pg", "", SIZES),
        ("pg small", "_1k", {"u1k": 1000}),
        ("pg empty", "_empty", {}),
    )
    for name, suffix, sizes in users:
        target = ensure_database(sibling_url(url, suffix))
        layer = MemoryLayer(
            Settings(db_url=target, db_path=tmp / f"pg{suffix}.db"),
            embedder_factory=lambda _: embedder,
        )
        for user, size in sizes.items():
            took = populate(layer, user, size, rng, pool)
            print(f"store PG {user}: {layer.stats(user).chunks} chunks ({took:.1f} s)", flush=True)
        print(f"vacuum (analyze) PG{suffix or ' main'}: {vacuum(target):.1f} s", flush=True)
        layers[name] = layer
    return layers


def postgres_about(layer: MemoryLayer) -> dict[str, str]:
    """The server's version and the settings that bound its caching (for the record)."""
    names = ("server_version", "shared_buffers", "work_mem", "effective_cache_size")
    return {name: str(layer.store.read(f"SHOW {name}")[0][0]) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="measured requests per path")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=10, help="SSE events before [DONE]")
    parser.add_argument("--delay-ms", type=float, default=1.0, help="upstream delay per event")
    parser.add_argument(
        "--memory-mode",
        default="read",
        choices=("read", "auto"),
        help="X-Memory-Mode of memory-on rows (auto also stores each turn)",
    )
    parser.add_argument("--profile", type=int, default=30, help="in-process recalls timed")
    parser.add_argument("--db", type=Path, help="reuse/keep the database here (else a temp dir)")
    parser.add_argument("--million", action="store_true", help="add 1M chunks over 1k users")
    parser.add_argument("--million-user", action="store_true", help="add one 1M-chunk user")
    parser.add_argument("--peer-litellm", type=Path, help="the `litellm` command of a venv")
    parser.add_argument("--db-url", help="add PG rows: this Postgres database (built, reused)")
    parser.add_argument("--pgserver", type=Path, help="add PG rows on a local pgserver here")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/overhead.json")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does (proxy/runtime.py)
    np_rng, rng, tmp = np.random.default_rng(7), random.Random(7), Path(tempfile.mkdtemp())
    (db := args.db or tmp / "bench.db").parent.mkdir(parents=True, exist_ok=True)
    git = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "loadavg_start": os.getloadavg(),
        "moim": git,
    }
    command = " ".join([Path(sys.executable).as_posix(), *sys.argv])
    print(f"# moim overhead benchmark\n\ncommand: {command}\nmachine: {machine}")
    rss, build, pool = {"start": rss_mb()}, {}, {}
    layer = MemoryLayer(Settings(db_path=db))
    embedder = layer.embedder
    rss["embedder loaded"] = rss_mb()
    for user, size in SIZES.items():
        build[user] = populate(layer, user, size, np_rng, pool)
        print(f"store {user}: {layer.stats(user).chunks} chunks ({build[user]:.1f} s)", flush=True)
    empty = MemoryLayer(Settings(db_path=tmp / "empty.db"), embedder_factory=lambda _: embedder)
    # A 1k-chunk user alone in its database: the baseline for the same user among 1M chunks.
    small = MemoryLayer(Settings(db_path=tmp / "small.db"), embedder_factory=lambda _: embedder)
    build["u1k"] = populate(small, "u1k", 1000, np_rng, pool)
    big = None
    if args.million:
        big = MemoryLayer(
            Settings(db_path=db.with_name(db.stem + "-1m.db")), embedder_factory=lambda _: embedder
        )
        assert big.embedder is embedder  # creates the vector table
        build["1M"] = sum(populate(big, f"m{u}", 1000, np_rng, pool) for u in range(1000))
        print(f"store 1M: {build['1M']:.0f} s", flush=True)
    whale = None
    if args.million_user:
        whale = MemoryLayer(
            Settings(db_path=db.with_name(db.stem + "-1m-user.db")),
            embedder_factory=lambda _: embedder,
        )
        build["u1m"] = populate(whale, "u1m", 1_000_000, np_rng, pool)
        print(f"store u1m: {whale.stats('u1m').chunks} chunks ({build['u1m']:.0f} s)", flush=True)
    for lay in (layer, small, big, whale):  # a rebuilt lexical index: wait, FTS5 answers meanwhile
        if lay is not None:
            lay.wait_for_lexical_index()
    url = args.db_url or (args.pgserver and pgserver_url(args.pgserver, "moim_bench"))
    pg = postgres_layers(url, embedder, tmp) if url else {}
    if pg:
        machine["postgres"] = postgres_about(pg["pg"])
    base = history(np_rng)
    reply = "".join(f"tok{i:04d} " for i in range(args.chunks - 2))[: 8 * (args.chunks - 2)]
    with ExitStack() as stack:
        upstream = stack.enter_context(serve_upstream())
        relay = stack.enter_context(serve_app(relay_app(upstream.url)))
        relay_aiohttp = stack.enter_context(serve_app(relay_app(upstream.url, "aiohttp")))
        moims = {
            name: stack.enter_context(
                serve_app(
                    build_app(Config(upstream_base_url=upstream.url, memory=lay.settings), lay)
                )
            )
            for name, lay in (
                ("main", layer),
                ("empty", empty),
                ("small", small),
                ("1M", big),
                ("whale", whale),
                *pg.items(),
            )
            if lay
        }
        peer = stack.enter_context(litellm_proxy(args.peer_litellm, upstream.url, tmp))

        def on(user: str, server: str = "main", repeat: bool = False) -> tuple:
            headers = {"x-memory-mode": args.memory_mode, "x-memory-user-id": user}
            return moims[server], headers, repeat

        paths = {  # name: (url root, headers, repeat one question?)
            "direct (upstream)": (upstream.url.removesuffix("/v1"), {}, False),
            "bare relay": (relay, {}, False),
            "bare relay, moim's transport": (relay_aiohttp, {}, False),
            "moim, memory off": (moims["main"], {"x-memory-mode": "off"}, False),
            "moim, 0 chunks, empty DB": on("u0", "empty"),
            "moim, 0 chunks (110k others)": on("u0"),
            "moim, 10k chunks": on("u10k"),
            "moim, 100k chunks": on("u100k"),
            "moim, 100k, repeated question": on("u100k", repeat=True),
        }
        paths["moim, 1k chunks, alone in its DB"] = on("u1k", "small")
        if big is not None:
            paths["moim, 1k chunks of 1M (1k users)"] = on("m0", "1M")
        if whale is not None:
            paths["moim, 1M chunks (one user)"] = on("u1m", "whale")
        if pg:
            paths["moim PG, 0 chunks, empty DB"] = on("u0", "pg empty")
            paths["moim PG, 0 chunks (110k others)"] = on("u0", "pg")
            paths["moim PG, 1k chunks, alone in its DB"] = on("u1k", "pg small")
            paths["moim PG, 10k chunks"] = on("u10k", "pg")
            paths["moim PG, 100k chunks"] = on("u100k", "pg")
        if peer is not None:
            peer_auth = {"authorization": f"Bearer {PEER_KEY}"}
            paths["LiteLLM proxy 1.106.2, no memory"] = (peer, peer_auth, False)
        clients = {name: stack.enter_context(httpx.Client(timeout=60)) for name in paths}
        fixed, samples = question(rng), {name: [] for name in paths}

        def once(name: str) -> dict:
            root, headers, repeat = paths[name]
            messages = base + [{"role": "user", "content": fixed if repeat else question(rng)}]
            body = json.dumps({"model": MODEL, "stream": True, "messages": messages}).encode()
            upstream.script[:] = [{"content": reply, "delay": args.delay_ms / 1000}]
            upstream.requests.clear()
            return request(
                clients[name],
                root + "/v1/chat/completions",
                body,
                {"content-type": "application/json", **headers},
            )

        for name in paths:  # first request per path loads that user's vectors into RAM
            once(name)
            rss[f"after first request: {name}"] = rss_mb()
        order, started = list(paths), time.perf_counter()
        for round_ in range(args.warmup + args.requests):
            if round_ % 20 == 0:
                print(f"round {round_}, {time.perf_counter() - started:.0f} s", flush=True)
            rng.shuffle(order)
            for name in order:
                result = once(name)
                if round_ >= args.warmup:
                    samples[name].append(result)
        elapsed = time.perf_counter() - started
        tokens = count_message_tokens(base + [{"role": "user", "content": fixed}], MODEL)
        steps = profile(layer, "u100k", base, rng, args.profile)
        pg_steps = profile(pg["pg"], "u100k", base, rng, args.profile) if pg else {}
    for lay in pg.values():
        lay.close()
    machine["loadavg_end"] = os.getloadavg()
    results = {}
    for name, rows in samples.items():
        good = [r for r in rows if r["ok"]]
        overheads = [r["overhead"] for r in good if not np.isnan(r["overhead"])]
        results[name] = {
            "n": len(good),
            "failed": len(rows) - len(good),
            "ttfb": pct([r["ttfb"] for r in good]),
            "ttlb": pct([r["ttlb"] for r in good]),
            "header_overhead_ms": pct(overheads) if overheads else None,
            "chunks_injected_mean": float(np.mean([r["chunks"] for r in good])),
            "memory_errors": sorted({r["error"] for r in good if r["error"]}),
        }
    report(results, args, tokens, elapsed, rss, build, steps, pg_steps)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "command": command,
                "machine": machine,
                "client": "raw HTTP, httpx.Client keep-alive",
                "dataset": {
                    "sizes": SIZES,
                    "million": args.million,
                    "request_tokens": tokens,
                    "text": "Zipf over MiniLM vocabulary words, 35-60 per chunk",
                    "vectors": "300 real pool embeddings + noise",
                },
                "options": {k: str(v) for k, v in vars(args).items()},
                "results": results,
                "rss_mb": rss,
                "populate_s": build,
                "recall_steps_ms": steps,
                "recall_steps_ms_postgres": pg_steps,
            },
            indent=2,
        )
    )
    print(f"\nwrote {args.out}")


def report(
    results: dict,
    args: Any,
    tokens: int,
    elapsed: float,
    rss: dict,
    build: dict,
    steps: dict,
    pg_steps: dict,
) -> None:
    print(
        f"\nclient: raw HTTP (httpx.Client, one keep-alive connection per path); "
        f"TTFB = first body byte\nrequest: system + 6 turns + unique question = {tokens} "
        f"tokens; reply: {args.chunks} SSE events + [DONE], {args.delay_ms} ms apart\n"
        f"memory-on rows: X-Memory-Mode: {args.memory_mode}; {args.requests} measured + "
        f"{args.warmup} warm-up requests per path, interleaved; {elapsed:.0f} s"
    )
    direct = results["direct (upstream)"]
    for metric in ("ttfb", "ttlb"):
        print(
            f"\n## {metric.upper()} (ms)\n\n| path | n | p50 | p95 | p99 | +p50 | +p95 | +p99 "
            "| ×p50 | ×p99 |\n|---|---|---|---|---|---|---|---|---|---|"
        )
        for name, r in results.items():
            p, d = r[metric], direct[metric]
            print(
                f"| {name} | {r['n']} | "
                + " | ".join(f"{p[q]:.2f}" for q in p)
                + " | "
                + " | ".join(f"{p[q] - d[q]:+.2f}" for q in p)
                + f" | {p['p50'] / d['p50']:.2f} | {p['p99'] / d['p99']:.2f} |"
            )
    print(
        "\n## moim's own x-memory-overhead-ms (ms) and chunks injected\n\n"
        "| path | p50 | p95 | p99 | chunks | errors |\n|---|---|---|---|---|---|"
    )
    for name, r in results.items():
        if r["header_overhead_ms"]:
            h = r["header_overhead_ms"]
            print(
                f"| {name} | {h['p50']:.2f} | {h['p95']:.2f} | {h['p99']:.2f} | "
                f"{r['chunks_injected_mean']:.1f} | {r['failed']} {r['memory_errors']} |"
            )
    for backend, timings in (("SQLite", steps), ("PostgreSQL", pg_steps)):
        if not timings:
            continue
        print(
            f"\n## recall steps in-process, {backend}, user u100k, {args.profile} unique "
            "questions (ms)\n\n| step | p50 | p95 | p99 |\n|---|---|---|---|"
        )
        for name, p in timings.items():
            print(f"| {name} | {p['p50']:.2f} | {p['p95']:.2f} | {p['p99']:.2f} |")
    print(
        "\n## RSS of this process (MB), store build time (s)\n\n"
        + "\n".join(f"- {name}: {value:.0f} MB" for name, value in rss.items())
        + f"\n- build: {build}"
    )
    d = direct["ttfb"]
    off, bare = results["moim, memory off"]["ttfb"], results["bare relay"]["ttfb"]
    same = results["bare relay, moim's transport"]["ttfb"]
    on = results["moim, 100k chunks"]["ttfb"]
    print(
        f"\n## targets (issue), TTFB\n\n- memory off: p50 ≤ 1.5 ms added and within 0.3 ms "
        f"of the bare relay → {off['p50'] - d['p50']:+.2f} ms added, "
        f"{off['p50'] - bare['p50']:+.2f} ms vs relay (httpx), "
        f"{off['p50'] - same['p50']:+.2f} ms vs the relay on moim's transport\n"
        "- memory on, 100k chunks: p50 ≤ 10 ms, "
        f"p99 ≤ 20 ms added → {on['p50'] - d['p50']:+.2f} / {on['p99'] - d['p99']:+.2f} ms\n"
        + _peer(results)
        + _growth(results)
        + "- note: client, proxy and upstream share this process (one GIL) and every core"
    )


def _peer(results: dict) -> str:
    """Every memory-on row up to 100k chunks against the LiteLLM proxy's (TTFB p50)."""
    peer = results.get("LiteLLM proxy 1.106.2, no memory", {}).get("ttfb", {}).get("p50")
    if peer is None:
        return "- LiteLLM proxy: not measured (--peer-litellm)\n"
    rows = [n for n in results if n.startswith("moim, ") and "1M" not in n and "off" not in n]
    below = [n for n in rows if results[n]["ttfb"]["p50"] < peer]
    return (
        f"- below the LiteLLM proxy's TTFB p50 ({peer:.2f} ms): {len(below)} of {len(rows)} rows\n"
    )


def _growth(results: dict) -> str:
    """The same 1k-chunk user alone in its database and among 1M chunks of others (p50)."""
    alone = results["moim, 1k chunks, alone in its DB"]["ttfb"]["p50"]
    among = results.get("moim, 1k chunks of 1M (1k users)", {}).get("ttfb", {}).get("p50")
    if among is None:
        return ""
    return f"- no growth from others' data: a 1k-chunk user {among - alone:+.2f} ms p50 among 1M\n"


if __name__ == "__main__":
    main()
