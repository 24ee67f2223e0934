"""moim's HTTP serving stacks side by side: memory off and the bare relay, h11 on asyncio
against httptools on uvloop, in one run.

Run from the repository root (uvloop and httptools importable, e.g. installed):

    /work/venv/bin/python bench/serving_ab.py [--rounds 400] [--warmup 20] [--chunks 10]

One process: the fake upstream (tests/upstream.py, always h11 on asyncio), and for each stack
a ~20-line Starlette relay (bench/overhead.py's) and moim (`uvicorn_options` with that parser,
memory off by `x-memory-mode: off`), each under uvicorn in its own thread and event loop.
The client is raw HTTP over one keep-alive `httpx.Client` per path, the paths in a fresh
random order each round, so all see the same machine. Prints added time to first byte
against the upstream called directly, and moim-off minus the relay per stack; writes
bench/results/serving_ab.json; asserts nothing (STYLE.md 18).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench.overhead import MODEL, history, relay_app, request  # noqa: E402
from memory import MemoryLayer, Settings  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from proxy.serving import Parser, uvicorn_options  # noqa: E402
from tests.conftest import serve_app  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402

STACKS: dict[str, tuple[Parser, str]] = {
    "h11 + asyncio": ("h11", "asyncio"),
    "httptools + uvloop": ("httptools", "uvloop"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=400, help="measured requests per path")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=10, help="SSE events before [DONE]")
    parser.add_argument("--delay-ms", type=float, default=1.0, help="upstream delay per event")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/serving_ab.json")
    args = parser.parse_args()
    rng, tmp = random.Random(7), Path(tempfile.mkdtemp())
    machine = {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    print(f"# moim serving stacks, memory off\n\nmachine: {machine}", flush=True)
    first = MemoryLayer(Settings(db_path=tmp / "h11.db"))
    embedder = first.embedder
    layers = {
        "h11 + asyncio": first,
        "httptools + uvloop": MemoryLayer(
            Settings(db_path=tmp / "httptools.db"), embedder_factory=lambda _: embedder
        ),
    }
    base = history(np.random.default_rng(7))
    reply = "".join(f"tok{i:04d} " for i in range(args.chunks - 2))[: 8 * (args.chunks - 2)]
    with ExitStack() as stack:
        upstream = stack.enter_context(serve_upstream())
        paths: dict[str, tuple[str, dict[str, str]]] = {"direct (upstream)": (upstream.url, {})}
        for stack_name, (http, loop) in STACKS.items():
            relay = serve_app(relay_app(upstream.url), http=http, loop=loop)
            paths[f"bare relay, {stack_name}"] = (stack.enter_context(relay) + "/v1", {})
            config = Config(upstream_base_url=upstream.url, memory=layers[stack_name].settings)
            options = {**uvicorn_options(config, http), "loop": loop}
            moim = serve_app(build_app(config, layers[stack_name]), **options)
            paths[f"moim off, {stack_name}"] = (
                stack.enter_context(moim) + "/v1",
                {"x-memory-mode": "off"},
            )
        clients = {name: stack.enter_context(httpx.Client(timeout=60)) for name in paths}
        samples: dict[str, list[dict[str, Any]]] = {name: [] for name in paths}
        order = list(paths)
        for round_ in range(args.warmup + args.rounds):
            rng.shuffle(order)
            for name in order:
                root, headers = paths[name]
                messages = base + [{"role": "user", "content": f"question {round_}"}]
                body = json.dumps({"model": MODEL, "stream": True, "messages": messages})
                upstream.script[:] = [{"content": reply, "delay": args.delay_ms / 1000}]
                upstream.requests.clear()
                result = request(
                    clients[name],
                    root + "/chat/completions",
                    body.encode(),
                    {"content-type": "application/json", **headers},
                )
                if round_ >= args.warmup and result["ok"]:
                    samples[name].append(result)
    machine["loadavg_end"] = os.getloadavg()
    report(samples, machine, args)


def report(samples: dict[str, list[dict[str, Any]]], machine: dict, args: Any) -> None:
    def p(name: str, key: str, q: float) -> float:
        return float(np.percentile([r[key] for r in samples[name]], q))

    direct = {q: p("direct (upstream)", "ttfb", q) for q in (50, 90)}
    print(f"\n{args.rounds} rounds; machine {machine}\n")
    print("| path | n | TTFB p50 | +p50 | +p90 | moim's own work p50 |\n|---|---|---|---|---|---|")
    results = {}
    for name in samples:
        own = [r["overhead"] for r in samples[name] if not np.isnan(r["overhead"])]
        row = {
            "n": len(samples[name]),
            "ttfb_p50": p(name, "ttfb", 50),
            "added_p50": p(name, "ttfb", 50) - direct[50],
            "added_p90": p(name, "ttfb", 90) - direct[90],
            "own_p50": float(np.median(own)) if own else None,
        }
        results[name] = row
        own_text = f"{row['own_p50']:.2f}" if row["own_p50"] is not None else ""
        print(
            f"| {name} | {row['n']} | {row['ttfb_p50']:.2f} | {row['added_p50']:+.2f} | "
            f"{row['added_p90']:+.2f} | {own_text} |"
        )
    print()
    for stack_name in STACKS:
        off, relay = results[f"moim off, {stack_name}"], results[f"bare relay, {stack_name}"]
        print(
            f"- {stack_name}: memory off minus the bare relay, p50 "
            f"{off['ttfb_p50'] - relay['ttfb_p50']:+.2f} ms"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine, "results": results}, indent=1))


if __name__ == "__main__":
    main()
