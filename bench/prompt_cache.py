"""How much of each request the provider can serve from its prompt cache, through moim.

Providers cache the longest exact prefix of a request: OpenAI from 1,024 tokens, in steps of
128 tokens; Anthropic up to `cache_control` breakpoints. A memory block that changes every turn
breaks the prefix where it sits. This bench runs the real proxy in front of the stand-in
provider (tests/upstream.py), plays one conversation per route and placement (a ~3,000-token
system prompt, 12 user turns, each recalling different memories seeded beforehand), and
compares each request the provider receives with the previous one of the same conversation.

Cacheable share of request k = cached tokens / tokens of request k, where, by OpenAI's rule,
cached = the common token prefix with request k-1, 0 below 1,024, else floored to 1,024 + a
multiple of 128. The mean over requests 2..12 is printed. Tokens: o200k_base, each message
(or Anthropic content block) tokenized on its own after a `role` line, as chat templates
separate messages, so a prefix of messages is a prefix of tokens. For the Anthropic-style route
it also prints the share Anthropic's rule gives (the longest prefix ending at one of the
previous request's breakpoints that this request repeats). Routes:

- chat, byte path: `/v1/chat/completions` to an OpenAI-compatible upstream, bytes as sent;
- chat, litellm openai/: the same through a config route `openai/…` (litellm's translation);
- chat, litellm anthropic/: a config route `anthropic/…` to the stand-in's Anthropic messages
  endpoint, the client marking its system prompt and its last message with `cache_control`
  (litellm moves every system message into Anthropic's `system`);
- responses: `/v1/responses`, the client sending the whole history as input items;
- responses, chained: `/v1/responses` with `previous_response_id` (the provider holds the
  history: its view is rebuilt from the earlier requests and replies).

Then an agent with a 30,000-token prompt on the byte path, each user turn two tool rounds (a
~500-token result each) and an answer: its cacheable share over every request, and the
estimated input cost per user turn at --price / --cached-price dollars per million input tokens
(gpt-4.1 list prices by default).
Prints markdown; writes bench/results/prompt_cache.json; asserts nothing (STYLE.md 18).

    /work/venv/bin/python bench/prompt_cache.py [--turns 12] [--system-tokens 3000]
        [--agent-tokens 30000] [--routes chat,responses]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402
import tiktoken  # noqa: E402

from memory import MemoryLayer, Settings, count_tokens  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config, ModelRoute  # noqa: E402
from tests.conftest import serve_app, wait_ready  # noqa: E402
from tests.upstream import Upstream, serve_upstream  # noqa: E402

MODEL = "gpt-4o-mini"
USER = "cache-bench"
CHAT_PATH = "/v1/chat/completions"
PLACEMENTS = ("system", "before_last_user")
count_tokens("", MODEL)  # points tiktoken at the encodings litellm ships (no download)
ENCODING = tiktoken.get_encoding("o200k_base")
EPHEMERAL = {"type": "ephemeral"}
CACHE_MIN, CACHE_STEP = 1024, 128  # OpenAI: prompts from 1,024 tokens, cached in 128-token steps

# What the user said in earlier conversations: each turn of the benched one recalls a few.
MEMORIES = (
    "My daughter Mia plays the cello in the school orchestra on Thursdays. Her teacher, Mr"
    " Okafor, wants her to practise the Saint-Saëns swan piece every evening before the spring"
    " concert, and she needs a new bow before then because the old one lost half its hair.",
    "I am training for the Berlin marathon in September, four runs a week. The long run is on"
    " Sundays along the canal, I am at 24 kilometres now, and my physio said to add no more"
    " than ten percent a week because my left calf tightens up after thirty minutes.",
    "Our kitchen renovation uses oak cabinets and a green tiled backsplash. The fitter comes on"
    " the fourteenth, the sink is a deep ceramic one from the reclamation yard in Bristol, and"
    " we still have to choose between brass and black handles for the drawers.",
    "My manager Priya wants the quarterly report on churn by the tenth. It has to split the"
    " numbers by plan, explain the jump in cancellations after the price change in March, and"
    " include the survey answers from the customers who left the annual plan.",
    "I am allergic to shellfish, so no shrimp or crab in recipes please. It is a real allergy,"
    " I carry an adrenaline pen, and fish sauce is fine but oyster sauce is not, which trips"
    " people up when they cook Thai or Cantonese food for me.",
    "We adopted a rescue greyhound called Pepper who is scared of thunder. She came from a"
    " kennel in Essex, sleeps twenty hours a day, pulls on the lead near cats, and the vet says"
    " she should lose two kilos before her next check-up in the summer.",
    "The team migrates the billing service from MySQL to Postgres in May. We run both databases"
    " side by side for two weeks, the cut-over is on a Saturday night, and I am the one on call"
    " that weekend with Dmitri as the backup if the invoices job fails.",
    "I am learning Portuguese before our trip to Porto and the Douro valley. We fly out on the"
    " second of June, stay in Ribeira for four nights, then take the train up the valley to a"
    " quinta near Pinhão where they run port tastings in the cellar.",
    "My grandmother's lemon cake recipe uses olive oil instead of butter. She added the zest of"
    " three lemons, a spoon of yoghurt, and baked it in a ring tin at 170 degrees for forty"
    " minutes, then poured a thin lemon syrup over it while it was still warm.",
    "I play five-a-side football on Tuesday evenings with colleagues. We book the pitch behind"
    " the leisure centre from seven to eight, I usually play in goal since my knee operation,"
    " and we go to the pub on the corner afterwards to argue about the offside rule.",
    "Our flat in Leeds has a damp problem in the north bedroom wall. Black mould comes back"
    " behind the wardrobe every winter, the landlord sent a surveyor in January, and he blamed"
    " a blocked gutter and the lack of a window vent rather than rising damp.",
    "I read mostly science fiction, Ursula Le Guin is my favourite author. The Dispossessed is"
    " the book I reread every few years, I loved the Earthsea books as a teenager, and lately"
    " I have been reading Becky Chambers and Ann Leckie on the train to work.",
    "My brother Tom repairs old bicycles and sells them at the market. He rents a lock-up in"
    " Hebden Bridge, strips frames down to the steel, and has a stall at the Sunday market by"
    " the canal where the steel racers from the eighties sell out first.",
    "The car needs its MOT test before the end of October. The garage on Kirkstall Road can do"
    " it on a Friday morning, the front tyres are close to the legal limit, and the rear"
    " wiper has been streaking since the summer, so it may need a new blade too.",
)
QUESTIONS = (
    "What instrument does Mia play and when is her orchestra practice?",
    "How should I plan my long runs for the marathon in September?",
    "Which colour did we pick for the kitchen backsplash tiles?",
    "When is the churn report due for Priya again?",
    "Suggest a dinner recipe, keeping my allergy in mind.",
    "Pepper hid under the bed during the storm, any tips for our greyhound?",
    "What database is the billing service moving to, and when?",
    "Give me five useful Portuguese phrases for Porto.",
    "Remind me what is special about grandmother's lemon cake.",
    "Which evening do I play football with colleagues?",
    "How do I deal with the damp wall in the north bedroom?",
    "Recommend a novel like the ones by my favourite author.",
    "Where does my brother sell the bicycles he repairs?",
    "When is the car's MOT test due?",
)


# -- what the provider saw, as token blocks ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """One message (or content block) of a prompt as tokens; `breakpoint`: cache_control."""

    tokens: tuple[int, ...]
    breakpoint: bool = False


def _block(role: str, text: str, breakpoint: bool = False) -> Block:
    return Block(tuple(ENCODING.encode(f"{role}\n{text}", disallowed_special=())), breakpoint)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or p.get("output") or "") for p in content)
    return "" if content is None else json.dumps(content)


def chat_prompt(body: dict[str, Any]) -> list[Block]:
    """An OpenAI chat request as the model reads it: tools, then each message."""
    blocks = [_block("tools", json.dumps(body["tools"]))] if body.get("tools") else []
    for message in body["messages"]:
        text = _text(message.get("content"))
        if message.get("tool_calls"):
            text += json.dumps(message["tool_calls"])
        blocks.append(_block(message["role"], text))
    return blocks


def anthropic_prompt(body: dict[str, Any]) -> list[Block]:
    """An Anthropic messages request in its cache order: tools, system, messages, by block."""
    blocks = [_block("tool", json.dumps(t), "cache_control" in t) for t in body.get("tools", [])]
    system = body.get("system") or []
    for part in [{"type": "text", "text": system}] if isinstance(system, str) else system:
        blocks.append(_block("system", part.get("text", ""), "cache_control" in part))
    for message in body["messages"]:
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for part in parts:
            text = part.get("text") or json.dumps(part)
            blocks.append(_block(message["role"], text, "cache_control" in part))
    return blocks


def response_items(body: dict[str, Any]) -> list[Block]:
    """A Responses request's own items (instructions first) as blocks."""
    blocks = [_block("system", body["instructions"])] if body.get("instructions") else []
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
        kind = item.get("type", "message")
        if kind == "message":
            blocks.append(_block(item["role"], _text(item.get("content"))))
        elif kind == "function_call":
            blocks.append(_block("assistant", item["name"] + item["arguments"]))
        elif kind == "function_call_output":
            blocks.append(_block("tool", _text(item.get("output"))))
    return blocks


def flat(blocks: list[Block]) -> list[int]:
    return [token for block in blocks for token in block.tokens]


def openai_cached(previous: list[int], current: list[int]) -> int:
    """Tokens of `current` OpenAI serves from cache after `previous` (its rule, see above)."""
    common = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        common += 1
    if common < CACHE_MIN:
        return 0
    return CACHE_MIN + (common - CACHE_MIN) // CACHE_STEP * CACHE_STEP


def anthropic_cached(previous: list[Block], current: list[Block]) -> int:
    """Tokens of `current` read from cache: the longest prefix of `previous` ending at one of
    its breakpoints (where it wrote cache entries) that `current` repeats block for block."""
    best = tokens = 0
    for before, now in zip(previous, current, strict=False):
        if before.tokens != now.tokens:
            break
        tokens += len(now.tokens)
        if before.breakpoint:
            best = tokens
    return best


# -- the conversation --------------------------------------------------------------------------


def system_prompt(tokens: int) -> str:
    """A deterministic system prompt of about `tokens` tokens (numbered house rules)."""
    subjects = ("tone", "formatting", "dates", "units", "safety", "citations", "code", "lists")
    lines = ["You are Atlas, a personal assistant. Follow these house rules exactly."]
    rule = 0
    while count_tokens("\n".join(lines), MODEL) < tokens:
        rule += 1
        subject = subjects[rule % len(subjects)]
        lines.append(
            f"Rule {rule} ({subject}): when a request touches {subject}, prefer the user's own "
            f"words, keep answers under {80 + rule % 7 * 20} words, and say when you are unsure "
            f"rather than guessing; never invent a {subject} detail the user did not give."
        )
    return "\n".join(lines)


@dataclass
class Run:
    """One conversation's requests as the provider saw them."""

    prompts: list[list[Block]] = field(default_factory=list)
    injected: list[int] = field(default_factory=list)  # x-memory-tokens-injected per request

    def shares(self, rule: str = "openai") -> list[float]:
        out = []
        for before, now in zip(self.prompts, self.prompts[1:], strict=False):
            if rule == "anthropic":
                cached = anthropic_cached(before, now)
            else:
                cached = openai_cached(flat(before), flat(now))
            out.append(cached / max(1, len(flat(now))))
        return out

    def tokens(self) -> list[int]:
        return [len(flat(p)) for p in self.prompts[1:]]

    def cached_tokens(self) -> list[int]:
        pairs = zip(self.prompts, self.prompts[1:], strict=False)
        return [openai_cached(flat(a), flat(b)) for a, b in pairs]


Player = Callable[[openai.OpenAI, Upstream, str, int, dict[str, str]], Run]


def _new_requests(upstream: Upstream, seen: int, path: str) -> list[dict[str, Any]]:
    return [r.json for r in upstream.requests[seen:] if r.path == path]


def play_chat(
    client: openai.OpenAI, upstream: Upstream, system: str, turns: int, headers: dict[str, str]
) -> Run:
    """The chat conversation through /v1/chat/completions (the model picks the route)."""
    return _play_chat(client, upstream, system, turns, headers, MODEL, "/v1/chat/completions")


def play_chat_litellm(
    client: openai.OpenAI, upstream: Upstream, system: str, turns: int, headers: dict[str, str]
) -> Run:
    """The chat conversation through a config route `openai/…`: litellm's translation."""
    path = "/v1/chat/completions"
    return _play_chat(client, upstream, system, turns, headers, "via-litellm", path)


def _play_chat(
    client: openai.OpenAI,
    upstream: Upstream,
    system: str,
    turns: int,
    headers: dict[str, str],
    model: str,
    path: str,
    prompt: Callable[[dict[str, Any]], list[Block]] = chat_prompt,
    mark: bool = False,
) -> Run:
    run = Run()
    system_content: Any = system
    if mark:  # an Anthropic client caches its system prompt and its latest message
        system_content = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_content}]
    for turn in range(turns):
        question = {"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]}
        sent = [*messages, question]
        if mark:
            part = {"type": "text", "text": question["content"], "cache_control": EPHEMERAL}
            sent = [*messages, {"role": "user", "content": [part]}]
        seen = len(upstream.requests)
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=sent, extra_headers=headers
        )
        reply = raw.parse().choices[0].message.content or ""
        run.prompts.append(prompt(_new_requests(upstream, seen, path)[-1]))
        run.injected.append(int(raw.headers.get("x-memory-tokens-injected", "0")))
        messages += [question, {"role": "assistant", "content": reply}]
    return run


def play_chat_anthropic(
    client: openai.OpenAI, upstream: Upstream, system: str, turns: int, headers: dict[str, str]
) -> Run:
    """The chat conversation through a config route `anthropic/…` (litellm) to the stand-in's
    Anthropic messages endpoint, the client marking its system prompt and latest message."""
    return _play_chat(
        client, upstream, system, turns, headers, "claude", "/v1/messages", anthropic_prompt, True
    )


def play_responses(
    client: openai.OpenAI, upstream: Upstream, system: str, turns: int, headers: dict[str, str]
) -> Run:
    """The conversation through /v1/responses, the client sending its whole history."""
    run, history = Run(), []
    for turn in range(turns):
        question = {"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]}
        seen = len(upstream.requests)
        raw = client.responses.with_raw_response.create(
            model=MODEL, instructions=system, input=[*history, question], extra_headers=headers
        )
        response = raw.parse()
        run.prompts.append(response_items(_new_requests(upstream, seen, "/v1/responses")[-1]))
        run.injected.append(int(raw.headers.get("x-memory-tokens-injected", "0")))
        history += [question, *(item.model_dump(exclude_none=True) for item in response.output)]
    return run


def play_responses_chained(
    client: openai.OpenAI, upstream: Upstream, system: str, turns: int, headers: dict[str, str]
) -> Run:
    """The conversation through /v1/responses with `previous_response_id`: the provider holds
    the history, so what it reads is every earlier request's items and replies, then this one's."""
    run, held, previous = Run(), [], None
    for turn in range(turns):
        question = {"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]}
        seen = len(upstream.requests)
        raw = client.responses.with_raw_response.create(
            model=MODEL,
            instructions=system,
            input=[question],
            previous_response_id=previous,
            extra_headers=headers,
        )
        response = raw.parse()
        sent = _new_requests(upstream, seen, "/v1/responses")[-1]
        items = response_items({**sent, "instructions": None})
        run.prompts.append(
            [*response_items({"instructions": sent.get("instructions")}), *held, *items]
        )
        run.injected.append(int(raw.headers.get("x-memory-tokens-injected", "0")))
        output = [item.model_dump(exclude_none=True) for item in response.output]
        held += [*items, *response_items({"input": output})]
        previous = response.id
    return run


NOTES = " ".join(
    f"Note {i}: the user filed this under projects, errands and trips." for i in range(40)
)


def play_agent(
    client: openai.OpenAI, upstream: Upstream, system: str, turns: int, headers: dict[str, str]
) -> Run:
    """An agent on the byte path: each user turn is two tool rounds (a ~500-token result each)
    and an answer, three requests; every request is compared with the one before it."""
    run = Run()
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    tools = [{"type": "function", "function": {"name": "search_notes", "parameters": {}}}]
    for turn in range(turns):
        calls = [
            {"id": f"call_{turn}_{i}", "name": "search_notes", "arguments": f'{{"page":{i}}}'}
            for i in range(2)
        ]
        upstream.script.extend(
            [{"tool_calls": [calls[0]]}, {"tool_calls": [calls[1]]}, {"content": f"Done {turn}."}]
        )
        messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})
        for step in range(3):
            seen = len(upstream.requests)
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL, messages=messages, tools=tools, extra_headers=headers
            )
            message = raw.parse().choices[0].message.model_dump(exclude_none=True)
            run.prompts.append(chat_prompt(_new_requests(upstream, seen, CHAT_PATH)[-1]))
            run.injected.append(int(raw.headers.get("x-memory-tokens-injected", "0")))
            messages.append(message)
            if step < 2:
                result = f"page {step} of turn {turn}: {NOTES}"
                messages.append(
                    {"role": "tool", "tool_call_id": calls[step]["id"], "content": result}
                )
    return run


ROUTES: dict[str, tuple[str, Player]] = {
    "chat": ("chat, byte path", play_chat),
    "chat-litellm": ("chat, litellm openai/", play_chat_litellm),
    "chat-anthropic": ("chat, litellm anthropic/", play_chat_anthropic),
    "responses": ("responses", play_responses),
    "responses-chained": ("responses, chained", play_responses_chained),
    "agent": ("agent, tool rounds, byte path", play_agent),
}


# -- the proxy ---------------------------------------------------------------------------------


@contextmanager
def proxy(upstream: Upstream, db: Path, placement: str) -> Iterator[str]:
    """The real moim app on a free port, with `placement`, in front of the stand-in."""
    settings = Settings(db_path=db, placement=placement)  # type: ignore[arg-type]
    root = upstream.url.removesuffix("/v1")
    routes = {
        "via-litellm": ModelRoute(model=f"openai/{MODEL}", api_base=upstream.url, api_key="sk-b"),
        "claude": ModelRoute(model="anthropic/claude-sonnet-4-5", api_base=root, api_key="sk-b"),
    }
    config = Config(memory=settings, upstream_base_url=upstream.url, routes=routes)
    with serve_app(build_app(config, MemoryLayer(settings))) as root:
        wait_ready(root, timeout=120)
        yield root


def seed(root: str) -> None:
    """The user's earlier conversations, one session each, stored and indexed."""
    with openai.OpenAI(base_url=root + "/v1", api_key="sk-bench", max_retries=0) as client:
        for memory in MEMORIES:
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": memory}],
                extra_headers={"X-Memory-User-Id": USER},
            )
    httpx.post(root + "/v1/memory/flush", timeout=300).raise_for_status()


def measure(upstream: Upstream, route: str, placement: str | None, system: str, turns: int) -> Run:
    """Play the route's conversation through a fresh proxy; `placement` None: memory off."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        proxy(upstream, Path(tmp) / "moim.db", placement or "system") as root,
    ):
        seed(root)
        headers = {"X-Memory-User-Id": USER, "X-Memory-Session-Id": f"bench-{time.time_ns()}"}
        if placement is None:
            headers["X-Memory-Mode"] = "off"
        with openai.OpenAI(base_url=root + "/v1", api_key="sk-bench", max_retries=0) as client:
            return ROUTES[route][1](client, upstream, system, turns, headers)


# -- report ------------------------------------------------------------------------------------


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--system-tokens", type=int, default=3000)
    parser.add_argument("--agent-tokens", type=int, default=30000)
    parser.add_argument("--routes", default=",".join(r for r in ROUTES if r != "agent"))
    parser.add_argument("--price", type=float, default=2.00, help="$ per 1M input tokens")
    parser.add_argument("--cached-price", type=float, default=0.50, help="$ per 1M cached")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    modes: list[str | None] = [None, *PLACEMENTS]
    names = {None: "memory off", **{p: p for p in PLACEMENTS}}
    results: dict[str, Any] = {"machine": platform.platform(), "turns": args.turns}
    print(f"# Prompt cache through moim ({args.turns} turns, {args.system_tokens}-token system)")
    print(f"\n{platform.platform()}, python {platform.python_version()}\n")
    print("| route | " + " | ".join(names[m] for m in modes) + " |")
    print("|---|" + "---:|" * len(modes))
    system = system_prompt(args.system_tokens)
    with serve_upstream() as upstream:
        for route in args.routes.split(","):
            label = ROUTES[route][0]
            cells, rows = [], {}
            for mode in modes:
                run = measure(upstream, route, mode, system, args.turns)
                share = mean(run.shares())
                cells.append(f"{share:.3f}")
                rows[names[mode]] = {
                    "share": share,
                    "anthropic": mean(run.shares("anthropic")),
                    "shares": run.shares(),
                    "tokens": run.tokens(),
                    "injected": run.injected,
                }
            results[route] = rows
            print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
            if route == "chat-anthropic":  # the same requests by Anthropic's breakpoint rule
                cells = [f"{rows[names[m]]['anthropic']:.3f}" for m in modes]
                print(f"| {label}, by breakpoints | " + " | ".join(cells) + " |", flush=True)
        agent = system_prompt(args.agent_tokens)
        print(f"\n## Input cost per user turn, {args.agent_tokens:,}-token agent prompt\n")
        print(
            "An agent on the byte path, three requests per user turn (two tool rounds, an "
            f"answer); ${args.price:.2f} per 1M input tokens, ${args.cached_price:.2f} cached.\n"
        )
        print("| | input tokens/turn | cached/turn | cacheable | $ per turn |")
        print("|---|---:|---:|---:|---:|")
        costs = {}
        for mode in modes:
            run = measure(upstream, "agent", mode, agent, args.turns)
            turns = len(run.tokens()) / 3  # the requests compared, three per user turn
            tokens, cached = sum(run.tokens()) / turns, sum(run.cached_tokens()) / turns
            cost = ((tokens - cached) * args.price + cached * args.cached_price) / 1e6
            costs[names[mode]] = {"tokens": tokens, "cached": cached, "cost_per_turn": cost}
            print(
                f"| {names[mode]} | {tokens:,.0f} | {cached:,.0f} | {cached / tokens:.3f} "
                f"| {cost:.4f} |",
                flush=True,
            )
        results["agent_cost"] = costs
    out = ROOT / "bench" / "results" / "prompt_cache.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"\nwritten: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
