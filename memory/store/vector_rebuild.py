"""Re-embedding every chunk after the embedding model changed, without re-chunking.

The store records which model made its vectors (`meta`: `embedding_model`, `embedding_dim`).
When a process starts with another model, vectors of two models must never be compared, so
`ensure_vectors` drops the vector table, creates it again at the new width, and starts a
rebuild here: chunks and their lexical rows stay (they do not depend on the model); only
their vectors are made again, in the background, a step at a time (`memory/ingest/reembed.py`).

The rebuild is one `meta` row, `vector_rebuild`, holding JSON:

    {"from": old model, "to": new model, "end": highest chunk id at the switch,
     "user": "", "chunk": 0, "total": chunks to re-embed, "done": re-embedded so far}

Chunks with ids above `end` were indexed after the switch, by the new model. The others are
re-embedded in (user id, chunk id) order, so users become whole one after another; `user` and
`chunk` are the last chunk done. A user is ready for dense recall once none of their chunks up
to `end` lies after that cursor (`user_ready`, index probes); until then their recall is
lexical only (memory/layer.py). Every comparison of user ids is made by the database, in the
same collation as its `ORDER BY`.

Each step saves its vectors and moves the cursor in one transaction, and only if the cursor is
still where the step read it (a compare-and-set on the row): two Postgres replicas may run
steps at once, and the slower one's work is dropped, never stored twice or out of order.
The row is deleted once no chunk is left: the rebuild is over.

The SQL is written once, in SQLite's spelling, and runs on Postgres through
`memory/store/pg_sql.py`; each backend writes the vectors themselves (`write_vectors`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from memory.store.backend import StoreBackend

KEY = "vector_rebuild"
# Bump when the vector table's definition, or what is embedded for a chunk, changes: vectors
# are then rebuilt from messages. 3: a message's first chunk is embedded after the previous
# turn's tail (memory/ingest/embedding_inputs.py). 4: the same run fills the user's vocabulary
# (memory/recall/vocabulary.py), so a store from before gets one.
LAYOUT = "4"


def reembed_only(current: dict[str, str]) -> bool:
    """True when the vectors were made by another model with today's layout: re-embedding
    the chunks is enough (a store with no vectors yet, or another layout, re-indexes)."""
    return (
        current.get("vector_layout") == LAYOUT
        and "embedding_model" in current
        and "embedding_dim" in current
    )


@dataclass(frozen=True, slots=True)
class VectorRebuild:
    """A rebuild under way: from which model to which, how far it is."""

    old_model: str
    new_model: str
    end: int  # chunks with higher ids were embedded by the new model when indexed
    user_id: str  # the last chunk re-embedded: (user_id, chunk_id); ("", 0) before the first
    chunk_id: int
    total: int
    done: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "from": self.old_model,
                "to": self.new_model,
                "end": self.end,
                "user": self.user_id,
                "chunk": self.chunk_id,
                "total": self.total,
                "done": self.done,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> VectorRebuild:
        data = json.loads(text)
        return cls(
            str(data["from"]),
            str(data["to"]),
            int(data["end"]),
            str(data["user"]),
            int(data["chunk"]),
            int(data["total"]),
            int(data["done"]),
        )


@dataclass(frozen=True, slots=True)
class PendingChunk:
    """A chunk whose vector is to be made again: what its embedding input needs."""

    id: int
    message_id: int
    user_id: str
    session_id: str
    role: str
    name: str | None
    position: int
    text: str
    created_at: float


def tags(model: str, dim: int) -> dict[str, str]:
    """The `meta` rows that say what made a store's vectors."""
    return {"embedding_model": model, "embedding_dim": str(dim), "vector_layout": LAYOUT}


def switch(db: Any, current: dict[str, str], model: str, dim: int) -> tuple[bool, bool]:
    """What another model or layout does to the rows derived from messages, in a transaction
    of `ensure_vectors` that has dropped the vector table (`db` takes SQLite's `?`): the old
    model's word vectors go; with today's layout the chunks are re-embedded in the
    background, else they go too and every message is to be indexed again.

    Returns (a rebuild was started, the messages are to be re-indexed)."""
    db.execute("DELETE FROM vocabulary")  # word vectors of the old model
    if reembed_only(current):
        old = f"{current['embedding_model']} ({current['embedding_dim']})"
        return start(db, old, f"{model} ({dim})") is not None, False
    db.execute("DELETE FROM chunks")
    db.execute("UPDATE messages SET indexed = 0 WHERE indexed = 1")
    clear(db)
    return False, True


def start(db: Any, old_model: str, new_model: str) -> VectorRebuild | None:
    """Begin re-embedding every chunk, in a transaction of `ensure_vectors` (`db` takes
    SQLite's `?`); None when there is no chunk to re-embed."""
    end, total = db.execute("SELECT coalesce(max(id), 0), count(*) FROM chunks").fetchone()
    clear(db)
    if not total:
        return None
    rebuild = VectorRebuild(old_model, new_model, int(end), "", 0, int(total), 0)
    db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (KEY, rebuild.to_json()))
    return rebuild


def clear(db: Any) -> None:
    """Forget any rebuild under way (every chunk is about to be indexed again, or none is
    left)."""
    db.execute("DELETE FROM meta WHERE key = ?", (KEY,))


def state(store: StoreBackend) -> VectorRebuild | None:
    """The rebuild under way, or None."""
    rows = store.read("SELECT value FROM meta WHERE key = ?", (KEY,))
    return VectorRebuild.from_json(rows[0][0]) if rows else None


def user_ready(store: StoreBackend, user_id: str, rebuild: VectorRebuild) -> bool:
    """True when every chunk of the user has its vector from the new model: the user comes
    before the cursor's (in the database's collation), or none of theirs up to `end` lies
    after it. Two index probes at most."""
    lower = rebuild.chunk_id
    if user_id != rebuild.user_id:
        later = store.read("SELECT CAST(? AS TEXT) > CAST(? AS TEXT)", (user_id, rebuild.user_id))
        if not later[0][0]:
            return True
        lower = 0
    rows = store.read(
        "SELECT 1 FROM chunks WHERE user_id = ? AND id > ? AND id <= ? LIMIT 1",
        (user_id, lower, rebuild.end),
    )
    return not rows


def pending(store: StoreBackend, rebuild: VectorRebuild, limit: int) -> list[PendingChunk]:
    """The next `limit` chunks to re-embed, in (user id, chunk id) order: the rest of the
    cursor's user, then the users after it (each read starts at its place in the index)."""
    rows = store.read(
        f"SELECT {_COLUMNS} FROM chunks WHERE user_id = ? AND id > ? AND id <= ? "
        "ORDER BY id LIMIT ?",
        (rebuild.user_id, rebuild.chunk_id, rebuild.end, limit),
    )
    if len(rows) < limit:
        rows += store.read(
            f"SELECT {_COLUMNS} FROM chunks WHERE user_id > ? AND id <= ? "
            "ORDER BY user_id, id LIMIT ?",
            (rebuild.user_id, rebuild.end, limit - len(rows)),
        )
    return [
        PendingChunk(
            int(r[0]),
            int(r[1]),
            str(r[2]),
            str(r[3]),
            str(r[4]),
            r[5],
            int(r[6]),
            str(r[7]),
            float(r[8]),
        )
        for r in rows
    ]


_COLUMNS = "id, message_id, user_id, session_id, role, name, position, text, created_at"


def save(
    store: StoreBackend,
    rebuild: VectorRebuild,
    chunks: Sequence[PendingChunk],
    vectors: np.ndarray | None,
) -> list[PendingChunk] | None:
    """Store the re-embedded `chunks`' vectors and move the cursor past them, or end the
    rebuild when `chunks` is empty; in one transaction.

    Returns the chunks whose vectors were stored (a chunk deleted meanwhile, its user
    forgotten, is skipped), or None when another process moved the cursor first (nothing
    is stored: that process did this work).
    """
    with store.write() as db:
        if not chunks:
            moved = db.execute(
                "DELETE FROM meta WHERE key = ? AND value = ?", (KEY, rebuild.to_json())
            )
            return [] if moved.rowcount else None
        last = chunks[-1]
        after = replace(
            rebuild, user_id=last.user_id, chunk_id=last.id, done=rebuild.done + len(chunks)
        )
        moved = db.execute(
            "UPDATE meta SET value = ? WHERE key = ? AND value = ?",
            (after.to_json(), KEY, rebuild.to_json()),
        )
        if not moved.rowcount:
            return None
        marks = ",".join("?" * len(chunks))
        found = db.execute(
            f"SELECT id FROM chunks WHERE id IN ({marks})", [c.id for c in chunks]
        ).fetchall()
        alive = {int(row[0]) for row in found}
        kept = [i for i, c in enumerate(chunks) if c.id in alive]
        if kept and vectors is not None:
            rows = [(chunks[i].id, chunks[i].user_id) for i in kept]
            store.write_vectors(db, rows, vectors[kept])
        return [chunks[i] for i in kept]
