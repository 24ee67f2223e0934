"""moim's own memory suite: knowledge updates, abstention, paraphrase, time, preferences.

Twenty personas (bench/memsuite/personas_*.txt, written for moim: health, work, travel,
family, hobbies, finance, tech) each hold a multi-session history and ten questions. Personas
marked `tune` are the tuning half, `held` the held-out half; report both, tune on one.

Each persona is its own user. Its sessions are replayed through the real proxy turn by turn,
as a chat client does (the whole history so far plus the new user turn, mode `auto`, the
fake upstream scripted to answer with the persona's assistant turn), each session its own
`X-Memory-Session-Id`, each turn dated with `X-Memory-Timestamp` (the session's date; off
with `--no-timestamps`, when everything is stored within seconds). Each question is then a
new conversation (a system prompt and the question, mode `read`) and the block the upstream
received is scored, whitespace and case normalised:

- para / temporal / pref: the expected phrase is in the block;
- update: the current phrase is in the block, and before the superseded phrase if that is
  in the block too;
- abstain (never discussed, on a familiar topic): the block has no `[Relevant past context]`.

    PYTHONPATH=. /work/venv/bin/python bench/memsuite.py                 # replay and ask
    PYTHONPATH=. /work/venv/bin/python bench/memsuite.py --db /tmp/m.db  # reuse a replay

Data format: `### <persona> <tune|held>`, `@ <YYYY-MM-DD>` opens a session, `U:` / `A:` are
turns, `Q <category> | <question> | <expected> | <superseded or ->` are questions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402

from bench.locomo import block_of, serve  # noqa: E402
from memory import Settings  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402

DATA = ROOT / "bench" / "memsuite"
RESULTS = ROOT / "bench" / "results"
MODEL, SYSTEM = "gpt-4o-mini", "You are a helpful assistant."
PAST_CONTEXT = "[relevant past context]"
CATEGORIES = ("update", "abstain", "para", "temporal", "pref")


@dataclass
class Case:
    persona: str
    split: str
    category: str
    question: str
    expected: str | None
    stale: str | None
    result: dict[str, Any] = field(default_factory=dict)


@dataclass
class Persona:
    name: str
    split: str
    sessions: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)


def norm(text: str) -> str:
    return " ".join(text.split()).lower()


def load(paths: list[Path]) -> list[Persona]:
    personas: list[Persona] = []
    for path in paths:
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("# "):
                continue
            if line.startswith("### "):
                name, split = line[4:].split()
                personas.append(Persona(name, split))
            elif line.startswith("@ "):
                personas[-1].sessions.append((line[2:].strip(), []))
            elif line[:3] in ("U: ", "A: "):
                role = "user" if line[0] == "U" else "assistant"
                personas[-1].sessions[-1][1].append((role, line[3:]))
            elif line.startswith("Q "):
                parts = [p.strip() for p in line[2:].split("|")]
                category, question = parts[0], parts[1]
                expected = parts[2] if len(parts) > 2 else None
                stale = parts[3] if len(parts) > 3 and parts[3] != "-" else None
                p = personas[-1]
                p.cases.append(Case(p.name, p.split, category, question, expected, stale))
            else:
                raise ValueError(f"{path}: cannot read {line!r}")
    for p in personas:
        _check(p)
    return personas


def _check(persona: Persona) -> None:
    """Every expected phrase is said in the history; an update's two phrases in one turn each."""
    turns = [norm(text) for _, session in persona.sessions for _, text in session]
    for case in persona.cases:
        assert case.category in CATEGORIES, case
        for phrase in (case.expected, case.stale):
            if phrase is not None and case.category != "abstain":
                found = sum(norm(phrase) in t for t in turns)
                ok = found == 1 if case.category == "update" else found >= 1
                assert ok, f"{persona.name}: {phrase!r} is in {found} turns"


def replay(client: openai.OpenAI, upstream: Any, persona: Persona, dated: bool) -> None:
    for number, (day, turns) in enumerate(persona.sessions, start=1):
        history: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
        pairs = [(turns[i][1], turns[i + 1][1]) for i in range(0, len(turns) - 1, 2)]
        for minute, (said, reply) in enumerate(pairs):
            history.append({"role": "user", "content": said})
            upstream.script.append({"content": reply})
            headers = {
                "X-Memory-User-Id": persona.name,
                "X-Memory-Session-Id": f"{persona.name}-s{number}",
            }
            if dated:
                headers["X-Memory-Timestamp"] = f"{day}T10:{minute:02d}:00"
            client.chat.completions.create(model=MODEL, messages=history, extra_headers=headers)
            history.append({"role": "assistant", "content": reply})


def ask(client: openai.OpenAI, upstream: Any, number: int, case: Case) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": case.question},
        ],
        extra_headers={
            "X-Memory-User-Id": case.persona,
            "X-Memory-Mode": "read",
            "X-Memory-Session-Id": f"{case.persona}-q{number}",
        },
    )
    block = norm(block_of(upstream.last_json))
    excerpts = PAST_CONTEXT in block
    if case.category == "abstain":
        passed = not excerpts
    else:
        at = block.find(norm(case.expected or ""))
        stale_at = block.find(norm(case.stale)) if case.stale else -1
        passed = at >= 0 and (stale_at < 0 or at < stale_at)
        case.result["stale_in_block"] = stale_at >= 0
    case.result.update(
        passed=passed,
        excerpts=excerpts,
        chunks=int(raw.headers["x-memory-chunks-injected"]),
        overhead_ms=float(raw.headers["x-memory-overhead-ms"]),
        block=block,
    )


def report(cases: list[Case]) -> dict[str, Any]:
    table: dict[str, Any] = defaultdict(dict)
    print("\n| category | tuning | held out | all |\n|---|---|---|---|")
    for category in (*CATEGORIES, "all"):
        row = []
        for split in ("tune", "held", None):
            chosen = [
                c
                for c in cases
                if (category == "all" or c.category == category) and split in (None, c.split)
            ]
            score = sum(c.result["passed"] for c in chosen) / len(chosen) if chosen else 0.0
            table[category][split or "all"] = {"n": len(chosen), "score": score}
            row.append(f"{score:.2f} ({len(chosen)})")
        print(f"| {category} | " + " | ".join(row) + " |")
    answered = [c for c in cases if c.category != "abstain"]
    kept = sum(c.result["excerpts"] for c in answered) / len(answered)
    print(f"\nquestions with an answer that got excerpts: {kept:.2f}")
    return dict(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, help="database to reuse (replay skipped when present)")
    parser.add_argument("--no-timestamps", action="store_true", help="replay without dates")
    parser.add_argument("--show", choices=[*CATEGORIES, "none"], default="none")
    parser.add_argument("--split", choices=["tune", "held", "all"], default="all")
    parser.add_argument("--set", action="append", default=[], help="Settings name=value")
    args = parser.parse_args()
    personas = load(sorted(DATA.glob("personas_*.txt")))
    cases = [c for p in personas for c in p.cases if args.split in ("all", c.split)]
    print(
        f"dataset: {len(personas)} personas, {len(cases)} questions; machine: "
        f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    overrides = {}
    for item in args.set:
        name, value = item.split("=", 1)
        overrides[name] = type(getattr(Settings(), name))(value)
    with tempfile.TemporaryDirectory() as tmp, serve_upstream() as upstream:
        db = args.db or Path(tmp) / "memsuite.db"
        fresh = not db.exists()
        settings = replace(Settings(db_path=db), **overrides)
        with serve(build_app(Config(upstream_base_url=upstream.url, memory=settings))) as root:
            client = openai.OpenAI(base_url=root + "/v1", api_key="sk-bench", max_retries=0)
            while httpx.get(root + "/health/readiness").status_code != 200:
                time.sleep(0.1)  # a question asked while the model loads gets facts only
            started = time.perf_counter()
            if fresh:
                for persona in personas:
                    replay(client, upstream, persona, not args.no_timestamps)
                httpx.post(root + "/v1/memory/flush", timeout=300)
            print(f"replay {time.perf_counter() - started:.0f} s (fresh: {fresh})")
            upstream.script.clear()
            for number, case in enumerate(cases):
                ask(client, upstream, number, case)
    out = report(cases)
    for case in cases:
        if case.category == args.show and not case.result["passed"]:
            print(f"\n- {case.persona} [{case.split}] {case.question} -> {case.expected}")
            print("  " + case.result["block"][:1500])
    RESULTS.mkdir(parents=True, exist_ok=True)
    per_case = [{**c.__dict__, "result": c.result} for c in cases]
    (RESULTS / "memsuite.json").write_text(json.dumps({"table": out, "cases": per_case}))


if __name__ == "__main__":
    main()
