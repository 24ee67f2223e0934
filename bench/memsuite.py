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
  in the block too; "update, the value" asks the same of the short current and old values
  (the last two fields: "Lisbon" before "Porto", as whole words, the facts section included,
  as the hidden acceptance suite of issue 16 scores it);
- abstain (never discussed, on a familiar topic): the block has no `[Relevant past context]`.

    PYTHONPATH=. /work/venv/bin/python bench/memsuite.py                 # replay and ask
    PYTHONPATH=. /work/venv/bin/python bench/memsuite.py --db /tmp/m.db  # reuse a replay

Data format: `### <persona> <tune|held>`, `@ <YYYY-MM-DD>` opens a session, `U:` / `A:` are
turns, `Q <category> | <question> | <expected> | <superseded or -> [| <value> | <old value or ->]`
are questions.

Two suites. `--suite short` is the personas alone (about 24 short turns each: a 5 x 600 block
holds much of a history, so paraphrase is near the ceiling). `--suite long` (the default) weaves
into each persona eight of the twelve distractor sessions of its half
(bench/memsuite/distractors_{a,b}.txt: the same themes, long assistant answers, each with its
own paraphrase and never-discussed questions), dated evenly between the persona's first session
and a month after its last: about 4x the text, many related topics, as in a year of use.
`--suite fresh` is personas 21-30 alone (bench/memsuite/fresh.txt, split `fresh`): written
later, in another style (chatty turns with the detail mid-paragraph, long replies, updates
phrased many ways, other lives and domains), never tuned on: the stand-in for the hidden
acceptance suite of issue 16. `--suite fresh2` is personas 31-40 (bench/memsuite/fresh2.txt,
split `fresh2`): a second never-tuned split in the same style, written blind (by someone who had
not read moim's cue rules) once the first had been read for misses over several rounds.
`--suite fresh3` is personas 41-50 (bench/memsuite/fresh3.txt, split `fresh3`): a third, written
blind the same way once fresh and fresh2 had both been read for misses; for measuring only.
`--suite fresh4` is personas 51-60 (bench/memsuite/fresh4.txt, split `fresh4`): a fourth, written
blind once the first three had been read for misses. `--suite fresh5` is personas 61-70
(bench/memsuite/fresh5.txt, split `fresh5`): a fifth, written blind once fresh4 had been read for
misses too; for measuring only. `--suite fresh6` is personas 71-80 (bench/memsuite/fresh6.txt,
split `fresh6`): a sixth, written blind the same way (by someone who had read neither moim's memory
code nor the other splits); for measuring only. `--suite fresh7` is personas 81-88
(bench/memsuite/fresh7.txt): corrections ("Actually it's Salford, not Manchester") among ordinary
updates, written by the session that built the correction cues (not blind); split `fresh7`
(f81-f84) is its tuning half, `fresh7h` (f85-f88) its held-out half. `--suite fresh8` is
personas 91-100 (bench/memsuite/fresh8.txt, split `fresh8`): an eighth, written blind the same
way (by someone who had read neither moim's memory code nor the other splits' misses); for
measuring only. `--suite fresh9` is personas 101-110 (bench/memsuite/fresh9.txt, split `fresh9`):
a ninth, written blind the same way (other lives again, user turns of mixed length, corrections
said in passing); for measuring only. `--suite fresh10` is personas 111-120
(bench/memsuite/fresh10.txt, split `fresh10`) and `--suite fresh11` personas 121-130
(bench/memsuite/fresh11.txt, split `fresh11`): two more, written together by a session that had
not read moim's recall code, its docs or the blind splits (changes said in a reply to the
assistant's question, two sessions late, or taken back; evidence in a brief answer to the
assistant). fresh10 is a tuning split; fresh11 is blind, for measuring only. `--suite fresh12`
is personas 131-140 (bench/memsuite/fresh12.txt, split `fresh12`), a tuning split written by a
session that had not read moim's recall code (other lives again; changes said as corrections,
implied by an event, reverted; a longer history). `--suite fresh13` is personas 141-150
(bench/memsuite/fresh13.txt, split `fresh13`), written after it by the same session the same
way (two longer histories): blind, for measuring only. `--suite fresh14` is personas 151-160
(bench/memsuite/fresh14.txt, split `fresh14`), a tuning split written by a session that had not
read moim's recall code (other lives again; changes in passing, in a brief answer to the
assistant, two sessions late, as corrections, implied by an event, reverted; questions terse or
long; two histories of six sessions of eight turn pairs, many topics each). `--suite fresh15` is
personas 161-170 (bench/memsuite/fresh15.txt, split `fresh15`), written after it by the same
session the same way (two longer histories): blind, for measuring only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402

from bench import embedding_server  # noqa: E402
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
SPLITS = ("tune", "held", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7")
SPLITS += ("fresh7h", "fresh8", "fresh9", "fresh10", "fresh11", "fresh12", "fresh13")
SPLITS += ("fresh14", "fresh15")
SUITES = ("long", "short", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7")
SUITES += ("fresh8", "fresh9", "fresh10", "fresh11", "fresh12", "fresh13", "fresh14")
SUITES += ("fresh15",)


@dataclass
class Case:
    persona: str
    split: str
    category: str
    question: str
    expected: str | None
    stale: str | None
    result: dict[str, Any] = field(default_factory=dict)
    source: str = "own"  # "own" or the distractor session's name
    value: str | None = None  # update: the current value and the superseded one, short
    old_value: str | None = None


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
            elif line.startswith("@ "):  # a date, or "bank" for a distractor session
                personas[-1].sessions.append((line[2:].strip(), []))
            elif line[:3] in ("U: ", "A: "):
                role = "user" if line[0] == "U" else "assistant"
                personas[-1].sessions[-1][1].append((role, line[3:]))
            elif line.startswith("Q "):
                parts = [p.strip() for p in line[2:].split("|")]
                category, question = parts[0], parts[1]
                expected = parts[2] if len(parts) > 2 else None
                stale = parts[3] if len(parts) > 3 and parts[3] != "-" else None
                value = parts[4] if len(parts) > 4 else None
                old_value = parts[5] if len(parts) > 5 and parts[5] != "-" else None
                p = personas[-1]
                case = Case(p.name, p.split, category, question, expected, stale)
                case.value, case.old_value = value, old_value
                p.cases.append(case)
            else:
                raise ValueError(f"{path}: cannot read {line!r}")
    for p in personas:
        _check(p)
    return personas


def _check(persona: Persona) -> None:
    """Every expected phrase is said in the history; an update's two phrases in one turn each.

    Each session alternates user and assistant turns, user first and assistant last: the
    replay sends each user turn with the reply after it, so an unanswered one is never stored.
    """
    for day, session in persona.sessions:
        roles = [role for role, _ in session]
        expected = ["user", "assistant"] * (len(roles) // 2)
        assert roles and roles == expected, f"{persona.name} {day}: turns {roles} are not pairs"
    turns = [norm(text) for _, session in persona.sessions for _, text in session]
    for case in persona.cases:
        assert case.category in CATEGORIES, case
        for phrase in (case.expected, case.stale):
            if phrase is not None and case.category != "abstain":
                found = sum(norm(phrase) in t for t in turns)
                ok = found == 1 if case.category == "update" else found >= 1
                assert ok, f"{persona.name}: {phrase!r} is in {found} turns"


BANK_SESSIONS = 8  # distractor sessions woven into each persona (of 12 per half)


def weave(personas: list[Persona], bank: list[Persona]) -> list[Persona]:
    """Each persona with eight distractor sessions of its half, their questions asked too.

    Persona i of a half gets bank sessions i, i+1, ... i+7 (mod 12) of the same half, so each
    distractor lands in eight personas among different neighbours. Dates run evenly from a few
    days after the persona's first session to a month after its last.
    """
    out = []
    for split in ("tune", "held"):
        mine = [p for p in personas if p.split == split]
        theirs = [b for b in bank if b.split == split]
        for i, persona in enumerate(mine):
            chosen = [theirs[(i + j) % len(theirs)] for j in range(min(BANK_SESSIONS, len(theirs)))]
            dates = [date.fromisoformat(day) for day, _ in persona.sessions]
            first, last = dates[0] + timedelta(days=3), dates[-1] + timedelta(days=30)
            step = (last - first) / max(1, len(chosen) - 1)
            extra = [
                ((first + step * n).isoformat(), d.sessions[0][1]) for n, d in enumerate(chosen)
            ]
            sessions = sorted(persona.sessions + extra, key=lambda s: s[0])
            cases = persona.cases + [
                replace_case(c, persona.name, d.name) for d in chosen for c in d.cases
            ]
            woven = Persona(persona.name, split, sessions, cases)
            _check(woven)
            out.append(woven)
    return out


def personas_of(suite: str) -> list[Persona]:
    """The personas `suite` replays: 01-20 (short, long), 21-30, ... 161-170 (fresh, 2, ... 15)."""
    if suite.startswith("fresh"):
        return load([DATA / f"{suite}.txt"])
    personas = load(sorted(DATA.glob("personas_*.txt")))
    if suite == "long":
        personas = weave(personas, load(sorted(DATA.glob("distractors_*.txt"))))
    return personas


def splits_of(cases: list[Case]) -> list[str]:
    """The splits `cases` hold, in SPLITS order."""
    return [s for s in SPLITS if any(c.split == s for c in cases)]


def replace_case(case: Case, persona: str, source: str) -> Case:
    return Case(
        persona, case.split, case.category, case.question, case.expected, case.stale, source=source
    )


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
    if case.category == "update" and case.value:
        at, old_at = _word_at(block, case.value), _word_at(block, case.old_value)
        case.result["value_passed"] = at >= 0 and (old_at < 0 or at < old_at)
    case.result.update(
        passed=passed,
        excerpts=excerpts,
        chunks=int(raw.headers["x-memory-chunks-injected"]),
        overhead_ms=float(raw.headers["x-memory-overhead-ms"]),
        block=block,
    )


def _word_at(block: str, value: str | None) -> int:
    """Where `value` first occurs in `block` as whole words (normalised), or -1."""
    if not value:
        return -1
    found = re.search(rf"(?<!\w){re.escape(norm(value))}(?!\w)", block)
    return found.start() if found else -1


def report(cases: list[Case]) -> dict[str, Any]:
    table: dict[str, Any] = defaultdict(dict)
    splits = splits_of(cases)
    print(f"\n| category | {' | '.join(splits)} | all |\n|---|{'---|' * len(splits)}---|")
    for category in (*CATEGORIES, "all"):
        row = []
        for split in (*splits, None):
            chosen = [
                c
                for c in cases
                if (category == "all" or c.category == category) and split in (None, c.split)
            ]
            score = sum(c.result["passed"] for c in chosen) / len(chosen) if chosen else 0.0
            if not chosen:
                row.append("-")
                continue
            table[category][split or "all"] = {"n": len(chosen), "score": score}
            row.append(f"{score:.2f} ({len(chosen)})")
        print(f"| {category} | " + " | ".join(row) + " |")
    valued = [c for c in cases if "value_passed" in c.result]
    for split in (*splits, None):
        chosen = [c for c in valued if split in (None, c.split)]
        score = sum(c.result["value_passed"] for c in chosen) / len(chosen) if chosen else 0.0
        table["update_value"][split or "all"] = {"n": len(chosen), "score": score}
    if valued:
        print(
            "| update, the value (current before superseded, facts included) | "
            + " | ".join(
                f"{table['update_value'][s]['score']:.2f} ({table['update_value'][s]['n']})"
                for s in (*splits, "all")
            )
            + " |"
        )
    answered = [c for c in cases if c.category != "abstain"]
    kept = sum(c.result["excerpts"] for c in answered) / len(answered)
    print(f"\nquestions with an answer that got excerpts: {kept:.2f}")
    return dict(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", choices=SUITES, default="long")
    parser.add_argument("--db", type=Path, help="database to reuse (replay skipped when present)")
    parser.add_argument("--no-timestamps", action="store_true", help="replay without dates")
    parser.add_argument("--show", choices=[*CATEGORIES, "none"], default="none")
    parser.add_argument("--split", choices=[*SPLITS, "all"], default="all")
    parser.add_argument("--set", action="append", default=[], help="Settings name=value")
    parser.add_argument(
        "--at-once",
        action="store_true",
        help="ask each persona's questions right after its replay, never flushing (as a client"
        " that speaks only the OpenAI API would)",
    )
    embedding_server.add_arguments(parser)
    args = parser.parse_args()
    personas = personas_of(args.suite)
    cases = [c for p in personas for c in p.cases if args.split in ("all", c.split)]
    print(
        f"dataset: {args.suite} suite, {len(personas)} personas, {len(cases)} questions, "
        f"{sum(len(t) for p in personas for _, s in p.sessions for _, t in s) // len(personas)}"
        f" characters of history a persona; machine: "
        f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    overrides = {}
    for item in args.set:
        name, value = item.split("=", 1)
        overrides[name] = type(getattr(Settings(), name))(value)
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_upstream() as upstream,
        embedding_server.chosen_embedder(args.embedder) as embedder,
    ):
        db = args.db or Path(tmp) / "memsuite.db"
        fresh = not db.exists()
        settings = replace(Settings(db_path=db), **overrides)
        config = Config(upstream_base_url=upstream.url, memory=settings, embedder=embedder)
        with serve(build_app(config)) as root:
            client = openai.OpenAI(base_url=root + "/v1", api_key="sk-bench", max_retries=0)
            while httpx.get(root + "/health/readiness").status_code != 200:
                time.sleep(0.1)  # a question asked while the model loads gets facts only
            started = time.perf_counter()
            if fresh and args.at_once:
                for persona in personas:
                    replay(client, upstream, persona, not args.no_timestamps)
                    upstream.script.clear()
                    for number, case in enumerate(cases):
                        if case.persona == persona.name:
                            ask(client, upstream, number, case)
            elif fresh:
                for persona in personas:
                    replay(client, upstream, persona, not args.no_timestamps)
                while httpx.post(root + "/v1/memory/flush", timeout=300).status_code != 200:
                    pass  # 504: still indexing after 120 s (a busy machine); wait again
            print(f"replay {time.perf_counter() - started:.0f} s (fresh: {fresh})")
            upstream.script.clear()
            for number, case in enumerate(cases):
                if not (fresh and args.at_once):
                    ask(client, upstream, number, case)
    out = report(cases)
    if args.suite == "long":
        print("\nthe personas' own questions only:", end="")
        out["own"] = report([c for c in cases if c.source == "own"])
        print("\nthe distractor sessions' questions only:", end="")
        out["bank"] = report([c for c in cases if c.source != "own"])
    for case in cases:
        if case.category == args.show and not case.result["passed"]:
            print(f"\n- {case.persona} [{case.split}] {case.question} -> {case.expected}")
            print("  " + case.result["block"][:1500])
    RESULTS.mkdir(parents=True, exist_ok=True)
    per_case = [{**c.__dict__, "result": c.result} for c in cases]
    named = "" if args.embedder == "bundled" else f"_{args.embedder}"
    (RESULTS / f"memsuite_{args.suite}{named}.json").write_text(
        json.dumps({"table": out, "cases": per_case})
    )


if __name__ == "__main__":
    main()
