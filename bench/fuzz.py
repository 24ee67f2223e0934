"""Fuzz moim at volume: the strategies of tests/e2e/test_fuzz.py, ≥ 10,000 requests.

Runs the fake upstream and a real proxy (real embedding model, temporary SQLite) in this
process, drives every endpoint with Hypothesis-generated bodies, headers and queries (no
shrinking: each example is one request), and prints, per endpoint, how many requests got
which status, every distinct 5xx, the memory-error headers seen, and the store's state
after. Nothing is asserted (STYLE.md 18); the numbers are printed and written as JSON.

    python bench/fuzz.py [--scale 1.0] [--out bench/results/fuzz.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory import FastEmbedder, MemoryLayer, Settings  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from tests.conftest import serve_app  # noqa: E402
from tests.e2e.test_fuzz import (  # noqa: E402
    CHAT_PATHS,
    chat_bodies,
    fact_bodies,
    import_bodies,
    json_values,
    memory_headers,
    search_params,
)
from tests.upstream import serve_upstream  # noqa: E402

# endpoint -> requests at --scale 1 (10,500 in all)
PLAN = {
    "chat: any JSON value": 2000,
    "chat: any bytes": 1500,
    "chat: chat-shaped body + memory headers": 1500,
    "chat: any user in the /u/ path": 500,
    "import: any body": 1500,
    "facts: any body": 1500,
    "search: any query": 1000,
    "reads: any memory headers": 1000,
}


class _Crashes(logging.Handler):
    """Counts the unhandled exceptions the server logs, instead of printing tracebacks."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            self.seen[f"{record.name}: {type(exc).__name__}: {str(exc)[:90]}"] += 1
        else:
            self.seen[f"{record.name}: {record.getMessage()[:100]}"] += 1


def _drive(name, examples, strategy, send, results):
    statuses: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    memory_errors: Counter[str] = Counter()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case):
        try:
            response = send(case)
        except httpx.HTTPError:
            # uvicorn closes the connection after an unhandled exception's 500, and the pool
            # may reuse it once before noticing: send again on a fresh connection
            try:
                response = send(case)
            except httpx.HTTPError as exc:
                statuses["no response"] += 1
                failures[f"no response: {type(exc).__name__}"] += 1
                return
        statuses[str(response.status_code)] += 1
        if response.status_code >= 500:
            failures[f"{response.status_code} {response.text[:120]}"] += 1
        if response.headers.get("x-memory-error"):
            memory_errors[response.headers["x-memory-error"][:80]] += 1

    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    total = sum(statuses.values())
    results[name] = {
        "requests": total,
        "seconds": round(seconds, 1),
        "statuses": dict(sorted(statuses.items())),
        "server_errors": dict(failures.most_common()),
        "memory_errors": dict(memory_errors.most_common()),
    }
    print(
        f"{name:44} {total:6d} requests {seconds:6.1f} s  "
        f"{' '.join(f'{s}:{n}' for s, n in sorted(statuses.items()))}",
        flush=True,
    )
    for failure, count in failures.most_common(10):
        print(f"    5xx x{count}: {failure}", flush=True)
    for error, count in memory_errors.most_common(5):
        print(f"    x-memory-error x{count}: {error}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every count")
    parser.add_argument("--out", type=Path, default=Path("bench/results/fuzz.json"))
    args = parser.parse_args()
    plan = {name: max(1, int(count * args.scale)) for name, count in PLAN.items()}

    crashes = _Crashes()
    logging.getLogger().addHandler(crashes)
    workdir = Path(tempfile.mkdtemp(prefix="moim-fuzz-"))
    memory = Settings(db_path=workdir / "moim.db")
    results: dict[str, dict] = {}
    with serve_upstream() as upstream:
        config = Config(memory=memory, upstream_base_url=upstream.url)
        layer = MemoryLayer(memory, embedder_factory=lambda _: FastEmbedder())
        with (
            serve_app(build_app(config, layer)) as root,
            httpx.Client(base_url=root, timeout=60) as http,
        ):
            print(f"moim fuzz: {sum(plan.values())} requests planned; db {memory.db_path}")
            print(
                f"machine: {platform.platform()}, {os.cpu_count()} CPUs, "
                f"Python {platform.python_version()}\n",
                flush=True,
            )

            def post_json(path):
                return lambda case: http.post(
                    path,
                    content=json.dumps(case).encode(),
                    headers={"content-type": "application/json"},
                )

            _drive(
                "chat: any JSON value",
                plan["chat: any JSON value"],
                st.tuples(json_values, st.sampled_from(CHAT_PATHS)),
                lambda c: post_json(c[1])(c[0]),
                results,
            )
            _drive(
                "chat: any bytes",
                plan["chat: any bytes"],
                st.tuples(st.binary(max_size=500), st.sampled_from(CHAT_PATHS)),
                lambda c: http.post(c[1], content=c[0]),
                results,
            )
            _drive(
                "chat: chat-shaped body + memory headers",
                plan["chat: chat-shaped body + memory headers"],
                st.tuples(chat_bodies, memory_headers, st.sampled_from(CHAT_PATHS)),
                lambda c: http.post(c[2], content=json.dumps(c[0]).encode(), headers=c[1]),
                results,
            )
            _drive(
                "chat: any user in the /u/ path",
                plan["chat: any user in the /u/ path"],
                st.tuples(chat_bodies, st.text(min_size=1, max_size=20)),
                lambda c: http.post(
                    f"/u/{quote(c[1], safe='')}/v1/chat/completions",
                    content=json.dumps(c[0]).encode(),
                ),
                results,
            )
            _drive(
                "import: any body",
                plan["import: any body"],
                st.tuples(import_bodies, memory_headers),
                lambda c: http.post("/v1/memory/import", content=c[0], headers=c[1]),
                results,
            )
            _drive(
                "facts: any body",
                plan["facts: any body"],
                st.tuples(fact_bodies, memory_headers),
                lambda c: http.post("/v1/memory/facts", content=c[0], headers=c[1]),
                results,
            )
            _drive(
                "search: any query",
                plan["search: any query"],
                st.tuples(search_params, memory_headers),
                lambda c: http.get("/v1/memory/search", params=c[0], headers=c[1]),
                results,
            )
            _drive(
                "reads: any memory headers",
                plan["reads: any memory headers"],
                st.tuples(
                    memory_headers,
                    st.sampled_from(
                        ["/v1/memory/stats", "/v1/memory/export", "/v1/memory/facts", "/v1/models"]
                    ),
                ),
                lambda c: http.get(c[1], headers=c[0]),
                results,
            )

            http.post("/v1/memory/flush")
            metrics = http.get("/metrics").text
            health = http.get("/health").status_code
        store = {
            "bytes": memory.db_path.stat().st_size,
            "messages": layer.store.read("SELECT count(*) FROM messages")[0][0],
            "users": layer.store.read("SELECT count(DISTINCT user_id) FROM messages")[0][0],
            "unindexed": layer.store.count_unindexed(),
            "integrity": layer.store.read("PRAGMA integrity_check")[0][0],
        }
    totals: Counter[str] = Counter()
    for result in results.values():
        totals.update(result["statuses"])
    failures = [line for line in metrics.splitlines() if line.startswith("moim_memory_write")]
    summary = {
        "requests": sum(totals.values()),
        "statuses": dict(sorted(totals.items())),
        "logged_errors": dict(crashes.seen.most_common()),
        "health_after": health,
        "write_failures": failures,
        "store": store,
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
        "endpoints": results,
    }
    print(f"\ntotal {summary['requests']} requests: {summary['statuses']}")
    print(f"health after: {health}; {' '.join(failures)}")
    print(f"store: {store}")
    print("errors logged by the server (unhandled exceptions and fail-open recalls):")
    for line, count in crashes.seen.most_common(20):
        print(f"  {count:5d}  {line}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
