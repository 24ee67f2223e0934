"""Facts from an export: `moim memory import`, `POST /v1/memory/import`.

Every field of an exported fact row is checked (`checked_fact_row`) before any is stored:
whatever else a hand-edited or damaged file holds never reaches the SQL, and a row that
fails is skipped and logged (`restore_facts`), its history relinked by the exported ids.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from memory.facts.rules import (
    check_category,
    check_policy,
    check_status,
    check_value,
    normalise_key,
)
from memory.store import fact_rows
from memory.store.backend import StoreBackend as Store

logger = logging.getLogger(__name__)


def restore_facts(
    store: Store, user_id: str, items: Iterable[Mapping[str, Any]], capped: bool = True
) -> int:
    """Import exported fact rows (`{"type": "fact", ...}`); invalid rows are skipped and logged.

    Returns how many rows were added (see `fact_rows.import_facts`).
    """
    valid: list[dict[str, Any]] = []
    for item in items:
        try:
            valid.append(checked_fact_row(item))
        except (KeyError, ValueError, TypeError) as exc:
            logger.warning("fact %r not imported: %s", item.get("key"), exc)
    return fact_rows.import_facts(store, user_id, valid, capped)


def checked_fact_row(item: Mapping[str, Any]) -> dict[str, Any]:
    """Only known fields, each checked: whatever else a file holds never reaches the SQL."""
    created = _finite(item["created_at"])
    return {
        "id": _link(item.get("id")),
        "key": normalise_key(item["key"]),
        "value": check_value(item.get("value")),
        "category": check_category(item.get("category", "profile")),
        "policy": check_policy(item.get("policy", "speak")),
        "status": check_status(item.get("status", "active")),
        "pinned": item.get("pinned") is True,
        "confidence": _finite(item.get("confidence", 1.0)),
        "source": _text(item.get("source"), "import"),
        "rule": _text(item.get("rule"), None),
        "superseded_by": _link(item.get("superseded_by")),
        "created_at": created,
        "updated_at": _finite(item.get("updated_at", created)),
        "expires_at": _optional(item.get("expires_at")),
        "last_injected_at": _optional(item.get("last_injected_at")),
    }


def _finite(number: Any) -> float:
    """A finite float (JSON has no NaN or infinity to give back on export)."""
    try:
        value = float(number)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"{number!r} is not a finite number")
    return value


def _optional(number: Any) -> float | None:
    return None if number is None else _finite(number)


def _link(fact_id: Any) -> int | None:
    """An exported id, only ever used to relink history; anything but an int is no link."""
    return fact_id if isinstance(fact_id, int) and not isinstance(fact_id, bool) else None


def _text(text: Any, default: str | None) -> str | None:
    return text[:200] if isinstance(text, str) else default
