"""Load: concurrent OpenAI SDK clients against the real proxy with memory on, for a while.

Run from the repository root:

    /work/venv/bin/python bench/load.py [--clients 32] [--duration 30] [--turns 4]
        [--stream-share 0.5] [--preload-chunks 100000] [--no-subprocess] [--db PATH]
        [--replicas N --db-url postgresql://… | --pgserver DIR] [--sample-every 1]
        [--scrape-every 5]

The fake upstream (tests/upstream.py, echoing the user's message, 8 characters per SSE
event) runs in a thread of this process; moim runs as `python -m proxy.cli serve` (default:
its GIL is not the client's) or, with --no-subprocess, in a thread here. Each client is an
`openai.AsyncOpenAI` of its own with its own user (`x-memory-user-id`, mode auto), closed
loop: a conversation of --turns exchanges resent in full each request, then a new one;
streamed or not at random. One warm-up request per client is not counted. Every second
(--sample-every) the proxy's RSS, CPU time and minor page faults are sampled, and every five
(--scrape-every) its writer's backlog (turns not yet indexed, stored in SQLite meanwhile),
the most turns its RAM queue has held, and its embedding counters (`/metrics`: each scrape
counts the whole store's rows, ~9 ms of moim's CPU at 100k chunks, counted as moim's work).
At the end: the backlog and the time `POST /v1/memory/flush` takes to work it off.
--preload-chunks N first gives user `preload` N synthetic chunks (bench/overhead.py's
`populate`), and client 0 is that user; with --db the store is kept, and a later run reuses
(or finishes) the preload. --db-url runs --replicas `moim serve` processes on one PostgreSQL
database (each in a directory of its own, as replicas behind a balancer), the clients spread
round-robin over them (no balancer in the bench); --pgserver DIR starts or reuses a local
PostgreSQL with pgvector (the `pgserver` wheel) and uses its database `moim_load`. Sampled,
counted and flushed per replica, summed for the totals; the postgres server's CPU is counted
when it runs here (a Unix socket in its data directory, as pgserver's). After the flush,
every completed turn's user message and reply must be in the store (a count of those
missing).
Prints the numbers, writes bench/results/load.json; asserts nothing (STYLE.md 18).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import openai  # noqa: E402

from bench.harness import (  # noqa: E402
    MODEL,
    SYSTEM,
    Sampler,
    chat_text,
    cores_text,
    cpu_s,
    cpu_window,
    ensure_database,
    fmt,
    machine,
    pct,
    pgserver_url,
    postgres_cpu,
    rss_mb,
    serve_proxy,
    serve_replicas,
    vacuum,
)
from bench.overhead import populate  # noqa: E402
from memory import MemoryLayer, Settings  # noqa: E402
from memory.store.postgres import PgStore  # noqa: E402
from memory.store.store import Store  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402


async def one_request(client: openai.AsyncOpenAI, messages: list[dict], stream: bool) -> dict:
    """One chat completion: timings, moim's headers, the reply's text."""
    start, first = time.perf_counter(), None
    raw = await client.chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, stream=stream
    )
    if stream:
        parts = []
        async for chunk in raw.parse():
            first = first or time.perf_counter()
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
        reply = "".join(parts)
    else:
        reply = raw.parse().choices[0].message.content or ""
    end = time.perf_counter()
    return {
        "start": start,
        "end": end,
        "latency_ms": (end - start) * 1000,
        "ttfb_ms": None if first is None else (first - start) * 1000,
        "stream": stream,
        "overhead_ms": float(raw.headers.get("x-memory-overhead-ms", "nan")),
        "chunks": int(raw.headers.get("x-memory-chunks-injected", "0")),
        "memory_error": raw.headers.get("x-memory-error"),
        "reply": reply,
    }


async def client_loop(
    client: openai.AsyncOpenAI,
    rng: random.Random,
    history: list[dict],
    args: argparse.Namespace,
    until: float,
    rows: list[dict],
    errors: Counter,
    limit: int | None = None,
    replica: int = 0,
) -> None:
    """Closed loop until `until` (or `limit`) requests: conversations of `args.turns`
    exchanges, each request resending the conversation so far. Each row and error names
    the replica the client talks to; a row keeps the user message and the reply, for the
    check that the store holds them."""
    while time.perf_counter() < until and (limit is None or limit > 0):
        limit = None if limit is None else limit - 1
        if len(history) >= 2 * args.turns:
            history.clear()  # a new conversation: a new session
        asked = {"role": "user", "content": chat_text(rng, "user", 50, 250)}
        messages = [{"role": "system", "content": SYSTEM}, *history, asked]
        try:
            row = await one_request(client, messages, rng.random() < args.stream_share)
        except openai.APIStatusError as exc:
            errors[f"HTTP {exc.status_code}: {exc.message}"[:160]] += 1
            errors[replica] += 1
            continue
        except (openai.APIError, httpx.HTTPError) as exc:
            errors[f"{type(exc).__name__}: {exc}"[:160]] += 1
            errors[replica] += 1
            continue
        if not row["reply"]:
            errors["empty reply"] += 1
            errors[replica] += 1
        row |= {"replica": replica, "user": client.default_headers["x-memory-user-id"]}
        row["asked"] = asked["content"]
        rows.append(row)
        history += [asked, {"role": "assistant", "content": row["reply"]}]


async def drive(
    roots: list[str], users: list[str], args: argparse.Namespace, samplers: list[Sampler]
) -> dict[str, Any]:
    """One warm-up request per client (not counted), then all clients for `args.duration`;
    client i talks to replica i mod len(roots)."""
    clients = [
        openai.AsyncOpenAI(
            base_url=roots[n % len(roots)] + "/v1",
            api_key="sk-bench",
            max_retries=0,
            timeout=120,
            default_headers={"x-memory-user-id": user, "x-memory-mode": "auto"},
        )
        for n, user in enumerate(users)
    ]
    seats = [  # client, its generator, its conversation, its replica
        (c, random.Random(1000 + n), [], n % len(roots)) for n, c in enumerate(clients)
    ]
    warm: dict[str, Any] = {"rows": [], "errors": Counter()}
    started = time.perf_counter()
    if args.preload_chunks:  # alone first: its first recall loads its vectors into RAM
        c, r, h, replica = seats[0]
        await client_loop(c, r, h, args, float("inf"), warm["rows"], warm["errors"], 1, replica)
        warm["preload_first_ms"] = (time.perf_counter() - started) * 1000
    await asyncio.gather(
        *(
            client_loop(c, r, h, args, float("inf"), warm["rows"], warm["errors"], 1, replica)
            for c, r, h, replica in seats
            if "preload_first_ms" not in warm or c is not clients[0]
        )
    )
    warm["s"] = time.perf_counter() - started
    warm["rss_mb"] = [sampler.sample()["rss_mb"] for sampler in samplers]
    rows: list[dict] = []
    errors: Counter = Counter()
    first = combined([sampler.sample() for sampler in samplers])
    window, started = cpu_window(watched(samplers, args)), time.perf_counter()
    print(f"warm-up done ({warm['s']:.1f} s); measuring {args.duration:.0f} s", flush=True)
    await asyncio.gather(
        *(
            client_loop(c, r, h, args, started + args.duration, rows, errors, None, replica)
            for c, r, h, replica in seats
        )
    )
    elapsed = time.perf_counter() - started
    cpu = window()
    last = combined([sampler.sample() for sampler in samplers])
    for client in clients:
        await client.close()
    return {
        "rows": rows,
        "errors": errors,
        "elapsed": elapsed,
        "warm": warm,
        "cpu": cpu,
        "window": (first, last),
    }


class ScrapingSampler(Sampler):
    """A `Sampler` that reads `/metrics` only every `scrape_every` seconds in its own loop
    (RSS, CPU and page faults from /proc at each sample, as before; the writer's figures and
    the embedding counters carried from the last scrape), and at every sample taken
    directly (`sample()`: the window's ends and the flush's).

    A scrape counts the whole store's rows (memory/store/sizes.py): ~9 ms of moim's CPU at
    100k chunks, which `sustained` would count as moim's work for the requests. One a
    second made ~0.4 ms a request of "the rest" on a quiet machine and ~1.9 ms when the
    flush took four minutes (docs/performance.md, "Load, seventh pass").
    """

    def __init__(self, handle: Any, every: float, scrape_every: float, also: Any = None) -> None:
        super().__init__(handle, every, also)
        self.scrape_every = scrape_every
        self._scraped_at = float("-inf")

    def sample(self, scrape: bool = True) -> dict[str, float]:
        if scrape or time.perf_counter() - self._scraped_at >= self.scrape_every:
            self._scraped_at = time.perf_counter()
            return super().sample()
        carried = {
            k: v
            for k, v in self.samples[-1].items()
            if k in ("pending", "queue_peak") or "embed" in k
        }
        row = {
            "t": time.perf_counter() - self.started_at,
            "rss_mb": rss_mb(self.handle.pid),
            "cpu_s": cpu_s(self.handle.pid),
            **carried,
            **(self.extra() if self.extra is not None else {}),
        }
        self.samples.append(row)
        return row

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.sample(scrape=False)
            if self.also is not None:
                self.also()


def watched(samplers: list[Sampler], args: argparse.Namespace) -> dict[str, Any]:
    """What `cpu_window` counts: each proxy process, this one, and the postgres server."""
    if samplers[0].handle.pid == os.getpid():
        return {"benchmark process (proxy in threads)": None}
    names = ["proxy"] if len(samplers) == 1 else [f"replica {n}" for n in range(len(samplers))]
    found: dict[str, Any] = dict(zip(names, (s.handle.pid for s in samplers), strict=True))
    found["benchmark process (client, upstream)"] = None
    if args.db_url and (postgres := postgres_cpu(args.db_url)) is not None:
        found["postgres"] = postgres
    return found


def minor_faults(pid: int) -> dict[str, float]:
    """The process's minor page faults so far (Linux; elsewhere nothing): each a fresh page
    the kernel zeroes and maps, ~3 us of CPU on the bench machine, counted in moim's CPU."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return {"minor_faults": float(stat.read().rsplit(")", 1)[1].split()[7])}
    except OSError:
        return {}


def combined(samples: list[dict[str, float]]) -> dict[str, float]:
    """One sample per replica, summed: CPU seconds, queues, embedding counters, RSS."""
    keys = {key for sample in samples for key in sample} - {"t"}
    return {"t": samples[0]["t"], **{k: sum(s.get(k, 0.0) for s in samples) for k in keys}}


def missing_turns(store: Any, rows: list[dict]) -> dict[str, int]:
    """Completed requests whose user message or reply the store does not hold."""
    held: dict[str, set[tuple[str, str]]] = {}
    missing = Counter()
    for row in rows:
        user = row["user"]
        if user not in held:
            held[user] = {(m.role, m.content) for m in store.messages(user)}
        missing["user message"] += ("user", row["asked"]) not in held[user]
        missing["reply"] += ("assistant", row["reply"]) not in held[user]
    return {"completed": len(rows), **missing}


def sustained(
    run: dict[str, Any], drained: dict[str, float], flush_s: float, chunks: int
) -> dict[str, Any]:
    """Requests/s served and remembered, moim's CPU per request split three ways, and the
    ratio to the rate the embedding model alone would allow.

    Counted from the start of the measured window to the end of the flush that follows it,
    so the turns the writer had queued (its backlog, which grows while requests come faster
    than they are indexed) are paid for: sustained = requests / (window + flush). CPU per
    request: the embedding model's own counters (query embedding on the request path,
    document embedding in the writer) and the rest of moim's process CPU, over the same
    span. (The warm-up's turns, one per client, are flushed in the same span and counted as
    work, not as requests.)

    The embedder-bound rate is what moim would serve on the cores it used if its only work
    were the model's: embedding each request's question, and each chunk the request stores
    (`chunks` stored by the load's users, over their requests: ~2, the user's message and
    the reply), at this run's CPU per text of each kind. It counts the texts the workload
    needs, not the ones moim chose to embed: a vector reused rather than embedded again
    raises the sustained rate, not the bound. (This script first computed the bound from the
    texts moim embedded, which made the ratio the embedding's share of moim's CPU: embedding
    less lowered it. That share is still reported.)
    """
    first, _ = run["window"]
    requests = max(len(run["rows"]), 1)
    span = run["elapsed"] + flush_s
    window_growth = (run["window"][1]["pending"] - first["pending"]) / run["elapsed"]

    def spent(key: str) -> float:
        return drained.get(key, 0.0) - first.get(key, 0.0)

    cpu = drained["cpu_s"] - first["cpu_s"]
    query, document = spent("embed_cpu_seconds_query"), spent("embed_cpu_seconds_document")
    texts = {"query": spent("embed_texts_query"), "document": spent("embed_texts_document")}
    per = {
        "query embedding": query / requests,
        "ingest embedding": document / requests,
        "the rest": (cpu - query - document) / requests,
    }
    per_text = {
        "query": query / texts["query"] if texts["query"] else 0.0,
        "document": document / texts["document"] if texts["document"] else 0.0,
    }
    stored = chunks / (requests + len(run["warm"]["rows"]))  # warm-up turns are stored too
    needed = per_text["query"] + stored * per_text["document"]
    faults = spent("minor_faults") / requests if "minor_faults" in drained else None
    if "postgres_cpu_s" in drained:  # the database's own work, beside moim's
        per["postgres server"] = spent("postgres_cpu_s") / requests
    rate = len(run["rows"]) / span
    bound = (cpu / span) / needed if needed > 0 else 0.0
    return {
        "span_s": span,
        "backlog_growth_per_s_in_window": window_growth,
        "sustained_requests_per_s": rate,
        "cpu_ms_per_request": {k: v * 1000 for k, v in per.items()},
        "moim_cores": cpu / span,
        "texts_embedded_per_request": {k: v / requests for k, v in texts.items()},
        "cpu_ms_per_text": {k: v * 1000 for k, v in per_text.items()},
        "chunks_stored_per_request": stored,
        "embedding_share_of_cpu": (query + document) / cpu if cpu else float("nan"),
        "page_faults_per_request": faults,
        "embedder_bound_requests_per_s": bound,
        "ratio_to_embedder_bound": rate / bound if bound else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds measured")
    parser.add_argument("--turns", type=int, default=4, help="exchanges per conversation")
    parser.add_argument("--stream-share", type=float, default=0.5, help="share streamed")
    parser.add_argument(
        "--preload-chunks",
        type=int,
        default=0,
        help="give client 0's user this many synthetic chunks first",
    )
    parser.add_argument(
        "--subprocess",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the proxy as `python -m proxy.cli serve` (else in threads)",
    )
    parser.add_argument("--db", type=Path, help="reuse/keep the database here (else a temp dir)")
    parser.add_argument("--db-url", help="a PostgreSQL database for --replicas moim serve")
    parser.add_argument("--pgserver", type=Path, help="start/reuse a local pgserver here")
    parser.add_argument("--replicas", type=int, default=1, help="moim serve processes (Postgres)")
    parser.add_argument("--preload-user", default="preload", help="the preloaded user's id")
    parser.add_argument(
        "--sample-every",
        type=float,
        default=1.0,
        help="seconds between /metrics scrapes (each counts the whole store's rows)",
    )
    parser.add_argument(
        "--scrape-every",
        type=float,
        default=5.0,
        help="seconds between /metrics scrapes (each counts the whole store's rows: moim's "
        "CPU); the window's ends and the flush are always scraped",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/load.json")
    args = parser.parse_args()
    if args.pgserver and not args.db_url:
        args.db_url = pgserver_url(args.pgserver, "moim_load")
    if args.replicas > 1 and not args.db_url:
        parser.error("--replicas needs --db-url or --pgserver: replicas share a Postgres store")
    if args.db_url and not args.subprocess:
        parser.error("--db-url runs moim serve processes (not --no-subprocess)")
    tmp = Path(tempfile.mkdtemp(prefix="moim-load-"))
    db = args.db or tmp / "load.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    about, command = machine(), " ".join([Path(sys.executable).as_posix(), *sys.argv])
    print(
        f"# moim load benchmark\n\ncommand: {command}\nmachine: {about}\ncaveat: "
        f"{os.cpu_count()} cores shared by the {args.clients} clients, the fake upstream and "
        "the proxy (and by whatever else runs on this machine: see loadavg)",
        flush=True,
    )
    settings = (
        Settings(db_url=ensure_database(args.db_url), db_path=tmp / "preload.db")
        if args.db_url
        else Settings(db_path=db)
    )
    salt = "".join(random.Random().choices("abcdefghjkmnpqrstuvwxyz", k=4))
    users = [f"load-{salt}-{i}" for i in range(args.clients)]
    layer, preload_s = None, 0.0
    if args.preload_chunks:
        layer = MemoryLayer(settings)
        preload = args.preload_user
        preload_s = populate(layer, preload, args.preload_chunks, np.random.default_rng(7), {})
        users[0] = preload
        print(
            f"preloaded user {preload!r}: {layer.stats(preload).chunks} chunks ({preload_s:.0f} s)",
            flush=True,
        )
        layer.wait_for_lexical_index()
        if args.db_url:
            print(f"vacuum (analyze): {vacuum(args.db_url):.1f} s", flush=True)
        if args.subprocess:
            layer.close()  # the proxy process takes the lexical index over
            layer = None  # the proxy process opens the file itself
    with ExitStack() as stack:
        upstream = stack.enter_context(serve_upstream())
        if args.db_url:
            handles = stack.enter_context(
                serve_replicas(upstream.url, args.db_url, args.replicas, tmp)
            )
            for handle in handles:
                handle.mode = f"{args.replicas} × moim serve on one PostgreSQL database"
        else:
            handles = [stack.enter_context(serve_proxy(upstream.url, db, args.subprocess, layer))]
        samplers = [
            ScrapingSampler(
                h, args.sample_every, args.scrape_every, upstream.requests.clear if n == 0 else None
            )
            for n, h in enumerate(handles)
        ]
        if args.subprocess:  # (in threads, the faults would be the benchmark's too)
            for sampler in samplers:
                sampler.extra = lambda pid=sampler.handle.pid: minor_faults(pid)
        postgres = postgres_cpu(args.db_url) if args.db_url else None
        if postgres is not None:  # the database's CPU, with replica 0's samples
            faults = samplers[0].extra or dict
            samplers[0].extra = lambda: {"postgres_cpu_s": postgres(), **faults()}
        idle = [sampler.sample() for sampler in samplers]
        for sampler in samplers:
            sampler.start()
        run = asyncio.run(drive([h.root for h in handles], users, args, samplers))
        pending = combined([sampler.sample() for sampler in samplers])["pending"]
        print(f"window done; flushing {pending:.0f} turns not yet indexed", flush=True)
        flushed, flush_s = flush_all(handles)
        drained = combined([sampler.sample() for sampler in samplers])  # all remembered now
        per_replica = [sampler.samples for sampler in samplers]
        for sampler in samplers:
            sampler.stop.set()
        store = PgStore(args.db_url) if args.db_url else Store(db)
        stats = {u: store.stats(u) for u in users}
        stored = missing_turns(store, run["rows"] + run["warm"]["rows"])
        db_mb = database_mb(store, db)
        if isinstance(store, PgStore):
            store.close()
    about["loadavg_end"] = os.getloadavg()
    leftover = cancel_leftovers(args.db_url) if args.db_url else []
    rows = run["rows"]
    for row in rows + run["warm"]["rows"]:
        row.pop("reply"), row.pop("asked")
    samples = [combined(list(at)) for at in zip(*per_replica, strict=False)]
    result = {
        "proxy": handles[0].mode,
        "replicas": len(handles),
        "clients": args.clients,
        "duration_s": run["elapsed"],
        "requests": len(rows),
        "requests_per_s": len(rows) / run["elapsed"],
        "streamed": sum(r["stream"] for r in rows),
        "errors": {k: v for k, v in run["errors"].items() if isinstance(k, str)},
        "memory_errors": dict(Counter(r["memory_error"] for r in rows if r["memory_error"])),
        "latency_ms": pct([r["latency_ms"] for r in rows]),
        "ttfb_ms_streamed": pct([r["ttfb_ms"] for r in rows if r["ttfb_ms"] is not None]),
        "overhead_header_ms": pct(
            [r["overhead_ms"] for r in rows if r["overhead_ms"] == r["overhead_ms"]]
        ),
        "chunks_injected_mean": float(np.mean([r["chunks"] for r in rows])) if rows else 0.0,
        "cpu_cores": run["cpu"],
        "sustained": sustained(
            run,
            drained,
            flush_s[-1],
            sum(stats[u].chunks for u in users if u != args.preload_user),
        ),
        "rss_idle_mb": sum(s["rss_mb"] for s in idle),
        "rss_after_warmup_mb": sum(run["warm"]["rss_mb"]),
        "rss_mb": {
            "min": min(s["rss_mb"] for s in samples),
            "max": max(s["rss_mb"] for s in samples),
        },
        "per_replica": [
            replica_figures(n, rows, run, idle[n], per_replica[n], flush_s[n], flushed[n])
            for n in range(len(handles))
        ],
        "stored_check": stored,
        "queries_left_running": leftover,
        "samples": samples,
        "pending_at_end": pending,
        "ram_queue_peak": drained["queue_peak"],
        "flush_s": flush_s[-1],
        "flush": {"status": flushed[-1].status_code, **flushed[-1].json()},
        "warmup": {
            "s": run["warm"]["s"],
            "errors": {k: v for k, v in run["warm"]["errors"].items() if isinstance(k, str)},
            "first_latency_ms": pct([r["latency_ms"] for r in run["warm"]["rows"]], (50,)),
            "preload_first_ms": run["warm"].get("preload_first_ms"),
        },
        "store": {
            "preload_chunks": stats[users[0]].chunks if args.preload_chunks else 0,
            "preload_s": preload_s,
            "load_users_messages": sum(stats[u].messages for u in users if u != args.preload_user),
            "load_users_chunks": sum(stats[u].chunks for u in users if u != args.preload_user),
            "db_mb": db_mb,
        },
    }
    report(result, args)
    print(f"- loadavg start {about['loadavg_start']}, end {about['loadavg_end']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "command": command,
                "machine": about,
                "options": {k: str(v) for k, v in vars(args).items()},
                "dataset": "synthetic chat turns (bench/ingest.py chat_text), 50-250 characters "
                "per user "
                "message; replies: the fake upstream's echo",
                **result,
            },
            indent=2,
        )
    )
    print(f"\nwrote {args.out}")
    shutil.rmtree(tmp, ignore_errors=True)


def flush_all(handles: list[Any]) -> tuple[list[httpx.Response], list[float]]:
    """`POST /v1/memory/flush` to each replica in turn (any replica indexes what is left),
    again while one answers 504 (its writer still behind after its 120 s, as on a starved
    machine), for 20 minutes at most; each replica's last answer and when it came."""
    started, flushed, done_at = time.perf_counter(), [], []
    for handle in handles:
        while True:
            answer = httpx.post(handle.root + "/v1/memory/flush", timeout=180)
            if answer.status_code != 504 or time.perf_counter() - started > 1200:
                break
        flushed.append(answer)
        done_at.append(time.perf_counter() - started)
    return flushed, done_at


def replica_figures(
    n: int,
    rows: list[dict],
    run: dict[str, Any],
    idle: dict[str, float],
    samples: list[dict[str, float]],
    flush_s: float,
    flushed: httpx.Response,
) -> dict[str, Any]:
    """One replica's share: requests served, errors, RSS, texts it embedded, its flush."""
    first, last = samples[0], samples[-1]
    return {
        "requests": sum(r["replica"] == n for r in rows),
        "errors": run["errors"].get(n, 0),
        "rss_mb": {
            "idle": idle["rss_mb"],
            "after_warmup": run["warm"]["rss_mb"][n],
            "max": max(s["rss_mb"] for s in samples),
        },
        "cpu_s": last["cpu_s"] - first["cpu_s"],
        "texts_embedded": {
            kind: last.get(f"embed_texts_{kind}", 0.0) - first.get(f"embed_texts_{kind}", 0.0)
            for kind in ("query", "document")
        },
        "flush_done_after_s": flush_s,
        "flush_status": flushed.status_code,
    }


def cancel_leftovers(url: str) -> list[dict[str, Any]]:
    """Statements still running on the database once every replica has stopped: a query a
    timed-out request left behind goes on, holding a core of the database, until it ends.
    Listed (how long, what) and cancelled, so the next run does not share the server with
    them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, extract(epoch FROM now() - query_start), left(query, 120) "
            "FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        for pid, _, _ in rows:
            conn.execute("SELECT pg_cancel_backend(%s)", [pid])
    return [{"running_s": float(s), "query": q} for _, s, q in rows]


def database_mb(store: Any, db: Path) -> float:
    """The store's size on disk: the SQLite files, or the Postgres database."""
    if isinstance(store, PgStore):
        return float(store.read("SELECT pg_database_size(current_database())")[0][0]) / 2**20
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 2**20


def report(r: dict[str, Any], args: argparse.Namespace) -> None:
    s, first = r["store"], r["warmup"]["preload_first_ms"]
    summed = f" (sum of {r['replicas']} replicas)" if r["replicas"] > 1 else ""
    preload_first = "" if first is None else f"; the preload user's first, alone: {first:.0f} ms"
    print(
        f"\nproxy: {r['proxy']}; clients: {args.clients} × openai.AsyncOpenAI, closed loop, "
        f"own user each, mode auto, {args.turns} exchanges per conversation, "
        f"{args.stream_share:.0%} streamed; warm-up {r['warmup']['s']:.1f} s (first requests "
        f"{fmt(r['warmup']['first_latency_ms'])} ms{preload_first}), then "
        f"{r['duration_s']:.1f} s\n"
        f"store: preload user {s['preload_chunks']} chunks; load users at the end "
        f"{s['load_users_messages']} messages, {s['load_users_chunks']} chunks; "
        f"on disk {s['db_mb']:.0f} MB\n\n"
        f"- requests: {r['requests']} ({r['streamed']} streamed), "
        f"{r['requests_per_s']:.1f} req/s\n"
        f"- errors: {sum(r['errors'].values())} {r['errors'] or ''}; memory errors "
        f"(x-memory-error): {r['memory_errors'] or 0}\n"
        f"- client latency (ms): {fmt(r['latency_ms'])}\n"
        f"- client TTFB, streamed (ms): {fmt(r['ttfb_ms_streamed'])}\n"
        f"- x-memory-overhead-ms: {fmt(r['overhead_header_ms'])}; chunks injected mean "
        f"{r['chunks_injected_mean']:.1f}\n"
        f"- CPU (cores busy over the run): {cores_text(r['cpu_cores'])}\n"
        f"- proxy RSS{summed}: idle {r['rss_idle_mb']:.0f} MB, after warm-up "
        f"{r['rss_after_warmup_mb']:.0f} MB, during the run min {r['rss_mb']['min']:.0f} / "
        f"max {r['rss_mb']['max']:.0f} MB\n"
        f"- writer backlog{summed} at the end: {r['pending_at_end']:.0f} turns not yet indexed "
        f"(in SQLite; the RAM queue held at most {r['ram_queue_peak']:.0f}); flush took "
        f"{r['flush_s']:.2f} s {r['flush']}"
    )
    u = r["sustained"]
    split = ", ".join(f"{k} {v:.1f}" for k, v in u["cpu_ms_per_request"].items())
    texts = ", ".join(f"{k} {v:.2f}" for k, v in u["texts_embedded_per_request"].items())
    per_text = ", ".join(f"{k} {v:.1f}" for k, v in u["cpu_ms_per_text"].items())
    faults = u["page_faults_per_request"]
    faulted = "" if faults is None else f"; minor page faults per request {faults:.0f}"
    print(
        f"- sustained: {u['sustained_requests_per_s']:.1f} req/s served and remembered "
        f"(window + flush, {u['span_s']:.0f} s; the writer's backlog grew "
        f"{u['backlog_growth_per_s_in_window']:+.1f} turns/s during the window)\n"
        f"- moim CPU per request (ms): {split}; moim used {u['moim_cores']:.2f} cores; texts "
        f"embedded per request: {texts}; CPU per text (ms): {per_text}; embedding's share "
        f"of moim's CPU {u['embedding_share_of_cpu']:.2f}{faulted}\n"
        f"- embedder-bound rate on those cores (a question and "
        f"{u['chunks_stored_per_request']:.2f} stored chunks a request, at the CPU per text "
        f"above): {u['embedder_bound_requests_per_s']:.1f} req/s; sustained / bound = "
        f"{u['ratio_to_embedder_bound']:.2f} (target ≥ 0.90)"
    )
    if r["replicas"] > 1:
        print(
            "\n| replica | requests | errors | RSS idle / warm / max (MB) | CPU (s) | texts "
            "embedded (query / document) | flush done after (s) |\n|---|---|---|---|---|---|---|"
        )
        for n, x in enumerate(r["per_replica"]):
            rss, texts = x["rss_mb"], x["texts_embedded"]
            print(
                f"| {n} | {x['requests']} | {x['errors']} | {rss['idle']:.0f} / "
                f"{rss['after_warmup']:.0f} / {rss['max']:.0f} | {x['cpu_s']:.1f} | "
                f"{texts['query']:.0f} / {texts['document']:.0f} | "
                f"{x['flush_done_after_s']:.1f} ({x['flush_status']}) |"
            )
    for query in r["queries_left_running"]:
        print(
            f"\n- a query still running on the database after the replicas stopped, for "
            f"{query['running_s']:.0f} s (cancelled): {query['query']}"
        )
    c = r["stored_check"]
    lost = {k: v for k, v in c.items() if k != "completed"}
    print(
        f"\n- stored: of {c['completed']} completed requests (warm-up included), user messages "
        f"missing from the store {lost.get('user message', 0)}, replies missing "
        f"{lost.get('reply', 0)}"
    )
    print("\n| t (s) | RSS (MB) | proxy CPU (s) | not yet indexed |\n|---|---|---|---|")
    picks = sorted({int(i) for i in np.linspace(0, len(r["samples"]) - 1, 10)})
    for row in (r["samples"][i] for i in picks):
        print(
            f"| {row['t']:.0f} | {row['rss_mb']:.0f} | {row['cpu_s']:.1f} | {row['pending']:.0f} |"
        )
    rss = (
        f"{r['rss_mb']['max']:.0f} MB max with {s['preload_chunks']} chunks loaded"
        if s["preload_chunks"]
        else "not measured (run with --preload-chunks 100000)"
    )
    print(
        f"\n## targets\n\n- ≥ 200 req/s from one process with 0 errors → "
        f"{r['requests_per_s']:.1f} req/s, {sum(r['errors'].values())} errors\n"
        f"- RSS ≤ 400 MB at 100k chunks → {rss}\n"
        f"- caveat: {os.cpu_count()} cores for client, upstream and proxy together"
    )


if __name__ == "__main__":
    main()
