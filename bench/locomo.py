"""LoCoMo retrieval through the real proxy: is the evidence inside the injected memory block?

Each conversation is replayed through `/v1/chat/completions` as one user (its sample id), one
moim session per LoCoMo session, mode `write`, `X-Memory-Timestamp` = the session's date;
speaker_a's turns are `user`, speaker_b's `assistant`, each with its `name`, an image turn
with ` [shares a photo: <caption>]`. Each question is then a new conversation (own session,
mode `read`: recall as in `auto`, but stored questions cannot crowd later recalls) and the
block the fake upstream received is scored: hit = some evidence turn is inside, all = every
one is; "120" counts a turn whose first 120 characters are inside (excerpts are cut to
600/400/250). Real proxy under uvicorn, real embedding model, real SQLite file, restarted on
the same file per retriever variant. Misses are explained with `/v1/memory/search`.
Headline: categories 1-4, audited evidence, all ten conversations; also the first five (the
tuning split), the last five, category 5 and the unaudited labels. JSON: bench/results/.

    /work/venv/bin/python bench/locomo.py                # all ten conversations, 3 variants
    /work/venv/bin/python bench/locomo.py --conversations 0 --limit-questions 30
    /work/venv/bin/python bench/locomo.py --retrievers hybrid --speakers text   # "Caroline: …"
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import openai  # noqa: E402
import uvicorn  # noqa: E402

from bench import embedding_server  # noqa: E402
from memory import BLOCK_END, BLOCK_START, Settings  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402

DATA = Path("/work/shared/bench/data/locomo")
RESULTS = ROOT / "bench" / "results"
MODEL = "gpt-4o-mini"
LENIENT, SYSTEM, VARIANTS = 120, "You are a helpful assistant.", ["hybrid", "dense", "lexical"]
EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")
REFERENCE = """Plain RAG reference (this data, offline MiniLM, one turn per chunk, 1,531 questions):
top-5 turns hit: dense 0.41, BM25 0.48, RRF 0.52; top-24 turns (~3,000 chars) hit/all: dense
0.65/0.52, BM25 0.67/0.55, RRF 0.77/0.63. Target at tier 0 (5 x 600): hit >= 0.85, all >= 0.70."""


@dataclass
class Question:
    conv: int
    index: int
    category: int
    text: str
    evidence: list[str]  # valid dia_ids, as labelled
    audited: list[str]  # valid dia_ids after the audit's correction (same when none)
    result: dict[str, Any] = field(default_factory=dict)


@dataclass
class Conversation:
    index: int
    sample_id: str
    sessions: list[tuple[int, str, list[dict[str, Any]]]]  # number, ISO date, messages
    turns: dict[str, str]  # dia_id -> stored text
    questions: list[Question]
    bad_ids: int = 0  # malformed or unknown evidence ids ignored


def norm(text: str) -> str:
    return " ".join(text.split())


def load(selected: list[int], limit: int | None, style: str = "name") -> list[Conversation]:
    """The selected conversations; `style` "name" sends each speaker as the message's `name`,
    "text" writes it into the text instead ("Caroline: …"), as some clients do."""
    samples = json.loads((DATA / "locomo10.json").read_text())
    audit = {}
    for item in json.loads((DATA / "locomo10_audit_errors.json").read_text()):
        _, conv, qa = item["question_id"].split("_")  # locomo_<conv>_qa<0-based index>
        audit[(int(conv), int(qa[2:]))] = item
    return [_conversation(i, samples[i], audit, limit, style) for i in selected]


def _conversation(
    index: int,
    sample: dict[str, Any],
    audit: dict[tuple[int, int], Any],
    limit: int | None,
    style: str = "name",
) -> Conversation:
    conv = sample["conversation"]
    roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    sessions, turns = [], {}
    for n in sorted(int(k[8:]) for k in conv if re.fullmatch(r"session_\d+", k)):
        when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        messages = []
        for turn in conv[f"session_{n}"]:
            caption = turn.get("blip_caption")
            text = turns[turn["dia_id"]] = turn["text"] + (
                f" [shares a photo: {caption}]" if caption else ""
            )
            name = re.sub(r"[^A-Za-z0-9_-]", "_", turn["speaker"])
            if style == "text":
                said = {"content": f"{turn['speaker']}: {text}"}
            else:
                said = {"name": name, "content": text}
            messages.append({"role": roles[turn["speaker"]], **said})
        sessions.append((n, when.isoformat(), messages))
    result = Conversation(index, sample["sample_id"], sessions, turns, [])

    def valid(labels: list[str], count: bool = False) -> list[str]:
        """Known dia_ids in labels such as "D1:3", "D8:6; D9:17" or "D:11:26"."""
        found = [[f"D{a}:{b}" for a, b in EVIDENCE_ID.findall(label)] for label in labels]
        ids = [e for group in found for e in group]
        if count:  # labels with no id in them, and ids the conversation does not have
            result.bad_ids += sum(not g for g in found) + sum(e not in turns for e in ids)
        return [e for e in dict.fromkeys(ids) if e in turns]

    for q, qa in enumerate(sample["qa"][:limit]):
        fix = audit.get((index, q))
        evidence = audited = valid(qa["evidence"], count=True)
        if fix and fix["question"] == qa["question"] and fix.get("correct_evidence"):
            audited = valid(fix["correct_evidence"])
        result.questions.append(
            Question(index, q, qa["category"], qa["question"], evidence, audited)
        )
    return result


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """The app under uvicorn in a thread on a free loopback port (as tests/conftest.py does)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", log_config=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.01)
    if not server.started:
        raise RuntimeError("proxy did not start")
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


def replay(
    client: openai.OpenAI, root: str, upstream: Any, conv: Conversation, dated: bool = True
) -> bool:
    """Replay a conversation unless the database already holds it; True when replayed."""
    if stats(root, conv.sample_id)["messages"] > 0:
        return False
    for number, when, messages in conv.sessions:
        upstream.script.append({"content": ""})  # no synthetic reply is stored
        client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=messages,
            extra_headers={
                "X-Memory-User-Id": conv.sample_id,
                "X-Memory-Mode": "write",
                "X-Memory-Session-Id": f"{conv.sample_id}-s{number}",
                **({"X-Memory-Timestamp": when} if dated else {}),
            },
        )
    return True


def stats(root: str, user: str) -> dict[str, Any]:
    return httpx.get(root + "/v1/memory/stats", headers={"X-Memory-User-Id": user}).json()


def block_of(body: dict[str, Any]) -> str:
    """The block's text, in whichever system message the placement put it."""
    for message in body["messages"]:
        text = message["content"] if isinstance(message.get("content"), str) else ""
        if message["role"] == "system" and BLOCK_START in text:
            return text.split(BLOCK_START, 1)[1].split(BLOCK_END, 1)[0]
    return ""


def ask(client: openai.OpenAI, upstream: Any, conv: Conversation, q: Question) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q.text}],
        extra_headers={
            "X-Memory-User-Id": conv.sample_id,
            "X-Memory-Mode": "read",
            "X-Memory-Session-Id": f"{conv.sample_id}-q{q.index}",
        },
    )
    block = norm(block_of(upstream.last_json))
    inside = {d: norm(conv.turns[d]) in block for d in {*q.evidence, *q.audited}}
    head = {d: norm(conv.turns[d])[:LENIENT] in block for d in {*q.evidence, *q.audited}}
    runs = [
        [" ".join(w[i : i + 6]) for i in range(max(1, len(w) - 5))]  # 6-word runs
        for w in (norm(conv.turns[d]).split() for d in q.audited)
    ]
    part = any(2 * sum(r in block for r in turn) >= len(turn) for turn in runs)
    q.result = {
        "block": bool(block),
        "tokens": int(raw.headers["x-memory-tokens-injected"]),
        "part": part,
        "text": block if not any(map(inside.get, q.audited)) else None,
        "overhead_ms": float(raw.headers["x-memory-overhead-ms"]),
        "tier": int(raw.headers["x-memory-tier"]),
        "inside": inside,
        "head": head,
    }


def explain(root: str, conv: Conversation, q: Question) -> dict[str, Any]:
    """Why the audited evidence missed: abstained, cut (half a turn's 6-word runs are in the
    block, not all), or where /v1/memory/search (same ranking, no cut) puts it in its top 40."""
    # As recall's query: build_query prepends the system prompt to a question under 6 words.
    query = q.text if len(q.text.split()) >= 6 else f"{SYSTEM}\n{q.text}"
    found = httpx.get(
        root + "/v1/memory/search",
        params={"q": query, "k": 40},
        headers={"X-Memory-User-Id": conv.sample_id},
        timeout=600,
    ).json()["results"]
    wanted = [norm(conv.turns[d]) for d in q.audited]
    texts = [norm(hit["text"]) for hit in found]  # a long turn may be split into chunks
    ranks = [
        r for r, t in enumerate(texts, 1) if any(t == w or len(t) > 200 and t in w for w in wanted)
    ]
    best = min(ranks, default=None)
    bucket = next((b for b in (5, 10, 20, 40) if best is not None and best <= b), None)
    reason = (
        "abstained"
        if not q.result["block"]
        else "cut"
        if q.result["part"]
        else f"search rank <= {bucket}"
        if bucket
        else "not in search top 40"
    )
    top = [f"{h['why'] or '-'} sim {h['similarity']}: {norm(h['text'])[:70]}" for h in found[:5]]
    return {"reason": reason, "best_rank": best, "top5": top}


def summary(qs: list[Question], audited: bool) -> dict[str, Any]:
    """n, hit and all, strict and by the first 120 characters, over questions with evidence."""
    ids = [(q, e) for q in qs if (e := q.audited if audited else q.evidence)]
    out: dict[str, Any] = {"n": len(ids)}
    for name, key, every in (
        ("hit", "inside", any),
        ("all", "inside", all),
        ("hit_120", "head", any),
        ("all_120", "head", all),
    ):
        hits = sum(every(q.result[key][d] for d in e) for q, e in ids)
        out[name] = hits / len(ids) if ids else float("nan")
    return out


def pick(qs: list[Question], category: str, convs: range | None = None) -> list[Question]:
    cats = {1, 2, 3, 4} if category == "1-4" else {int(category)}
    return [q for q in qs if q.category in cats and (convs is None or q.conv in convs)]


def table(title: str, rows: dict[str, list[Question]], out: dict[str, Any]) -> None:
    print(f"\n| {title} | evidence | n | hit | all | hit 120 | all 120 |\n" + "|---" * 7 + "|")
    for label, chosen in rows.items():
        for evidence in ("original", "audited") if chosen else ():
            s = out[f"{label} {evidence}"] = summary(chosen, evidence == "audited")
            print(
                f"| {label} | {evidence} | {s['n']} | {s['hit']:.3f} | {s['all']:.3f} | "
                f"{s['hit_120']:.3f} | {s['all_120']:.3f} |"
            )


def report(variant: str, qs: list[Question], seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"splits": {}, "categories": {}}
    print(f"\n### {variant}")
    splits = {"all selected": None, "first five (tuning)": range(5), "last five": range(5, 10)}
    table("split (cat 1-4)", {k: pick(qs, "1-4", v) for k, v in splits.items()}, out["splits"])
    cats = ("1", "2", "3", "4", "1-4", "5")
    table("category (all selected)", {c: pick(qs, c) for c in cats}, out["categories"])
    lat = [q.result["overhead_ms"] for q in qs]
    out.update(
        questions=len(qs),
        wall_seconds=round(seconds, 1),
        mean_tokens=sum(q.result["tokens"] for q in qs) / len(qs),
        no_block=sum(not q.result["block"] for q in qs) / len(qs),
        tiers=dict(Counter(q.result["tier"] for q in qs)),
        overhead_ms_p50=float(np.percentile(lat, 50)),
        overhead_ms_p95=float(np.percentile(lat, 95)),
    )
    print(
        f"\nquestions {len(qs)} ({seconds:.0f} s), mean injected tokens {out['mean_tokens']:.0f}"
        f", no block {out['no_block']:.3f}, tiers {out['tiers']}, recall overhead (ms) p50 "
        f"{out['overhead_ms_p50']:.1f} / p95 {out['overhead_ms_p95']:.1f}"
    )
    return out


def run_variant(
    variant: str,
    args: argparse.Namespace,
    convs: list[Conversation],
    upstream: Any,
    db: Path,
    embedder: Any = None,
) -> dict[str, Any]:
    """Start the proxy on `db` with this retriever, replay what is missing, ask, explain misses."""
    settings = replace(
        Settings(db_path=db, db_url=args.db_url),
        retrievers=variant,
        lexical_index=args.lexical_index,
    )
    if args.min_similarity is not None:
        settings = replace(settings, min_similarity=args.min_similarity)
    if args.set:
        from bench.tune_recall import parse_sets  # it imports this module

        settings = replace(settings, **parse_sets(args.set))
    started = time.perf_counter()
    config = Config(upstream_base_url=upstream.url, memory=settings, embedder=embedder)
    with serve(build_app(config)) as root:
        client = openai.OpenAI(
            base_url=root + "/v1", api_key="sk-bench", max_retries=0, timeout=300
        )
        replayed = [
            c.sample_id for c in convs if replay(client, root, upstream, c, not args.no_timestamps)
        ]
        while httpx.post(root + "/v1/memory/flush", timeout=180).status_code != 200:
            pass  # 504: still indexing after 120 s; wait again
        replay_seconds = time.perf_counter() - started
        store = {c.sample_id: stats(root, c.sample_id) for c in convs}
        sizes = ", ".join(
            f"{u} {s['messages']}/{s['chunks']}/{s['facts']}" for u, s in store.items()
        )
        print(
            f"\n[{variant}] replayed {len(replayed)} conversations in {replay_seconds:.0f} s;"
            f" store (messages/chunks/facts): {sizes}"
        )
        upstream.script.clear()
        asked = time.perf_counter()
        qs = [(c, q) for c in convs for q in c.questions if q.audited or q.evidence]
        for conv, q in qs:
            ask(client, upstream, conv, q)
        seconds = time.perf_counter() - asked
        misses = [(c, q) for c, q in qs if q.audited and q.result["text"] is not None]
        for conv, q in misses:
            q.result["miss"] = explain(root, conv, q)
    out = report(variant, [q for _, q in qs], seconds)
    show_misses(misses, args.examples)
    out.update(
        variant=variant,
        replay_seconds=round(replay_seconds, 1),
        store=store,
        settings={
            "retrievers": variant,
            "min_similarity": settings.min_similarity,
            "lexical_index": settings.lexical_index,
        },
        per_question=[
            {
                "conv": q.conv,
                "qa": q.index,
                "category": q.category,
                "evidence": q.evidence,
                "audited": q.audited,
                **q.result,
            }
            for _, q in qs
        ],
    )
    return out


def show_misses(misses: list[tuple[Conversation, Question]], examples: int) -> None:
    reasons = Counter(q.result["miss"]["reason"] for _, q in misses if q.category != 5)
    print(f"misses (cat 1-4, audited evidence) by reason: {dict(reasons.most_common())}")
    for conv, q in [(c, q) for c, q in misses if c.index < 5 and q.category != 5][:examples]:
        m, said = q.result["miss"], " | ".join(norm(conv.turns[d])[:150] for d in q.audited)
        print(
            f"\n- {conv.sample_id} q{q.index} cat {q.category}: {q.text}\n  evidence "
            f"{q.audited}: {said}\n  -> {m['reason']} (best search rank {m['best_rank']});"
            " top 5:\n    " + "\n    ".join(m["top5"])
        )


def parse_range(text: str) -> list[int]:
    parts = [part.partition("-") for part in text.split(",")]
    return sorted({i for a, _, b in parts for i in range(int(a), int(b or a) + 1)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--retrievers", default="all", choices=[*VARIANTS, "all"])
    parser.add_argument("--conversations", default="0-9", help="e.g. 0-9, 0-4 or 0,3,7")
    parser.add_argument("--limit-questions", type=int, help="first N questions per conversation")
    parser.add_argument("--min-similarity", type=float, help="override Settings.min_similarity")
    parser.add_argument("--set", action="append", default=[], help="Settings name=value")
    parser.add_argument("--db", type=Path, help="database to reuse (replay skipped when present)")
    parser.add_argument(
        "--db-url",
        help="a postgresql:// store instead of SQLite (replay skipped when it holds one)",
    )
    parser.add_argument(
        "--lexical-index", default="tantivy", choices=("tantivy", "fts5"), help="BM25 engine"
    )
    parser.add_argument("--examples", type=int, default=10, help="misses to print (first five)")
    parser.add_argument(
        "--speakers",
        default="name",
        choices=["name", "text"],
        help="speaker as the `name` field, or written into the text (Caroline: …)",
    )
    parser.add_argument("--no-timestamps", action="store_true", help="no X-Memory-Timestamp")
    embedding_server.add_arguments(parser)
    args = parser.parse_args()
    convs = load(parse_range(args.conversations), args.limit_questions, args.speakers)
    variants = VARIANTS if args.retrievers == "all" else [args.retrievers]
    qs = [q for c in convs for q in c.questions]
    turns, cats = sum(len(c.turns) for c in convs), dict(Counter(q.category for q in qs))
    print(
        f"dataset: LoCoMo locomo10.json {[c.sample_id for c in convs]}, {turns} turns, "
        f"{len(qs)} questions by category {dict(sorted(cats.items()))}; "
        f"{sum(c.bad_ids for c in convs)} malformed/unknown evidence ids ignored; "
        f"{sum(not q.evidence for q in qs)} questions without valid evidence "
        f"({sum(not q.audited for q in qs)} after locomo10_audit_errors.json corrections)"
    )
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, embedding "
        f"{Settings().embedding_model if args.embedder == 'bundled' else args.embedder}"
    )
    print(REFERENCE)
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_upstream() as upstream,
        embedding_server.chosen_embedder(args.embedder) as embedder,
    ):
        db = args.db or Path(tmp) / "locomo.db"
        started = time.perf_counter()
        for variant in variants:
            results[variant] = run_variant(variant, args, convs, upstream, db, embedder)
            style = "" if args.speakers == "name" else f"-{args.speakers}"
            style += "-undated" if args.no_timestamps else ""
            style += "" if args.embedder == "bundled" else f"-{args.embedder}"
            (RESULTS / f"locomo-{variant}{style}.json").write_text(json.dumps(results[variant]))
    print(
        "\n| variant | hit (1-4, audited, all) | all | hit 120 | all 120 | tokens | no block "
        "| p50 ms | p95 ms |\n|---|---|---|---|---|---|---|---|---|"
    )
    for variant, out in results.items():
        s = out["splits"]["all selected audited"]
        print(
            f"| {variant} | {s['hit']:.3f} | {s['all']:.3f} | {s['hit_120']:.3f} | "
            f"{s['all_120']:.3f} | {out['mean_tokens']:.0f} | {out['no_block']:.3f} | "
            f"{out['overhead_ms_p50']:.1f} | {out['overhead_ms_p95']:.1f} |"
        )
    print(f"\ntotal wall time {time.perf_counter() - started:.0f} s; JSON in {RESULTS}")


if __name__ == "__main__":
    main()
