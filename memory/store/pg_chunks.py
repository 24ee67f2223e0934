"""Writing a message's chunks on Postgres, and pgvector's text and binary forms of a vector.

`add_chunks` is `PgStore.add_chunks`'s transaction: each chunk's stemmed terms go into its
`terms` tsvector (its own at weight A, the previous turn's tail at weight B; a trigger copies
them into the user's postings), its vector into `chunk_vectors`, its words into the user's
vocabulary. A slice is stored only if the message holds exactly the chunks before it.

The words are not written here but returned (`term_rows`) and written by `add_terms` in one
pass sorted by stem, as the last statement of the transaction: two replicas indexing at once
insert the same unique (user, stem) pairs, and in any other order each can wait on a word the
other holds (Postgres found 21 deadlocks in one two-replica run, each costing a batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory.records import Message, Term
from memory.store.fts import fts_document
from memory.store.portable_queries import ADD_TERM


def vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of a vector ("[0.1,0.2,…]"), with float32's full precision."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


def parse_vector(data: bytes) -> np.ndarray:
    """A vector from pgvector's binary form (`vector_send`): two uint16 (the dimension, then
    a reserved word), then big-endian float4s. Read as bytes, not as text: parsing the text
    form of the 80 vectors a recall fetches took 15-25 ms; this takes about one."""
    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


def add_chunks(
    conn: Any,
    message: Message,
    texts: Sequence[str],
    vectors: np.ndarray | None,
    context: str,
    start: int,
    last: bool,
) -> list[int]:
    """`PgStore.add_chunks` on a connection already in a transaction, without the words."""
    row = conn.execute(
        "SELECT indexed FROM messages WHERE id = %s FOR UPDATE", [message.id]
    ).fetchone()
    if row is None or row[0]:
        return []  # indexed meanwhile (or deleted)
    if start == 0:
        conn.execute("DELETE FROM chunks WHERE message_id = %s", [message.id])
    else:
        held = conn.execute(
            "SELECT count(*) FROM chunks WHERE message_id = %s", [message.id]
        ).fetchone()[0]
        if held != start:
            return []  # not the slice that comes next
    ids: list[int] = []
    for offset, text in enumerate(texts):
        position = start + offset
        own = " ".join(w.split("_", 1)[1] for w in fts_document(message.user_id, text).split())
        before = ""
        if position == 0 and context:
            before = " ".join(
                w.split("_", 1)[1] for w in fts_document(message.user_id, context).split()
            )
        chunk_id = conn.execute(
            "INSERT INTO chunks (message_id, user_id, session_id, role, name, position, text, "
            "created_at, terms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
            "setweight(to_tsvector('simple', %s), 'A') || setweight(to_tsvector('simple', %s), 'B')"
            ") RETURNING id",
            [
                message.id,
                message.user_id,
                message.session_id,
                message.role,
                message.name,
                position,
                text,
                message.created_at,
                own,
                before,
            ],
        ).fetchone()[0]
        ids.append(int(chunk_id))
        if vectors is not None:
            conn.execute(
                "INSERT INTO chunk_vectors (chunk_id, user_id, embedding) "
                "VALUES (%s, %s, %s::vector)",
                [chunk_id, message.user_id, vector_text(vectors[offset])],
            )
    if last:
        conn.execute("UPDATE messages SET indexed = 1 WHERE id = %s", [message.id])
    return ids


TermRow = tuple[str, str, str, int, bytes]  # user, stem, word, chunk id, vector


def term_rows(
    message: Message, ids: Sequence[int], words: Sequence[Sequence[Term]]
) -> list[TermRow]:
    """The vocabulary rows of the chunks `ids` (`words[i]` are the words of chunk `ids[i]`)."""
    return [
        (message.user_id, t.stem, t.word, chunk_id, t.vector)
        for chunk_id, chunk_words in zip(ids, words, strict=False)  # words may be absent
        for t in chunk_words
    ]


def add_terms(conn: Any, rows: Sequence[TermRow]) -> None:
    """Add words to their users' vocabularies, the first row of a stem keeping it, in (user,
    stem) order: every transaction takes the unique keys in one order, so none waits on
    another that waits on it."""
    first: dict[tuple[str, str], TermRow] = {}
    for row in rows:
        first.setdefault((row[0], row[1]), row)
    if first:
        with conn.cursor() as cursor:
            cursor.executemany(ADD_TERM, [first[key] for key in sorted(first)])
