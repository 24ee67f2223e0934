"""Optional LLM consolidation of facts: the strict parser, the write gate, the apply.

The durable-memory blog's two-stage design. A model (asked by `proxy/consolidate.py`: this
module has no prompt, no HTTP and no LLM client, so memory stays deterministic and local)
proposes operations on a user's facts: add, update, reinforce, contradict, close_open_loop.
The proposer is loose, the gate strict:

    model text ──parse_operations──▶ [Operation]   any flaw rejects the whole batch
               ──gate──────────────▶ accepted | rejected with a reason, one by one
               ──apply_operations──▶ facts, every accepted operation in ONE transaction

The gate drops an operation whose value is under 2 characters, whose confidence is under 0.4
or salience under 0.2 (the blog's numbers), that names a fact the user does not have, that
would change a pinned fact, or whose value nearly duplicates another key's: the same text
once normalised, or an embedding cosine of 0.92 or more. Nothing in the request path calls
this module.

The reply's JSON shape, `{"operations": [{"op", "key", "value", "category", "confidence",
"salience", "reason"}]}`, is a contract with the prompt in `proxy/consolidate.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import numpy as np

from memory.errors import MemoryLayerError
from memory.facts.rules import check_category, check_value, normalise_key
from memory.records import Fact
from memory.store import fact_rows
from memory.store.backend import StoreBackend as Store
from memory.store.fact_limit import MAX_CURRENT_FACTS

Op = Literal["add", "update", "reinforce", "contradict", "close_open_loop"]
OPS: tuple[Op, ...] = get_args(Op)
MIN_VALUE_CHARS = 2
MIN_CONFIDENCE = 0.4  # the blog's write gate
MIN_SALIENCE = 0.2
# On "key words: value" lines, bundled MiniLM: "lives in Lisbon" / "Lives in Lisbon, Portugal"
# 0.96, "name: Dana" / "user name: Dana" 0.87, "dog name: Max" / "brother name: Max" 0.65.
DUPLICATE_COSINE = 0.92
REINFORCE_STEP = 0.1
MAX_OPERATIONS = 50
SOURCE = "consolidation"
_FIELDS = frozenset({"op", "key", "value", "category", "confidence", "salience", "reason"})
_KEYED = ("reinforce", "contradict", "close_open_loop")  # must name an active fact

Embed = Callable[[Sequence[str]], np.ndarray]


class ConsolidationRejected(MemoryLayerError):
    """The model's whole batch was refused; `reason` says why (no fact text in it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Operation:
    """One proposed change, already checked: `key` normalised, `value` trimmed (add/update)."""

    op: Op
    key: str
    value: str | None
    category: str | None
    confidence: float
    salience: float
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Rejection:
    operation: Operation
    reason: str


@dataclass(frozen=True, slots=True)
class GateResult:
    accepted: tuple[Operation, ...]
    rejected: tuple[Rejection, ...]


# -- stage one: parse --------------------------------------------------------------------------


def parse_operations(text: str) -> list[Operation]:
    """The model's reply as operations; raises ConsolidationRejected on any flaw at all.

    The reply must be one JSON object `{"operations": [...]}` and nothing else (no prose, no
    code fences); each operation has exactly the documented fields, a known `op`, a key,
    a value for add and update, and confidence and salience in [0, 1]; no key appears twice.
    """
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, TypeError) as exc:
        raise ConsolidationRejected(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"operations"}:
        raise ConsolidationRejected('expected an object with only "operations"')
    items = data["operations"]
    if not isinstance(items, list):
        raise ConsolidationRejected('"operations" must be a list')
    if len(items) > MAX_OPERATIONS:
        raise ConsolidationRejected(f"{len(items)} operations, more than {MAX_OPERATIONS}")
    operations: list[Operation] = []
    for number, item in enumerate(items, 1):
        try:
            operations.append(_operation(item))
        except ValueError as exc:
            raise ConsolidationRejected(f"operation {number}: {exc}") from None
    keys = [o.key for o in operations]
    if len(set(keys)) != len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ConsolidationRejected(f"key named by more than one operation: {twice[0]!r}")
    return operations


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _operation(item: object) -> Operation:
    if not isinstance(item, dict):
        raise ValueError("must be an object")
    unknown = sorted(set(item) - _FIELDS)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    op = item.get("op")
    if op not in OPS:
        raise ValueError(f"'op' must be one of {', '.join(OPS)}")
    if "key" not in item:
        raise ValueError("'key' is missing")
    value = item.get("value")
    if op in ("add", "update") or value is not None:
        value = check_value(value)
    category = item.get("category")
    reason = item.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ValueError("'reason' must be a string")
    return Operation(
        op=cast(Op, op),
        key=normalise_key(item["key"]),
        value=value,
        category=None if category is None else check_category(category),
        confidence=_unit(item, "confidence"),
        salience=_unit(item, "salience"),
        reason=(reason or "")[:200],
    )


def _unit(item: Mapping[str, Any], name: str) -> float:
    number = item.get(name)
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise ValueError(f"'{name}' must be a number from 0 to 1")
    if not 0 <= number <= 1:  # NaN and infinities fail too; a 400-digit int compares fine
        raise ValueError(f"'{name}' must be from 0 to 1, got {number!r}")
    return float(number)


# -- stage two: the write gate -----------------------------------------------------------------


def gate(operations: Sequence[Operation], existing: Sequence[Fact], embed: Embed) -> GateResult:
    """Split operations into accepted and rejected-with-a-reason; stateless, writes nothing.

    `existing` are the user's active facts; `embed` maps texts to L2-normalised rows (an
    `Embedder.embed_documents`), called once, and only when there is an add or update to check.
    Duplicates are looked for among the other keys' facts and the adds accepted before. A
    new key past the user's `MAX_CURRENT_FACTS` is rejected alone, so that the rest of the
    batch still applies (the store would refuse the whole transaction).
    """
    active = {f.key: f for f in existing}
    room = MAX_CURRENT_FACTS - len(active)
    checked = [(o, _rule_check(o, active.get(o.key))) for o in operations]
    candidates = [o for o, why in checked if why is None and o.op in ("add", "update")]
    vectors = _vectors(existing, candidates, embed)
    accepted: list[Operation] = []
    rejected: list[Rejection] = []
    seen: list[tuple[str, str, np.ndarray | None]] = [
        (f.key, _normal(f.value), vectors.get(id(f))) for f in existing
    ]
    for op, why in checked:
        if why is None and op.op in ("add", "update"):
            why = _duplicate(op, vectors.get(id(op)), seen)
            if why is None and op.key not in active:
                if room > 0:
                    room -= 1
                else:
                    why = f"the user holds {MAX_CURRENT_FACTS} current facts, the most"
            if why is None:
                seen.append((op.key, _normal(op.value or ""), vectors.get(id(op))))
        if why is None:
            accepted.append(op)
        else:
            rejected.append(Rejection(op, why))
    return GateResult(tuple(accepted), tuple(rejected))


def _rule_check(op: Operation, current: Fact | None) -> str | None:
    """Why `op` fails a rule of the gate that needs no embedding; None when it passes."""
    if op.confidence < MIN_CONFIDENCE:
        return f"confidence {op.confidence:g} is below {MIN_CONFIDENCE}"
    if op.salience < MIN_SALIENCE:
        return f"salience {op.salience:g} is below {MIN_SALIENCE}"
    if op.op in ("add", "update") and len(op.value or "") < MIN_VALUE_CHARS:
        return f"value is shorter than {MIN_VALUE_CHARS} characters"
    if current is None:
        return f"no active fact {op.key!r}" if op.op in _KEYED else None
    if op.op == "close_open_loop" and current.category != "open_loop":
        return f"{op.key!r} is a {current.category} fact, not an open loop"
    if current.pinned and op.op in ("update", "contradict", "close_open_loop"):
        return f"{op.key!r} is pinned: only the user changes it"
    if op.op in ("add", "update") and fact_rows.same_value(current.value, op.value or ""):
        return f"{op.key!r} already has this value"
    return None


def _duplicate(
    op: Operation, vector: np.ndarray | None, seen: Sequence[tuple[str, str, np.ndarray | None]]
) -> str | None:
    text = _normal(op.value or "")
    for key, other_text, other in seen:
        if key == op.key:
            continue  # the same key is an update (supersession), not a duplicate
        if text == other_text:
            return f"duplicate of {key!r} (same text)"
        if vector is not None and other is not None:
            cosine = float(vector @ other)
            if cosine >= DUPLICATE_COSINE:
                return f"duplicate of {key!r} (cosine {cosine:.2f})"
    return None


def _vectors(facts: Sequence[Fact], ops: Sequence[Operation], embed: Embed) -> dict[int, Any]:
    """Embeddings of each fact's and candidate's "key words: value" line, by object id."""
    if not ops:
        return {}
    items: list[Fact | Operation] = [*facts, *ops]
    rows = embed([f"{re.sub(r'[_:]+', ' ', i.key)}: {i.value}" for i in items])
    return {id(item): row for item, row in zip(items, rows, strict=True)}


def _normal(text: str) -> str:
    """Casefolded words without punctuation: "Lisbon, Portugal." and "lisbon portugal" match."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


# -- apply -------------------------------------------------------------------------------------


def apply_operations(
    store: Store, user_id: str, accepted: Sequence[Operation], now: float
) -> list[Fact]:
    """Apply gated operations in one write transaction; return the rows written or archived.

    add/update upsert with source "consolidation" and the model's confidence; reinforce keeps
    the value and expiry and raises confidence by 0.1 (at most 1); contradict and
    close_open_loop archive the fact. If any step fails (a fact named by reinforce,
    contradict or close_open_loop is gone, a bad value) the transaction rolls back and
    nothing at all is applied; ConsolidationRejected or ValueError says why.
    """
    with fact_rows.one_transaction(store) as joined:
        return [_apply_one(joined, user_id, op, now) for op in accepted]


def _apply_one(store: Store, user_id: str, op: Operation, now: float) -> Fact:
    if op.op in ("add", "update"):
        return fact_rows.upsert_fact(
            store,
            user_id,
            op.key,
            check_value(op.value),
            op.category,
            confidence=op.confidence,
            source=SOURCE,
            rule=f"{SOURCE}:{op.op}",
            now=now,
        )
    current = fact_rows.get_fact(store, user_id, op.key)
    if current is None:
        raise ConsolidationRejected(f"{op.op}: no active fact {op.key!r}")
    if op.op == "reinforce":
        return fact_rows.upsert_fact(
            store,
            user_id,
            op.key,
            current.value,
            None,
            confidence=min(1.0, current.confidence + REINFORCE_STEP),
            source=SOURCE,
            expires_at=current.expires_at,
            now=now,
        )
    if op.op == "close_open_loop" and current.category != "open_loop":
        raise ConsolidationRejected(f"close_open_loop: {op.key!r} is not an open loop")
    archived = fact_rows.archive_fact(store, user_id, op.key, now)
    assert archived is not None  # it was active a moment ago, inside this transaction
    return archived
