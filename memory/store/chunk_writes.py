"""SQLite's write of one message's chunks (`Store.add_chunks`, `Store.add_slices`).

`write_slice` stores a slice inside the caller's transaction and says what the lexical
index and the row caches must hear once that transaction commits (`Store._mirror`). An
indexing pass stores all of its slices in one transaction and mirrors them after it, in
order: one commit a pass rather than one a message (in-process, storing a turn's chunks took
0.58-0.60 ms of CPU against 1.74-1.77; docs/performance.md, "Load, seventh pass").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.store import lexical_sync, vector_table
from memory.store.backend import ChunkSlice
from memory.store.chunk_heads import Head
from memory.store.fts import fts_document, owner_token
from memory.store.portable_queries import ADD_TERM


@dataclass(frozen=True, slots=True)
class Written:
    """A slice stored: its chunks' ids, and for the mirror the generation its write set,
    the chunks it replaced, the lexical documents and the heads it added."""

    ids: list[int]
    user_id: str
    generation: int
    deleted: list[int]
    documents: list[tuple[int, str, str, str]]
    heads: list[Head]


def write_slice(db: Any, part: ChunkSlice) -> Written | None:
    """Store a message's chunks from position `part.start` on, their FTS rows and vectors
    (`vectors[i]` is `texts[i]`'s); with `last`, mark the message indexed. `words[i]` are
    `texts[i]`'s words for the user's vocabulary (a stem the user has is kept as it is).

    A large message is indexed in slices (memory/ingest/turns.py); a slice is stored only if
    the message holds exactly the `start` chunks before it, so none is stored twice (None:
    not stored, as for a message indexed or deleted meanwhile). `context` (the end of the
    turn before) goes into the first chunk's FTS row.
    """
    message, start = part.message, part.start
    row = db.execute(
        "SELECT indexed, content_hash, turn FROM messages WHERE id = ?", (message.id,)
    ).fetchone()
    if row is None or row[0]:
        return None  # indexed meanwhile (or deleted): nothing to do
    content_hash, turn = row[1], row[2]
    found = db.execute("SELECT id FROM chunks WHERE message_id = ?", (message.id,))
    old = [r[0] for r in found.fetchall()]
    if start == 0:
        vector_table.delete(db, old)
        db.execute("DELETE FROM chunks WHERE message_id = ?", (message.id,))
    elif len(old) != start:
        return None  # not the slice that comes next
    ids: list[int] = []
    documents: list[tuple[int, str, str, str]] = []
    heads: list[Head] = []
    for offset, text in enumerate(part.texts):
        position = start + offset
        cur = db.execute(
            "INSERT INTO chunks (message_id, user_id, session_id, role, name, "
            "position, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                message.id,
                message.user_id,
                message.session_id,
                message.role,
                message.name,
                position,
                text,
                message.created_at,
            ),
        )
        chunk_id = int(cur.lastrowid)
        before = fts_document(message.user_id, part.context) if position == 0 else ""
        terms = fts_document(message.user_id, text)
        db.execute(
            "INSERT INTO chunks_fts (rowid, terms, context) VALUES (?, ?, ?)",
            (chunk_id, terms, before),
        )
        ids.append(chunk_id)
        documents.append((chunk_id, owner_token(message.user_id), terms, before))
        heads.append(
            Head(
                chunk_id,
                message.id,
                message.session_id,
                message.role,
                message.name,
                message.created_at,
                content_hash,
                turn,
            )
        )
        if part.vectors is not None:
            vector_table.put(db, chunk_id, message.user_id, part.vectors[offset])
        if offset < len(part.words):
            rows = [
                (message.user_id, t.stem, t.word, chunk_id, t.vector) for t in part.words[offset]
            ]
            db.executemany(ADD_TERM.replace("%s", "?"), rows)
    if part.last:
        db.execute("UPDATE messages SET indexed = 1 WHERE id = ?", (message.id,))
    generation = lexical_sync.bump(db)
    deleted = old if start == 0 else []
    return Written(ids, message.user_id, generation, deleted, documents, heads)
