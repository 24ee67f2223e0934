"""Fuzz moim at volume: the strategies of tests/e2e/test_fuzz.py, ≥ 10,000 requests.

Runs the fake upstream and two real proxies (real embedding model, temporary SQLite) in
this process: one open, one with proxy keys (`auth.keys`: a key bound to a user, one for two
users, an admin key). Drives every route with Hypothesis-generated bodies, headers, paths
and `Authorization` values (no shrinking: each example is one request), hostile JSON too
(a value nested up to 5,000 deep, or an integer past SQLite's 64 bits, anywhere in a chat,
fact or import body; huge numbers and over-long ids in every path parameter), and prints, per
endpoint, how many requests got which status, every distinct 5xx, the memory-error headers
seen, and each store's state after; the numbers are also written as JSON.

Exits 1 when moim failed (a benchmark asserts nothing, but a fuzz run that finds a bug must
say so to a script): a 5xx moim caused (any 5xx but a provider failure moim relayed, which
carries its `x-memory-mode` header), a request with no response, a 2xx to a request without
a valid proxy key, a proxy unhealthy afterwards, or a store whose integrity check fails.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory import FastEmbedder, MemoryLayer, Settings  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from proxy.serving import uvicorn_options  # noqa: E402
from tests.conftest import serve_app, wait_ready  # noqa: E402
from tests.e2e.test_fuzz import (  # noqa: E402
    CHAT_PATHS,
    FUZZ_KEYS,
    any_route,
    chat_bodies,
    fact_bodies,
    fact_key_requests,
    fact_key_route,
    hostile_chat_bodies,
    hostile_fact_bodies,
    hostile_import_bodies,
    import_bodies,
    json_values,
    keyed_headers,
    memory_headers,
    path_users,
    presents_a_key,
    search_params,
    upkeep_routes,
)
from tests.upstream import serve_upstream  # noqa: E402

# endpoint -> requests at --scale 1 (15,100 in all)
PLAN = {
    "chat: any JSON value": 2000,
    "chat: any bytes": 1500,
    "chat: chat-shaped body + memory headers": 1500,
    "chat: a deep or huge value anywhere": 500,
    "chat: any user in the /u/ path": 500,
    "import: any body": 1500,
    "import: a deep or huge value anywhere": 500,
    "facts: any body": 1500,
    "facts: a deep or huge value anywhere": 500,
    "search: any query": 1000,
    "reads: any memory headers": 1000,
    "facts/{key}: delete, history, pin, unpin": 1000,
    "upkeep: delete, flush, metrics, /u/ models": 600,
    "keys: any route, any Authorization": 800,
    "keys: chat, any Authorization": 700,
}
HOSTILE = {"x-memory-user-id": "hostile"}
ADMIN = {"authorization": f"Bearer {next(k.key for k in FUZZ_KEYS if k.admin)}"}
Send = Callable[[Any], httpx.Response]
Check = Callable[[Any, httpx.Response], str | None]


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


def _moims_fault(response: httpx.Response) -> bool:
    """A 5xx moim caused. A provider failure moim relays or maps (502, 504) is answered on
    purpose and carries `x-memory-mode`, like every chat response moim builds; a crash in moim
    is a bare 500 without it, and the memory API has no provider to blame."""
    return response.status_code >= 500 and "x-memory-mode" not in response.headers


def _drive(name, examples, strategy, send: Send, results, check: Check | None = None):
    statuses: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    relayed: Counter[str] = Counter()
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
        if _moims_fault(response):
            failures[f"{response.status_code} {response.text[:120]}"] += 1
        elif response.status_code >= 500:
            relayed[f"{response.status_code} {response.text[:120]}"] += 1
        problem = check(case, response) if check is not None else None
        if problem is not None:
            failures[problem] += 1
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
        "moim_failures": dict(failures.most_common()),
        "provider_failures_relayed": dict(relayed.most_common()),
        "memory_errors": dict(memory_errors.most_common()),
    }
    print(
        f"{name:44} {total:6d} requests {seconds:6.1f} s  "
        f"{' '.join(f'{s}:{n}' for s, n in sorted(statuses.items()))}",
        flush=True,
    )
    for failure, count in failures.most_common(10):
        print(f"    MOIM FAILED x{count}: {failure}", flush=True)
    for failure, count in relayed.most_common(5):
        print(f"    provider 5xx relayed x{count}: {failure}", flush=True)
    for error, count in memory_errors.most_common(5):
        print(f"    x-memory-error x{count}: {error}", flush=True)


def _unauthenticated_success(case: Any, response: httpx.Response) -> str | None:
    """With proxy keys, a request without a valid one must never succeed (health aside)."""
    headers, path = case[0], case[1]
    if 200 <= response.status_code < 300 and not presents_a_key(headers):
        if not path.startswith("/health"):
            return f"{response.status_code} without a valid key: {path}"
    return None


def _post_json(http: httpx.Client, path: str, value: Any, headers: Any = None) -> Any:
    return http.post(
        path,
        content=json.dumps(value).encode(),
        headers={"content-type": "application/json", **(headers or {})},
    )


def _fuzz_open(http: httpx.Client, plan: dict[str, int], results: dict[str, Any]) -> None:
    """Every route of the proxy without keys."""
    _drive(
        "chat: any JSON value",
        plan["chat: any JSON value"],
        st.tuples(json_values, st.sampled_from(CHAT_PATHS)),
        lambda c: _post_json(http, c[1], c[0]),
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
        "chat: a deep or huge value anywhere",
        plan["chat: a deep or huge value anywhere"],
        st.tuples(hostile_chat_bodies, st.sampled_from(CHAT_PATHS)),
        lambda c: http.post(c[1], content=c[0]),
        results,
    )
    _drive(
        "chat: any user in the /u/ path",
        plan["chat: any user in the /u/ path"],
        st.tuples(chat_bodies, path_users),
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
        "import: a deep or huge value anywhere",
        plan["import: a deep or huge value anywhere"],
        hostile_import_bodies,
        lambda c: http.post("/v1/memory/import", content=c, headers=HOSTILE),
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
        "facts: a deep or huge value anywhere",
        plan["facts: a deep or huge value anywhere"],
        hostile_fact_bodies,
        lambda c: http.post("/v1/memory/facts", content=c, headers=HOSTILE),
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

    def fact_by_key(case: Any) -> httpx.Response:
        (action, key), headers, seed = case
        if seed:  # a fact of that key exists, so pin, unpin, history and delete do their work
            _post_json(http, "/v1/memory/facts", {"key": key, "value": "fuzzed"}, headers)
        return http.request(*fact_key_route(action, key), headers=headers)

    _drive(
        "facts/{key}: delete, history, pin, unpin",
        plan["facts/{key}: delete, history, pin, unpin"],
        st.tuples(fact_key_requests, st.just({}) | memory_headers, st.booleans()),
        fact_by_key,
        results,
    )
    _drive(
        "upkeep: delete, flush, metrics, /u/ models",
        plan["upkeep: delete, flush, metrics, /u/ models"],
        st.tuples(upkeep_routes, memory_headers),
        lambda c: http.request(c[0][0], c[0][1], headers=c[1]),
        results,
    )


def _fuzz_keyed(http: httpx.Client, plan: dict[str, int], results: dict[str, Any]) -> None:
    """The proxy with proxy keys: any route and chat, with any `Authorization`."""
    _drive(
        "keys: any route, any Authorization",
        plan["keys: any route, any Authorization"],
        st.tuples(keyed_headers, any_route).map(lambda c: (c[0], c[1][1], c[1][0])),
        lambda c: http.request(c[2], c[1], headers=c[0]),
        results,
        _unauthenticated_success,
    )
    _drive(
        "keys: chat, any Authorization",
        plan["keys: chat, any Authorization"],
        st.tuples(keyed_headers, st.sampled_from(CHAT_PATHS), chat_bodies),
        lambda c: http.post(c[1], content=json.dumps(c[2]).encode(), headers=c[0]),
        results,
        _unauthenticated_success,
    )


@contextmanager
def _proxy(workdir: Path, upstream_url: str, **fields: Any) -> Iterator[tuple[Any, Any]]:
    """A real proxy with its own database, in this process; yields (client, layer)."""
    memory = Settings(db_path=workdir / "moim.db")
    config = Config(memory=memory, upstream_base_url=upstream_url, **fields)
    layer = MemoryLayer(memory, embedder_factory=lambda _: FastEmbedder())
    with (
        serve_app(build_app(config, layer), **uvicorn_options(config)) as root,
        httpx.Client(base_url=root, timeout=60) as http,
    ):
        wait_ready(root, timeout=120)  # the embedding model is loaded, as in production
        yield http, layer


def _after(http: httpx.Client, layer: Any, headers: dict[str, str]) -> dict[str, Any]:
    """Health, write failures and the store's state once the fuzz is over."""
    http.post("/v1/memory/flush", headers=headers)
    metrics = http.get("/metrics", headers=headers).text
    store = layer.store
    return {
        "health": http.get("/health").status_code,
        "write_failures": [m for m in metrics.splitlines() if m.startswith("moim_memory_write")],
        "bytes": Path(store.path).stat().st_size,
        "messages": store.read("SELECT count(*) FROM messages")[0][0],
        "users": store.read("SELECT count(DISTINCT user_id) FROM messages")[0][0],
        "unindexed": store.count_unindexed(),
        "integrity": store.read("PRAGMA integrity_check")[0][0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every count")
    parser.add_argument("--out", type=Path, default=Path("bench/results/fuzz.json"))
    args = parser.parse_args()
    plan = {name: max(1, int(count * args.scale)) for name, count in PLAN.items()}

    crashes = _Crashes()
    logging.getLogger().addHandler(crashes)
    workdir = Path(tempfile.mkdtemp(prefix="moim-fuzz-"))
    results: dict[str, dict] = {}
    stores: dict[str, dict] = {}
    print(f"moim fuzz: {sum(plan.values())} requests planned; databases in {workdir}")
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}\n",
        flush=True,
    )
    with serve_upstream() as upstream:
        (workdir / "open").mkdir()
        with _proxy(workdir / "open", upstream.url) as (http, layer):
            _fuzz_open(http, plan, results)
            stores["open"] = _after(http, layer, {})
        (workdir / "keys").mkdir()
        with _proxy(
            workdir / "keys", upstream.url, keys=FUZZ_KEYS, upstream_api_key="sk-provider"
        ) as (http, layer):
            _fuzz_keyed(http, plan, results)
            stores["keys"] = _after(http, layer, ADMIN)
    totals: Counter[str] = Counter()
    for result in results.values():
        totals.update(result["statuses"])
    moim_failures = sum(sum(r["moim_failures"].values()) for r in results.values())
    unsound = [
        name
        for name, store in stores.items()
        if store["health"] != 200 or store["integrity"] != "ok"
    ]
    summary = {
        "requests": sum(totals.values()),
        "statuses": dict(sorted(totals.items())),
        "moim_failures": moim_failures,
        "unsound_proxies": unsound,
        "logged_errors": dict(crashes.seen.most_common()),
        "stores": stores,
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
        "endpoints": results,
    }
    print(f"\ntotal {summary['requests']} requests: {summary['statuses']}")
    for name, store in stores.items():
        print(f"{name} proxy after: {store}")
    print("errors logged by the server (unhandled exceptions and fail-open recalls):")
    for line, count in crashes.seen.most_common(20):
        print(f"  {count:5d}  {line}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    print(f"written to {args.out}")
    print(f"moim failures: {moim_failures}; unsound proxies afterwards: {unsound or 'none'}")
    if moim_failures or unsound:
        sys.exit(1)


if __name__ == "__main__":
    main()
