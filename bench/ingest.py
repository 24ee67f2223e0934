"""Ingest: how fast turns are stored and indexed, and how soon a reply's turn is searchable.

Run from the repository root:

    /work/venv/bin/python bench/ingest.py [--messages 2000] [--rate 20] [--duration 30]
        [--users 8] [--poll store|http] [--no-subprocess] [--out bench/results/ingest.json]

1. Throughput, in this process: `MemoryLayer.store_only` of chat turns (each turn resends
   its conversation, as clients do, so only the new user message and reply are stored), then
   one `MemoryLayer.index_pending` over every stored message, with the real bundled model
   (time in `embed_documents` measured apart), then `embed_documents` alone at a few batch
   sizes. Text: synthetic chat messages of 50-400 characters (`chat_text`).
2. Lag: the real proxy (`python -m proxy.cli serve`, or in threads with --no-subprocess) in
   front of the fake upstream (tests/upstream.py); open-loop turns at --rate per second, each
   user message carrying a unique marker word, half streamed. A poller thread looks for each
   marker until found: with --poll store (default) through its own read connection to the
   SQLite file (`Store.lexical_search`, the FTS5 row is written in the same transaction as
   the chunk and its vector), with --poll http through `GET /v1/memory/search`. Lag = time
   found - time the client read the response's last byte.
Prints the numbers, writes JSON; asserts nothing (STYLE.md 18). `chat_text`, `serve_proxy`,
`machine` and `rss_mb` are shared with bench/load.py.
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
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402

from bench.harness import (  # noqa: E402
    MODEL,
    SYSTEM,
    ProxyHandle,
    Sampler,
    chat_text,
    conversation_turns,
    cores_text,
    cpu_window,
    fmt,
    machine,
    pct,
    processes,
    serve_proxy,
)
from memory import FastEmbedder, MemoryLayer, Settings, count_tokens  # noqa: E402
from memory.store.fts import search_terms  # noqa: E402
from memory.store.store import Store  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402


class TimedEmbedder:
    """The real model; counts texts and seconds spent in `embed_documents`."""

    def __init__(self, inner: FastEmbedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.seconds, self.texts, self.calls = 0.0, 0, 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)
            self.calls += 1

    def embed_query(self, text: str, owner: str = "") -> np.ndarray:
        return self.inner.embed_query(text)


def throughput(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    rng = random.Random(11)
    turns = conversation_turns(rng, args.messages)
    settings = Settings(db_path=tmp / "throughput.db", embedding_batch_size=args.batch_size)
    model = FastEmbedder(settings.embedding_model, settings.embedding_batch_size)
    timed = TimedEmbedder(model)
    layer = MemoryLayer(settings, embedder_factory=lambda _: timed)
    layer.embedder.embed_documents(["warm up the model"] * 4)
    count_tokens("load the tokenizer (seconds) before timing", MODEL)
    timed.seconds = timed.texts = timed.calls = 0
    window = cpu_window({"benchmark process": None})
    started = time.perf_counter()
    stored = sum(layer.store_only(turn) for turn in turns)
    store_s = time.perf_counter() - started
    started = time.perf_counter()
    indexed = layer.index_pending()
    index_s = time.perf_counter() - started
    cores = window()
    contents = [m["content"] for t in turns for m in (t.messages[-1], t.reply)]
    lengths = [len(c) for c in contents]
    sample, sweep = contents[: args.sweep], {}
    for size in (1, 16, 64):  # another instance of the same model per batch size
        other = model if size == args.batch_size else FastEmbedder(settings.embedding_model, size)
        started = time.perf_counter()
        other.embed_documents(sample)
        sweep[f"batch {size}"] = len(sample) / (time.perf_counter() - started)
        if size == 64:
            started = time.perf_counter()
            other.embed_documents(sorted(sample, key=len))
            sweep["batch 64, sorted by length"] = len(sample) / (time.perf_counter() - started)
    return {
        "turns": len(turns),
        "messages_stored": stored,
        "messages_indexed": indexed,
        "texts_embedded": timed.texts,
        "embed_calls": timed.calls,
        "chars": {"mean": float(np.mean(lengths)), "min": min(lengths), "max": max(lengths)},
        "store_only_s": store_s,
        "store_only_messages_per_s": stored / store_s,
        "store_only_turns_per_s": len(turns) / store_s,
        "index_pending_s": index_s,
        "index_messages_per_s": indexed / index_s,
        "index_embed_s": timed.seconds,
        "index_other_s": index_s - timed.seconds,
        "embed_texts_per_s_by_batch": sweep,
        "sweep_texts": len(sample),
        "db_mb": sum(p.stat().st_size for p in tmp.glob("throughput.db*")) / 2**20,
        "embedding_batch_size": args.batch_size,
        "cpu_cores": cores,
    }


# -- 2. lag from the last byte to searchable ---------------------------------------------------


@dataclass
class Sent:
    marker: str
    user: str
    stream: bool
    end: float
    ok: bool
    overhead_ms: float
    latency_ms: float
    found: float | None = None
    lost: bool = False


def turn_body(history: list[dict], asked: dict, stream: bool) -> bytes:
    messages = [{"role": "system", "content": SYSTEM}, *history, asked]
    return json.dumps({"model": MODEL, "messages": messages, "stream": stream}).encode()


def reply_text(data: bytes, stream: bool) -> str:
    """The assistant's text from a chat completion body or its SSE stream."""
    if not stream:
        return json.loads(data)["choices"][0]["message"]["content"] or ""
    parts = []
    for line in data.decode().splitlines():
        if line.startswith("data: {"):
            choices = json.loads(line[6:]).get("choices") or [{}]
            parts.append(choices[0].get("delta", {}).get("content") or "")
    return "".join(parts)


async def send_turns(
    root: str, args: argparse.Namespace, sent: dict[str, Sent], lock: threading.Lock, salt: str
) -> float:
    """Open loop: request i leaves at i / rate s, whatever the earlier ones are doing."""
    rng, histories = random.Random(5), {u: [] for u in range(args.users)}

    async def one(client: httpx.AsyncClient, i: int) -> None:
        user, marker, stream = i % args.users, f"zq{salt}{i:05d}", i % 2 == 0
        history = histories[user]
        if len(history) >= 2 * args.exchanges:
            history.clear()  # a new conversation, so a new session
        asked = {"role": "user", "content": f"{chat_text(rng, 'user', 50, 200)} Code {marker}."}
        headers = {"content-type": "application/json", "x-memory-user-id": f"lag-{salt}-{user}"}
        start = time.perf_counter()
        async with client.stream(
            "POST",
            "/v1/chat/completions",
            headers=headers,
            content=turn_body(history, asked, stream),
        ) as response:
            data = b"".join([chunk async for chunk in response.aiter_raw()])
            end = time.perf_counter()
        ok = response.status_code == 200 and (not stream or data.endswith(b"[DONE]\n\n"))
        with lock:
            sent[marker] = Sent(
                marker,
                f"lag-{salt}-{user}",
                stream,
                end,
                ok,
                float(response.headers.get("x-memory-overhead-ms", "nan")),
                (end - start) * 1000,
            )
        if ok:
            history += [asked, {"role": "assistant", "content": reply_text(data, stream)}]

    limits = httpx.Limits(max_connections=500, max_keepalive_connections=100)
    async with httpx.AsyncClient(base_url=root, timeout=60, limits=limits) as client:
        tasks, started = [], time.perf_counter()
        for i in range(int(args.rate * args.duration)):
            await asyncio.sleep(max(0.0, started + i / args.rate - time.perf_counter()))
            tasks.append(asyncio.create_task(one(client, i)))
        await asyncio.gather(*tasks)
        return time.perf_counter() - started


def poll(
    handle: ProxyHandle,
    db: Path,
    args: argparse.Namespace,
    sent: dict[str, Sent],
    lock: threading.Lock,
    stop: threading.Event,
) -> None:
    """Look for every outstanding marker until found or `give_up` s after its last byte."""
    store = Store(db) if args.poll == "store" else None
    client = httpx.Client(base_url=handle.root, timeout=10)

    def searchable(s: Sent) -> bool:
        if store is not None:
            return bool(store.lexical_search(s.user, search_terms(s.marker), 1, 1.0))
        found = client.get(
            "/v1/memory/search",
            params={"q": s.marker, "k": 3},
            headers={"x-memory-user-id": s.user},
        ).json()["results"]
        return any(s.marker in hit["text"] for hit in found)

    while True:
        with lock:
            waiting = [s for s in sent.values() if s.ok and s.found is None and not s.lost]
        if stop.is_set() and not waiting:
            break
        for s in waiting:
            if searchable(s):
                s.found = time.perf_counter()
            elif time.perf_counter() - s.end > args.give_up:
                s.lost = True
        time.sleep(args.poll_interval)
    client.close()


def lag(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db, salt = tmp / "lag.db", "".join(random.Random().choices("abcdefghjkmnpqrstuvwxyz", k=3))
    sent: dict[str, Sent] = {}
    lock, stop = threading.Lock(), threading.Event()
    with ExitStack() as stack:
        upstream = stack.enter_context(serve_upstream())
        handle = stack.enter_context(serve_proxy(upstream.url, db, args.subprocess))
        sampler = Sampler(handle, also=upstream.requests.clear)
        poller = threading.Thread(target=poll, args=(handle, db, args, sent, lock, stop))
        sampler.start()
        poller.start()
        window = cpu_window(processes(handle))
        sending_s = asyncio.run(send_turns(handle.root, args, sent, lock, salt))
        cores = window()
        pending_end = sampler.sample()["pending"]
        stop.set()
        poller.join()
        started = time.perf_counter()
        flushed = httpx.post(handle.root + "/v1/memory/flush", timeout=180).json()
        flush_s = time.perf_counter() - started
        sampler.stop.set()
        store = Store(db)
        stats = [store.stats(f"lag-{salt}-{u}") for u in range(args.users)]
    rows = list(sent.values())
    lags = [(s.found - s.end) * 1000 for s in rows if s.found is not None]
    return {
        "proxy": handle.mode,
        "poll": args.poll,
        "requests": len(rows),
        "failed": sum(not s.ok for s in rows),
        "sending_s": sending_s,
        "achieved_rate": len(rows) / sending_s,
        "lag_ms": pct(lags),
        "found": len(lags),
        "never_found_within_s": sum(s.lost for s in rows),
        "latency_ms": pct([s.latency_ms for s in rows]),
        "overhead_header_ms": pct([s.overhead_ms for s in rows if s.overhead_ms == s.overhead_ms]),
        "pending_at_end": pending_end,
        "pending_max": max(r["pending"] for r in sampler.samples),
        "flush_s": flush_s,
        "flush": flushed,
        "cpu_cores_while_sending": cores,
        "rss_mb": pct([r["rss_mb"] for r in sampler.samples], (0, 100)),
        "store": {
            "messages": sum(s.messages for s in stats),
            "chunks": sum(s.chunks for s in stats),
            "sessions": sum(s.sessions for s in stats),
            "db_mb": sum(p.stat().st_size for p in tmp.glob("lag.db*")) / 2**20,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages to store and index")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=Settings().embedding_batch_size,
        help="embedding batch size for index_pending (moim's default)",
    )
    parser.add_argument("--sweep", type=int, default=128, help="texts per batch-size sweep row")
    parser.add_argument("--rate", type=float, default=20.0, help="lag: requests per second")
    parser.add_argument("--duration", type=float, default=30.0, help="lag: seconds of sending")
    parser.add_argument("--users", type=int, default=8, help="lag: users, one conversation each")
    parser.add_argument("--exchanges", type=int, default=6, help="lag: turns per conversation")
    parser.add_argument(
        "--poll",
        choices=("store", "http"),
        default="store",
        help="store: own read connection to the file; http: /v1/memory/search",
    )
    parser.add_argument("--poll-interval", type=float, default=0.005, help="seconds")
    parser.add_argument("--give-up", type=float, default=10.0, help="seconds before 'never found'")
    parser.add_argument(
        "--subprocess",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the proxy as `python -m proxy.cli serve` (else in threads)",
    )
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-lag", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/ingest.json")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does (proxy/runtime.py)
    tmp, about = Path(tempfile.mkdtemp(prefix="moim-ingest-")), machine()
    command = " ".join([Path(sys.executable).as_posix(), *sys.argv])
    print(
        f"# moim ingest benchmark\n\ncommand: {command}\nmachine: {about}\n"
        f"note: {os.cpu_count()} cores shared by the client, the fake upstream and the proxy "
        "(and by whatever else runs on this machine: see loadavg)",
        flush=True,
    )
    result: dict[str, Any] = {}
    if not args.skip_throughput:
        result["throughput"] = throughput(args, tmp)
        report_throughput(result["throughput"])
    if not args.skip_lag:
        result["lag"] = lag(args, tmp)
        report_lag(result["lag"], args)
    about["loadavg_end"] = os.getloadavg()
    print("\n## targets\n")
    if "throughput" in result:
        print(
            f"- indexing ≥ 300 messages/s → "
            f"{result['throughput']['index_messages_per_s']:.0f} messages/s"
        )
    if "lag" in result:
        p95 = result["lag"]["lag_ms"]["p95"]
        print(
            f"- lag p95 < 1 s → {'-' if p95 is None else f'{p95 / 1000:.2f} s'} "
            f"({result['lag']['never_found_within_s']} never found)"
        )
    print(f"- loadavg start {about['loadavg_start']}, end {about['loadavg_end']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "command": command,
                "machine": about,
                "options": {k: str(v) for k, v in vars(args).items()},
                "dataset": "synthetic chat turns (chat_text): user 50-250, assistant 100-400 "
                "characters; "
                "conversations resend their history",
                **result,
            },
            indent=2,
        )
    )
    print(f"\nwrote {args.out}")
    shutil.rmtree(tmp, ignore_errors=True)


def report_throughput(r: dict[str, Any]) -> None:
    print(
        f"\n## 1. throughput, in-process (store: {r['db_mb']:.1f} MB SQLite file)\n\n"
        f"dataset: {r['turns']} turns resending their history, {r['messages_stored']} new "
        f"messages (system prompts included, not embedded), message length mean "
        f"{r['chars']['mean']:.0f} chars ({r['chars']['min']}-{r['chars']['max']}); "
        f"{r['texts_embedded']} texts embedded in {r['embed_calls']} calls, "
        f"embedding batch {r['embedding_batch_size']}\n\n"
        "| step | seconds | per second |\n|---|---|---|\n"
        f"| store_only (turns) | {r['store_only_s']:.2f} | {r['store_only_turns_per_s']:.0f} "
        f"turns, {r['store_only_messages_per_s']:.0f} messages |\n"
        f"| index_pending | {r['index_pending_s']:.2f} | {r['index_messages_per_s']:.0f} "
        f"messages |\n| … of which embed_documents | {r['index_embed_s']:.2f} | "
        f"{r['texts_embedded'] / r['index_embed_s']:.0f} texts |\n| … of which the rest "
        f"(chunking, SQLite, RAM index) | {r['index_other_s']:.2f} | |\n\nCPU over store + "
        f"index (cores): {cores_text(r['cpu_cores'])}\n"
        f"embed_documents alone, {r['sweep_texts']} texts: "
        + ", ".join(f"{k}: {v:.0f} texts/s" for k, v in r["embed_texts_per_s_by_batch"].items()),
        flush=True,
    )


def report_lag(r: dict[str, Any], args: argparse.Namespace) -> None:
    how = (
        "own read connection to the SQLite file (Store.lexical_search on the marker)"
        if r["poll"] == "store"
        else "GET /v1/memory/search?q=<marker>"
    )
    print(
        f"\n## 2. lag from the response's last byte to searchable\n\n"
        f"proxy: {r['proxy']}; client: httpx.AsyncClient, open loop, {args.rate:g} req/s for "
        f"{args.duration:g} s (achieved {r['achieved_rate']:.1f}), {args.users} users, "
        f"conversations of {args.exchanges} turns, half streamed\npoller: {how}, every "
        f"{args.poll_interval * 1000:g} ms\nstore at the end: {r['store']}\n\n"
        f"- requests: {r['requests']}, failed {r['failed']}\n"
        f"- lag (ms): {fmt(r['lag_ms'])}; found {r['found']}, never found within "
        f"{args.give_up:g} s: {r['never_found_within_s']}\n"
        f"- client latency (ms): {fmt(r['latency_ms'])}\n"
        f"- x-memory-overhead-ms: {fmt(r['overhead_header_ms'])}\n"
        f"- writer backlog (turns not yet indexed): max {r['pending_max']:.0f} sampled, "
        f"{r['pending_at_end']:.0f} when sending stopped; flush {r['flush_s'] * 1000:.0f} ms "
        f"{r['flush']}\n"
        f"- CPU while sending (cores): {cores_text(r['cpu_cores_while_sending'])}\n- proxy RSS "
        f"{fmt(r['rss_mb'], unit=' MB')}",
        flush=True,
    )


if __name__ == "__main__":
    main()
