"""A user's messages as JSON lines and back: `GET /v1/memory/export`, `POST …/import`.

Ids round-trip: an imported message keeps its exported id when that id is free, so chunk and
fact references stay meaningful. Only messages move; chunks, FTS rows and vectors are derived
and rebuilt by indexing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memory.store.backend import StoreBackend as Store
from memory.store.left_messages import LEFT


def export_messages(store: Store, user_id: str) -> Iterator[dict[str, Any]]:
    """The user's messages as JSON-ready dicts, in storage order (ids included)."""
    rows = store.read(
        "SELECT id, session_id, message_key, content_hash, role, name, content, payload, "
        "model, tokens, partial, created_at, indexed FROM messages WHERE user_id = ? ORDER BY id",
        (user_id,),
    )
    keys = (
        "id session_id message_key content_hash role name content payload model tokens "
        "partial created_at indexed"
    ).split()
    for row in rows:
        item = dict(zip(keys, row, strict=True))
        item["payload"] = json.loads(item["payload"])
        item["partial"] = bool(item["partial"])
        if item.pop("indexed") == LEFT:  # a branch the conversation left: it stays left
            item["left"] = True
        yield item


def import_message(store: Store, user_id: str, item: dict[str, Any]) -> bool:
    """Store one exported message for `user_id`, keeping its id when that id is free."""
    with store.write() as db:
        taken = (
            item.get("id") is not None
            and db.execute("SELECT 1 FROM messages WHERE id = ?", (item["id"],)).fetchone()
        )
        cur = db.execute(
            "INSERT OR IGNORE INTO messages (id, user_id, session_id, message_key, "
            "content_hash, role, name, content, payload, model, tokens, partial, created_at, "
            "indexed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                None if taken else item.get("id"),
                user_id,
                item["session_id"],
                item["message_key"],
                item["content_hash"],
                item["role"],
                item.get("name"),
                item["content"],
                json.dumps(item.get("payload", {}), ensure_ascii=False),
                item.get("model"),
                int(item.get("tokens") or 0),
                int(bool(item.get("partial", False))),
                float(item["created_at"]),
                LEFT if item.get("left") else 0,
            ),
        )
        return bool(cur.rowcount > 0)
