"""Latency moim adds to a coding agent's requests: a long history of tool calls, resent whole.

Run from the repository root:

    /work/venv/bin/python bench/agent_history.py [--sessions 4] [--tokens 130000] [--seed 5]
        [--model gpt-4.1] [--steps] [--against DIR] [--api responses] [--alias]

A coding agent resends its whole history every few seconds: a system prompt of 5-10 kB, a
`tools` list of 20-40 definitions, then turn after turn an assistant tool call (arguments of
0.1-6 kB) and the tool's result (2-20 kB of code, JSON or logs), sometimes a user message.
Each of `--sessions` sessions is built deterministically and replayed from its first request
to about `--tokens` tokens, every request the whole history; each request goes, in a random
order, to the stand-in upstream directly, to moim with memory off (`X-Memory-Mode: off`) and
to moim with memory on (`auto`: recall and store). The stand-in answers each request with the
history's next assistant tool call, so what moim stores is what the agent resends. moim is
`python -m proxy.cli serve` in its own process on a fresh database (bench/harness.py), the
stand-in (tests/upstream.py, TCP_NODELAY) and the client in this one. Requests are grouped by
history size around 20k, 60k and 120k tokens; moim's added time is its TTFB minus the direct
call's in the same group, with its own `x-memory-overhead-ms`. At the end: the writer's
backlog (bench/harness.py's `writer_gauges`) and the seconds it takes to drain. `--steps`
only times, in this process, the steps that read the whole history of the largest request,
the first time its texts are seen and resent (moim's counts and hashes remembered).
`--against DIR` runs a second moim from another build's source tree (`git archive main |
tar -x -C DIR`) on a database of its own, and sends it every request too, in the same random
order ("other, memory off/on"): two builds compared under the same load, request by request.
`--api responses` sends the same histories to `/v1/responses` (the system prompt as
`instructions`, each call and result as `function_call` / `function_call_output` items);
`--alias` names the model to moim by a config alias (`models: agent: {model: MODEL}`, its
context window MODEL's), which moim renames in the body it sends. `--paired FILE...` only
prints, from earlier `--against` runs' `--out` files pooled, each request's time through this
build minus the other's (the median of those differences moves less with the machine's swings
than a difference of p50s).
Prints markdown; asserts nothing (STYLE.md 18).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.harness import machine, serve_proxy, writer_gauges  # noqa: E402
from bench.overhead import MODEL, WORDS, pct, request  # noqa: E402
from memory import Turn, context_window, count_message_tokens  # noqa: E402
from memory.block.tokens import forget_counted_texts  # noqa: E402
from memory.ingest.identity import forget_recent_hashes, message_keys  # noqa: E402
from memory.recall.query import build_query  # noqa: E402
from memory.store.journal import turn_line  # noqa: E402
from proxy import request_json  # noqa: E402
from proxy.exchange import renamed  # noqa: E402
from proxy.responses_body import block_edit, place_block  # noqa: E402
from proxy.tools import NAMES, SCHEMAS, memory_tools_edit  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402

SIZES = (20_000, 60_000, 120_000)
PATHS = ("direct (upstream)", "moim, memory off", "moim, memory on")
OTHER = (
    "other, memory off",
    "other, memory on",
)  # --against  # each group: requests within ±20% of these many tokens
TOOL_NAMES = (
    "read_file write_file edit_file list_dir glob grep run_shell run_tests git_diff git_log "
    "git_status search_code open_url fetch_docs create_dir delete_file move_file lint format "
    "typecheck install_package python_eval view_image todo_write ask_user web_search "
    "read_notebook edit_notebook find_symbol rename_symbol"
).split()
LEVELS = ("DEBUG", "INFO", "INFO", "INFO", "WARNING", "ERROR")
ALIAS = "agent"  # --alias: the name moim is asked for, a config alias of --model


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS[200:5000]) for _ in range(n))


def ident(rng: random.Random) -> str:
    return "_".join(rng.choice(WORDS[300:4000]).lower() for _ in range(rng.randint(1, 3)))


def code(rng: random.Random, size: int) -> str:
    """Python-looking source of about `size` characters."""
    lines: list[str] = []
    while sum(map(len, lines)) < size:
        name, args = ident(rng), ", ".join(ident(rng) for _ in range(rng.randint(0, 3)))
        lines += [f"def {name}({args}) -> dict[str, Any]:", f'    """{words(rng, 12)}."""']
        for _ in range(rng.randint(2, 8)):
            a, b = ident(rng), ident(rng)
            lines.append(
                rng.choice(
                    (
                        f"    {a} = {b}.get({json.dumps(ident(rng))}, {rng.randint(0, 999)})",
                        f"    if {a} is None or len({b}) > {rng.randint(1, 64)}:",
                        f"        raise ValueError(f'{words(rng, 4)}: {{{a}!r}}')",
                        f"    for {a} in sorted({b}, key=len):",
                        f"        {a}.append({b}[{rng.randint(0, 9)}:])",
                        f"    # {words(rng, 8)}",
                    )
                )
            )
        lines += [f"    return {{{json.dumps(ident(rng))}: {ident(rng)}}}", ""]
    return "\n".join(lines)


def json_text(rng: random.Random, size: int) -> str:
    items: list[dict[str, Any]] = []
    while len(json.dumps(items)) < size:
        items.append(
            {
                "id": rng.randint(1, 10**6),
                "name": ident(rng),
                "path": "/".join(ident(rng) for _ in range(3)) + ".py",
                "line": rng.randint(1, 900),
                "ok": rng.random() < 0.8,
                "message": words(rng, rng.randint(3, 12)),
            }
        )
    return json.dumps(items, indent=2)


def log_text(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    while sum(map(len, lines)) < size:
        lines.append(
            f"2026-11-{rng.randint(1, 27):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
            f"{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z {rng.choice(LEVELS)} "
            f"{ident(rng)}.{ident(rng)}: {words(rng, rng.randint(4, 14))} "
            f"(took {rng.randint(1, 900)} ms, id={rng.getrandbits(32):08x})"
        )
    return "\n".join(lines)


def tools(rng: random.Random) -> list[dict[str, Any]]:
    """20-40 function definitions, each with a few typed parameters."""
    chosen = rng.sample(TOOL_NAMES, rng.randint(20, min(30, len(TOOL_NAMES))))
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": words(rng, rng.randint(15, 40)) + ".",
                "parameters": {
                    "type": "object",
                    "properties": {
                        ident(rng): {
                            "type": rng.choice(("string", "integer", "boolean")),
                            "description": words(rng, 8),
                        }
                        for _ in range(rng.randint(1, 5))
                    },
                    "required": [],
                },
            },
        }
        for name in chosen
    ]


def call(rng: random.Random, n: int) -> dict[str, Any]:
    """An assistant tool call: mostly small arguments (a path, a pattern), sometimes an edit."""
    name = rng.choice(TOOL_NAMES)
    if rng.random() < 0.3:
        arguments = {"path": ident(rng) + ".py", "content": code(rng, rng.randint(1000, 6000))}
    else:
        arguments = {"path": "/".join(ident(rng) for _ in range(3)), "query": words(rng, 5)}
    return {
        "id": f"call_{n:04d}_{rng.getrandbits(40):010x}",
        "name": name,
        "arguments": json.dumps(arguments),
    }


def session(rng: random.Random, tokens: int) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """A session's fixed part (system prompt and tools) and its requests' histories, each the
    one before plus the assistant's tool call and its result (sometimes a user message),
    until the history passes `tokens`; the assistant calls are the replies to script."""
    system = {
        "role": "system",
        "content": "\n\n".join(words(rng, 60) + "." for _ in range(rng.randint(12, 22))),
    }
    task = {
        "role": "user",
        "content": f"Please fix the failing test in {ident(rng)}.py: {words(rng, 30)}.",
    }
    history, requests = [system, task], []
    while count_message_tokens(history, MODEL) < tokens:
        requests.append(list(history))
        made = call(rng, len(history))
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": made["id"],
                        "type": "function",
                        "function": {"name": made["name"], "arguments": made["arguments"]},
                    }
                ],
            }
        )
        size = rng.randint(2000, 20000)
        result = rng.choice((code, json_text, log_text))(rng, size)
        history.append({"role": "tool", "tool_call_id": made["id"], "content": result})
        if rng.random() < 0.15:
            history.append({"role": "user", "content": words(rng, rng.randint(8, 40)) + "?"})
    return {"tools": tools(rng)}, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=130_000, help="each session up to")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--model",
        default="gpt-4.1",
        help="the model asked for: its window sets the tier (gpt-4.1's 1M: excerpts at every "
        "size; gpt-4o-mini's 128k has none past 70%%, ~90k tokens)",
    )
    parser.add_argument("--steps", action="store_true", help="only time steps in-process")
    parser.add_argument(
        "--against",
        type=Path,
        help="another build's source tree (git archive main | tar -x -C DIR): its moim gets "
        "every request too, in the same random order, as 'other, memory off/on'",
    )
    parser.add_argument("--api", choices=("chat", "responses"), default="chat")
    parser.add_argument(
        "--paired", type=Path, nargs="+", help="only report these --against runs, pooled"
    )
    parser.add_argument(
        "--alias", action="store_true", help=f"ask moim for {ALIAS!r}, a config alias of --model"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/agent_history.json")
    args = parser.parse_args()
    if args.paired:
        paired([json.loads(path.read_text())["rows"] for path in args.paired])
        return
    rng = random.Random(args.seed)
    built = [session(rng, args.tokens) for _ in range(args.sessions)]
    if args.steps:
        steps(*built[0][0:1], built[0][1][-1])
        return
    command = " ".join([Path(sys.executable).as_posix(), *sys.argv])
    print(
        f"# an agent's history through moim\n\ncommand: {command}\nmodel: {args.model}\n"
        f"api: {args.api}{', through a config alias' if args.alias else ''}\n"
        f"machine: {machine()}"
    )
    path = "/chat/completions" if args.api == "chat" else "/responses"
    asked = ALIAS if args.alias else args.model
    paths = PATHS + (OTHER if args.against else ())
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with serve_upstream() as upstream, tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        config = alias_config(upstream.url, args.model) if args.alias else None
        proxy = stack.enter_context(serve_proxy(upstream.url, Path(tmp) / "moim.db", config=config))
        urls = {paths[0]: upstream.url + path}
        urls |= dict.fromkeys(paths[1:3], proxy.root + "/v1" + path)
        modes = {paths[1]: "off", paths[2]: "auto"}
        if args.against:
            (Path(tmp) / "other").mkdir()
            other = serve_proxy(
                upstream.url, Path(tmp) / "other/moim.db", source=args.against, config=config
            )
            urls |= dict.fromkeys(OTHER, stack.enter_context(other).root + "/v1" + path)
            modes |= {OTHER[0]: "off", OTHER[1]: "auto"}
        clients = {name: httpx.Client(timeout=120) for name in paths}
        for number, (fixed, requests) in enumerate(built):
            for at, history in enumerate(requests):
                tokens = count_message_tokens(history, MODEL)
                reply = history_reply(requests, at)
                bodies = {
                    model: json.dumps(api_body(args.api, model, history, fixed)).encode()
                    for model in {args.model, asked}
                }
                for name in rng.sample(paths, len(paths)):
                    headers = {"content-type": "application/json"}
                    body = bodies[args.model]
                    if name in modes:
                        headers |= {"x-memory-mode": modes[name], "x-memory-user-id": "agent"}
                        body = bodies[asked]
                    upstream.script[:] = [reply]
                    got = request(clients[name], urls[name], body, headers)
                    if args.api == "responses":  # its stream ends with no [DONE]
                        got["ok"] = got["status"] == 200
                    rows.append(
                        {
                            "path": name,
                            "session": number,
                            "tokens": tokens,
                            "bytes": len(body),
                            **got,
                        }
                    )
            print(f"session {number}: {len(requests)} requests", flush=True)
        metrics = httpx.get(proxy.root + "/metrics").text
        backlog, drained = writer_gauges(metrics), time.perf_counter()
        while writer_gauges(httpx.get(proxy.root + "/metrics").text)["pending"] > 0:
            time.sleep(0.2)
        drain_s = time.perf_counter() - drained
    report(rows, backlog, drain_s, time.perf_counter() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=1))
    print(f"\nwrote {args.out}")


def alias_config(upstream_url: str, model: str) -> dict[str, Any]:
    """moim's config sections naming `model` by the alias ALIAS (with `model`'s window)."""
    window = context_window(model, {}, 128_000)
    route = {"model": model, "api_base": upstream_url, "openai_compatible": True}
    return {"models": {ALIAS: route}, "context_windows": {ALIAS: window}}


def api_body(
    api: str, model: str, history: list[dict[str, Any]], fixed: dict[str, Any]
) -> dict[str, Any]:
    """A request of `history`: chat's, or the Responses API's (the system prompt as
    `instructions`, calls and results as items, the tools in its flat shape)."""
    if api == "chat":
        return {"model": model, "stream": True, "messages": history, **fixed}
    items: list[dict[str, Any]] = []
    for message in history[1:]:
        if message["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": message["content"],
                }
            )
        elif message.get("tool_calls"):
            items += [
                {"type": "function_call", "call_id": c["id"], **c["function"]}
                for c in message["tool_calls"]
            ]
        else:
            items.append({"role": message["role"], "content": message["content"]})
    tools = [{"type": "function", **t["function"]} for t in fixed["tools"]]
    return {
        "model": model,
        "stream": True,
        "instructions": history[0]["content"],
        "input": items,
        "tools": tools,
    }


def history_reply(requests: list[list[dict[str, Any]]], at: int) -> dict:
    """The stand-in's answer to request `at`: the assistant tool call that follows its
    history in the session (the last request's: a call of its own)."""
    history = requests[at]
    following = requests[at + 1] if at + 1 < len(requests) else None
    message = (
        following[len(history)]
        if following
        else {
            "tool_calls": [{"id": "call_end", "function": {"name": "read_file", "arguments": "{}"}}]
        }
    )
    made = message["tool_calls"][0]
    return {
        "tool_calls": [
            {
                "id": made["id"],
                "name": made["function"]["name"],
                "arguments": made["function"]["arguments"],
            }
        ],
        "delay": 0.0005,
    }


def steps(fixed: dict[str, Any], history: list[dict[str, Any]]) -> None:
    """Median ms, in this process, of the request path's steps that read the whole history,
    on a session's last request: the first time a text is seen (its count and hash not yet
    remembered) and when the history is resent."""
    body = {"model": MODEL, "stream": True, "messages": history, **fixed}
    raw = json.dumps(body).encode()
    turn = Turn("agent", "s", MODEL, tuple(history), None, time.time())
    _, located = request_json.loads_locating(raw, "messages")
    assert located is not None and located.items is not None
    items = located.items
    block = json.dumps({"role": "system", "content": words(random.Random(1), 400)})
    sent = replace(turn, messages_json=items.array())
    answers = api_body("responses", MODEL, history, fixed)
    answers_raw = json.dumps(answers).encode()
    _, answers_located = request_json.loads_locating(answers_raw, "input")
    assert answers_located is not None
    said = words(random.Random(1), 400)
    timed = {
        "parse the body (request_json.loads)": lambda: request_json.loads(raw),
        "parse it, locating its messages (loads_locating)": lambda: request_json.loads_locating(
            raw, "messages"
        ),
        "count its tokens (count_message_tokens)": lambda: count_message_tokens(history, MODEL),
        "hash its messages (message_keys)": lambda: message_keys(history),
        "recall's query (build_query)": lambda: build_query(history),
        "write the body with a block (json.dumps)": lambda: json.dumps(body, ensure_ascii=False),
        "write a block into its text (Items.with_item)": lambda: items.with_item(
            len(history) - 1, block, False
        ),
        "the journal's line (turn_line)": lambda: turn_line(turn),
        "the journal's line, the messages' text copied (messages_json)": lambda: turn_line(
            replace(sent, messages_json=items.array())
        ),
        "a config alias: the body written again (json.loads + json.dumps)": lambda: json.dumps(
            {**json.loads(raw), "model": ALIAS}
        ),
        "a config alias: the model's value written in (renamed)": lambda: renamed(
            raw, located, body, ALIAS
        ),
        "memory tools: a round's body written again (json.loads + json.dumps)": lambda: json.dumps(
            {**json.loads(raw), "tools": [*fixed["tools"], *SCHEMAS.values()]},
            ensure_ascii=False,
        ),
        "memory tools: moim's tools written into its text (memory_tools_edit)": lambda: (
            located.edited(memory_tools_edit(body, located, NAMES))
        ),
        "Responses: the body written with the block (json.dumps of place_block)": lambda: (
            json.dumps(place_block(answers, said, "before_last_user"), ensure_ascii=False)
        ),
        "Responses: the block written into its text (block_edit)": lambda: answers_located.edited(
            block_edit(answers, answers_located, said, "before_last_user")
        ),
    }
    print(
        f"\nlast request: {len(history)} messages, {count_message_tokens(history, MODEL)} "
        f"tokens, {len(raw) / 1000:.0f} kB\n\n| step | first time | resent |\n|---|---|---|"
    )
    for name, step in timed.items():
        cold, warm = [], []
        for _ in range(5):
            forget_counted_texts(), forget_recent_hashes()
            started = time.perf_counter()
            step()
            cold.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            step()
            warm.append((time.perf_counter() - started) * 1000)
        print(f"| {name} | {sorted(cold)[2]:.2f} | {sorted(warm)[2]:.2f} |")


def report(rows: list[dict[str, Any]], backlog: dict, drain_s: float, elapsed: float) -> None:
    print(
        f"\n{len(rows)} requests in {elapsed:.0f} s; TTFB in ms; groups: history within ±20% "
        "of the size; + = minus the direct call's same percentile, × = ratio of p50s\n\n"
        "| history | path | n | kB | p50 | p95 | +p50 | +p95 | ×p50 | own p50 | own p95 "
        "| errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    for size in SIZES:
        group = [r for r in rows if abs(r["tokens"] - size) <= 0.2 * size]
        direct = pct(
            [r["ttfb"] for r in group if r["path"] == "direct (upstream)"] or [float("nan")]
        )
        for name in PATHS + OTHER:
            mine = [r for r in group if r["path"] == name]
            if not mine:
                continue
            p = pct([r["ttfb"] for r in mine])
            own = pct([r["overhead"] for r in mine])
            errors = sum(1 for r in mine if not r["ok"] or r["error"])
            kb = sum(r["bytes"] for r in mine) / len(mine) / 1000
            print(
                f"| ~{size // 1000}k | {name} | {len(mine)} | {kb:.0f} | {p['p50']:.1f} | "
                f"{p['p95']:.1f} | {p['p50'] - direct['p50']:+.1f} | "
                f"{p['p95'] - direct['p95']:+.1f} | {p['p50'] / direct['p50']:.2f} | "
                f"{own['p50']:.1f} | {own['p95']:.1f} | {errors} |"
            )
    print(
        f"\nwriter at the end: {backlog['pending']:.0f} turns pending, RAM queue peak "
        f"{backlog['queue_peak']:.0f}; drained in {drain_s:.1f} s"
    )


def paired(runs: list[list[dict[str, Any]]]) -> None:
    """`--against` runs pooled, request by request: this build's times and the other's for
    the same request (its session and size, in its run), and the median of the differences."""
    print(
        "| history | memory | n | TTFB p50 other → this | paired p50 (this − other) "
        "| last byte p50 other → this | own p50 other → this |\n|---|---|---|---|---|---|---|"
    )
    for size in SIZES:
        for mode, mine, other in zip(("off", "on"), PATHS[1:], OTHER, strict=True):
            pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
            direct: list[float] = []
            for rows in runs:
                group = [r for r in rows if abs(r["tokens"] - size) <= 0.2 * size]
                this = {(r["session"], r["tokens"]): r for r in group if r["path"] == mine}
                that = {(r["session"], r["tokens"]): r for r in group if r["path"] == other}
                pairs += [(this[k], that[k]) for k in sorted(this.keys() & that.keys())]
                direct += [r["ttfb"] for r in group if r["path"] == PATHS[0]]
            if not pairs:
                continue

            def p50(field: str, side: int, pairs: list[tuple[dict, dict]] = pairs) -> float:
                return pct([pair[side][field] for pair in pairs])["p50"]

            differences = [a["ttfb"] - b["ttfb"] for a, b in pairs]
            label = f"~{size // 1000}k" + (f" (direct {pct(direct)['p50']:.1f})" if direct else "")
            print(
                f"| {label if mode == 'off' else f'~{size // 1000}k'} | {mode} | {len(pairs)} | "
                f"{p50('ttfb', 1):.1f} → {p50('ttfb', 0):.1f} | {pct(differences)['p50']:+.1f} | "
                f"{p50('ttlb', 1):.1f} → {p50('ttlb', 0):.1f} | "
                f"{p50('overhead', 1):.1f} → {p50('overhead', 0):.1f} |"
            )


if __name__ == "__main__":
    main()
