"""Semantic memory's rules, above the SQL of `memory/store/fact_rows.py`.

What a valid fact is (keys normalised, values, categories and policies checked, `ValueError`
with a message a user can act on otherwise), which of a user's facts enter the MOIM block and
in what order, the lifecycle's thresholds, and how the cue extractor's captures
(`memory/facts/capture.py`) become stored facts. Deterministic and local, like the rest of the
memory loop (DMF): no model decides what is kept.

Facts are semantic memory (CALMem §5): stated once, injected every turn, never suppressed by
the episodic tier, only by their own token cap (`Settings.facts_max_tokens`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from memory.block.tokens import count_tokens
from memory.facts.capture import Capture
from memory.facts.changes import UNNAMED_DRUG
from memory.facts.corrections import CORRECTED, corrected
from memory.facts.endings import UNNAMED_PET, one_pet, same_job
from memory.records import Fact, FactStatus, LeftOut, Policy
from memory.store import fact_rows
from memory.store.backend import StoreBackend as Store

logger = logging.getLogger(__name__)

# The durable-memory blog's fact types, in the order the block gives them room: what must not
# be violated, who the user is, how they like things, work, rules of the conversation, open
# threads, dated events. Any other lowercase word is a valid category too, ranked after these.
CATEGORIES = (
    "constraint",
    "profile",
    "preference",
    "project",
    "protocol",
    "open_loop",
    "episodic_event",
)
POLICIES: tuple[Policy, ...] = ("speak", "adapt", "avoid")
STATUSES: tuple[FactStatus, ...] = ("active", "superseded", "stale", "archived")
MAX_KEY_CHARS = 80
MAX_VALUE_CHARS = 500
_CATEGORY = re.compile(r"[a-z][a-z0-9_]{0,39}")
_NOT_KEY = re.compile(r"[^\w:]+")
_ID_DIGITS = 18  # the longest fact id looked up: any 18 digits fit SQLite's 64-bit integers

DAY = 86_400.0
# The blog's lifecycle: open loops close after 60 days of silence, episodic events go stale
# after 30 days without reinforcement. Pinned facts are exempt (see fact_rows.expire_facts).
MAX_SILENCE = {"open_loop": 60 * DAY, "episodic_event": 30 * DAY}
# A fact the user stated in chat is trusted a little less than one set through the API.
USER_STATED_CONFIDENCE = 0.9
_COUNT_MODEL = "gpt-4o"  # o200k_base for every request: the cap is a budget, not exact


def normalise_key(key: str) -> str:
    """`key` as stored: lowercase snake_case, at most 80 characters ("Home City" → home_city).

    Letters of any script, digits, `_` and `:` (a namespace, as in the cue extractor's
    "allergy:peanuts") are kept; every other run of characters becomes one `_`.
    """
    if not isinstance(key, str):
        raise ValueError("'key' must be a string")
    slug = _NOT_KEY.sub("_", key.strip().lower()).strip("_:")
    slug = re.sub(r"_+", "_", slug)[:MAX_KEY_CHARS].rstrip("_:")
    if not slug:
        raise ValueError("'key' must contain at least one letter or digit")
    return slug


def check_value(value: object) -> str:
    """The value without surrounding whitespace; 1 to 500 characters."""
    if not isinstance(value, str):
        raise ValueError("'value' must be a string")
    value = value.strip()
    if not 1 <= len(value) <= MAX_VALUE_CHARS:
        raise ValueError(f"'value' must be 1 to {MAX_VALUE_CHARS} characters long")
    return value


def check_category(category: object) -> str:
    """A category: one of `CATEGORIES` or any other lowercase word (letters, digits, `_`)."""
    if not isinstance(category, str) or not _CATEGORY.fullmatch(category.strip()):
        raise ValueError(f"'category' must be a lowercase word such as {', '.join(CATEGORIES)}")
    return category.strip()


def check_policy(policy: object) -> Policy:
    """How the fact is surfaced: speak, adapt (use silently) or avoid (do not bring up)."""
    if policy not in POLICIES:
        raise ValueError(f"'policy' must be one of {', '.join(POLICIES)}")
    return policy


def check_status(status: object) -> FactStatus:
    if status not in STATUSES:
        raise ValueError(f"'status' must be one of {', '.join(STATUSES)}")
    return status


# -- the block ---------------------------------------------------------------------------------


def select_for_block(
    facts: Iterable[Fact], max_tokens: int, count: Callable[[str], int]
) -> list[Fact]:
    """The facts that go into the block, in order, within `max_tokens`.

    Pinned first, then by category (`CATEGORIES` order, other categories last), then the most
    recently updated. Each fact costs `count` of its rendered line; selection stops at the
    first fact that would pass the cap, so a lower-ranked short fact never displaces a
    higher-ranked long one.
    """
    ranked = sorted(facts, key=_block_rank)
    chosen: list[Fact] = []
    used = 0
    for fact in ranked:
        used += count(f"- {fact.key}: {fact.value}")
        if used > max_tokens:
            break
        chosen.append(fact)
    return chosen


def _block_rank(fact: Fact) -> tuple[bool, int, float, int]:
    priority = CATEGORIES.index(fact.category) if fact.category in CATEGORIES else len(CATEGORIES)
    return (not fact.pinned, priority, -fact.updated_at, -fact.id)


def facts_for_block(store: Store, user_id: str, max_tokens: int, now: float) -> list[Fact]:
    """The user's current facts for this request's block. Reads only: the request path
    never writes. Facts past their expiry or their category's silence limit are left out
    here, and made stale by `retire_facts` in the background writer.
    """
    return facts_for_block_and_left_out(store, user_id, max_tokens, now)[0]


def facts_for_block_and_left_out(
    store: Store, user_id: str, max_tokens: int, now: float
) -> tuple[list[Fact], list[LeftOut]]:
    """`facts_for_block`, and the active facts it leaves out with why (silent, facts_budget)."""
    active = fact_rows.active_facts(store, user_id, now)
    heard = [f for f in active if not _silent(f, now)]
    chosen = select_for_block(heard, max_tokens, lambda text: count_tokens(text, _COUNT_MODEL))
    taken = {f.id for f in chosen}
    left_out = [
        LeftOut("silent" if _silent(f, now) else "facts_budget", fact=f)
        for f in active
        if f.id not in taken
    ]
    return chosen, left_out


def retire_facts(store: Store, user_id: str, injected: Sequence[int], now: float) -> None:
    """The lifecycle step after a turn: due facts turn stale, injected ones are stamped."""
    fact_rows.expire_facts(store, now, user_id=user_id, max_silence=MAX_SILENCE)
    if injected:
        fact_rows.mark_injected(store, user_id, list(injected), now)


def _silent(fact: Fact, now: float) -> bool:
    limit = MAX_SILENCE.get(fact.category)
    return not fact.pinned and limit is not None and now - fact.updated_at > limit


# -- writes ------------------------------------------------------------------------------------


def set_fact(
    store: Store,
    user_id: str,
    key: str,
    value: str,
    *,
    category: str | None = None,
    policy: str | None = None,
    pinned: bool | None = None,
    ttl_seconds: float | None = None,
    source: str = "api",
    now: float,
) -> Fact:
    """Validate and upsert one fact (see `fact_rows.upsert_fact` for supersession).

    `category`, `policy` and `pinned` left as None keep the current fact's (for a new key:
    profile, speak, unpinned). `ttl_seconds` makes the fact go stale that long after `now`;
    None means it never expires. Raises ValueError naming the bad field.
    """
    if pinned is not None and not isinstance(pinned, bool):
        raise ValueError("'pinned' must be true or false")
    key, value = normalise_key(key), check_value(value)
    return fact_rows.upsert_fact(
        store,
        user_id,
        key,
        value,
        None if category is None else check_category(category),
        policy=None if policy is None else check_policy(policy),
        pinned=pinned,
        source=source,
        expires_at=None if ttl_seconds is None else now + _ttl(ttl_seconds),
        now=now,
    )


def _ttl(ttl_seconds: object) -> float:
    """Seconds as a positive float; NaN, infinity, 10**400 and booleans are refused."""
    if isinstance(ttl_seconds, (int, float)) and not isinstance(ttl_seconds, bool):
        if 0 < ttl_seconds < 1e300:  # NaN fails both comparisons
            return float(ttl_seconds)
    raise ValueError("'ttl_seconds' must be a positive number of seconds")


def resolve_key(store: Store, user_id: str, key_or_id: str) -> str:
    """The key meant by `key_or_id`: an id of one of the user's facts (all digits), else a key.

    Digits past SQLite's 64-bit integers (`99999999999999999999999`) are no fact's id: looked
    up as a key, as any other digits that name no fact are.
    """
    if key_or_id.isascii() and key_or_id.isdigit() and len(key_or_id) <= _ID_DIGITS:
        found = fact_rows.fact_by_id(store, user_id, int(key_or_id))
        if found is not None:
            return found.key
    return normalise_key(key_or_id)


def apply_captures(
    store: Store,
    user_id: str,
    captures: Sequence[Capture],
    message_id: int | None,
    now: float,
    said: tuple[str, str] = ("", ""),
) -> list[Fact]:
    """Store what the user stated in one message; return the rows written, in order.

    `said`: that message's text and the user's message before it in the conversation, which
    tell which fact a correction by kind alone ('make that 5 mg') is about (`corrected`).

    `set` upserts with source "user_stated", confidence 0.9 and the cue's rule recorded;
    `forget` archives the key, unless it names another value than the one on file
    (`_another_value`). A restated value keeps the policy and pin it has. A capture
    never overrides a fact updated after `now` (a backfilled old conversation must not undo a
    newer statement), and an invalid capture is skipped, not fatal: the turn is stored anyway.
    """
    written: list[Fact] = []
    for capture in captures:
        try:
            if capture.key == UNNAMED_DRUG and (named := _one_medication(store, user_id, now)):
                capture = replace(capture, key=named.key, value=_with_drug(named, capture.value))
            if capture.key == UNNAMED_PET:  # 'my cat died': the one cat on file, if one
                active = fact_rows.active_facts(store, user_id, now)
                if (found := one_pet(capture, active)) is None:
                    continue
                capture = found
            if capture.key == CORRECTED:
                active = fact_rows.active_facts(store, user_id, now)
                if (fixed := corrected(capture, active, *said)) is None:
                    continue  # 'it's Salford, not Manchester' with no Manchester on file
                capture = fixed
            key = normalise_key(capture.key)
            if key == UNNAMED_DRUG:
                continue  # 'they upped my dose' with no one medication on file: whose dose?
            current = fact_rows.get_fact(store, user_id, key)
            if current is not None and current.updated_at > now:
                continue
            if capture.op == "forget":
                if _another_value(current, capture):
                    continue  # 'I no longer work at Google', while the employer is Stripe
                archived = fact_rows.archive_fact(store, user_id, key, now)
                written += [archived] if archived is not None else []
                continue
            written.append(_capture(store, user_id, key, capture, current, message_id, now))
        except ValueError as exc:
            logger.debug("capture %s skipped: %s", capture.rule, exc)
    return written


def _another_value(current: Fact | None, capture: Capture) -> bool:
    """Whether a forget names a value other than the one a single-valued key holds ('I no
    longer work at Google' while the employer on file is Stripe, said since); a key naming
    its thing ('allergy:penicillin') or a forget without a value ('forget my name') never."""
    if current is None or not capture.value or ":" in current.key:
        return False
    held, named = _plain(current.value), _plain(capture.value)
    if capture.rule == "job_ended" and current.key == "job_title":  # 'I left nursing'
        return not same_job(held, named)
    shorter, longer = sorted((held, named), key=len)
    return not re.match(rf"{re.escape(shorter)}(?!\w)", longer)  # 'Boston' is 'Boston, MA'


def _plain(value: str) -> str:
    return re.sub(r"^the\s+", "", value.strip().casefold())


def _one_medication(store: Store, user_id: str, now: float) -> Fact | None:
    """The user's medication fact when there is exactly one active, else None."""
    drugs = [
        f
        for f in fact_rows.active_facts(store, user_id, now)
        if f.key.startswith("medication:") and f.key != UNNAMED_DRUG
    ]
    return drugs[0] if len(drugs) == 1 else None


def _with_drug(medication: Fact, dose: str) -> str:
    """'sertraline 50 mg' and a new dose '100 mg' -> 'sertraline 100 mg'."""
    return f"{medication.key.partition(':')[2].replace('_', ' ')} {dose}"


def _capture(
    store: Store,
    user_id: str,
    key: str,
    capture: Capture,
    current: Fact | None,
    message_id: int | None,
    now: float,
) -> Fact:
    return fact_rows.upsert_fact(
        store,
        user_id,
        key,
        check_value(capture.value),
        check_category(capture.category),
        policy=None if current is not None else check_policy(capture.policy),
        confidence=USER_STATED_CONFIDENCE,
        source="user_stated",
        source_message_id=message_id,
        rule=capture.rule,
        # restating a value keeps its expiry; a new value has none
        expires_at=current.expires_at
        if current is not None and fact_rows.same_value(current.value, capture.value)
        else None,
        now=now,
    )
