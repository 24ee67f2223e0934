"""SQLite's reads on recall's path: chunks, their neighbours, both searches, vectors, words.

`SqliteReads` is the part of `Store` (memory/store/store.py) that recall reads through. Many
rows come back packed into one (`Database.read_one` says why); chunks read lately come from
RAM (`ChunkRows`); once verified, the tantivy index answers lexical searches instead of FTS5
(memory/store/lexical_index.py). Every query filters on `user_id` in the SQL.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from memory.records import Chunk, Message, Term
from memory.store import lexical_sync, vector_table
from memory.store.chunk_heads import ChunkHeads, Columns
from memory.store.chunk_rows import ChunkRows
from memory.store.database import Database
from memory.store.fts import fts_match, fts_stems
from memory.store.left_messages import LEFT
from memory.store.lexical_index import LexicalIndex
from memory.store.message_rows import NOT_AN_EXAMPLE, message_from_row

# Messages whose neighbours one statement reads (two SELECTs each; SQLite allows 500 in a
# compound SELECT).
_ANCHORS_PER_READ = 100
_MESSAGE_JSON = (
    "json_array(id, user_id, session_id, role, name, content, "
    "printf('%!.17g', created_at), partial)"
)


class SqliteReads(Database):
    """The SQLite store's reads for recall (set up by `Store.__init__`)."""

    rows: ChunkRows  # rows recall read lately
    heads: ChunkHeads  # large users' chunks but their text
    lexical: LexicalIndex | None  # the tantivy index, when this process holds it
    mirrored_generation: int  # the chunks' generation that index holds
    _stale: bool  # it missed another process's change: rebuilt at the next commit
    dim: int | None  # the vectors' width, once `ensure_vectors` ran

    def stored_keys(self, user_id: str, session_id: str) -> list[str]:
        """The message keys a session already holds, in the order stored (to line a resent
        history up with them, `memory.ingest.identity.resent_keys`)."""
        packed = self.read_one(
            "SELECT json_group_array(message_key) FROM (SELECT message_key FROM messages "
            "WHERE user_id = ? AND session_id = ? ORDER BY id)",
            (user_id, session_id),
        )
        return list(json.loads(packed))

    def unindexed_messages(self, limit: int = 256) -> list[Message]:
        """Messages of any user not yet chunked and embedded, oldest first."""
        packed = self.read_one(
            f"SELECT json_group_array({_MESSAGE_JSON}) FROM ("
            "SELECT * FROM messages WHERE indexed = 0 ORDER BY id LIMIT ?)",
            (limit,),
        )
        rows = sorted(json.loads(packed))  # by id: json_group_array keeps no order of its own
        return [message_from_row([*row[:6], float(row[6]), row[7]]) for row in rows]

    def vocabulary(self, user_id: str, after: int = 0) -> list[Term]:
        """The user's vocabulary rows with an id above `after`, oldest first (one packed row
        read: see `read_one`)."""
        packed = self.read_one(
            "SELECT group_concat(id || ' ' || stem || ' ' || hex(vector) || ' ' || word, "
            "char(10)) FROM (SELECT * FROM vocabulary WHERE user_id = ? AND id > ? ORDER BY id)",
            (user_id, after),
        )
        rows = (line.split(" ", 3) for line in packed.split("\n")) if packed else ()
        return [Term(stem, word, bytes.fromhex(vector), int(i)) for i, stem, vector, word in rows]

    def chunks(self, user_id: str, ids: Sequence[int]) -> dict[int, Chunk]:
        """The user's chunks with these ids (ids of other users are silently absent), in
        ascending id order; rows read lately come from RAM (`ChunkRows`)."""
        if not ids:
            return {}
        with self._errors():
            generation = lexical_sync.generation(self.connection())
        found, missing, ticket = self.rows.get(user_id, ids, generation)
        if missing:
            read = self._read_chunks(user_id, missing)
            self.rows.put(user_id, read, ticket)
            found.update(read)
        return {i: found[i] for i in sorted(found)}

    def chunk_heads(
        self, user_id: str, ids: Sequence[int], present: Collection[str], hold: bool
    ) -> tuple[dict[int, Chunk], set[int]]:
        """`chunks`, but for a user whose heads are held in RAM (`memory.store.chunk_heads`;
        `hold` asks for them: the caller knows the user is large) without their text and
        hash, but for a chunk whose message's hash may be in `present`; and the ids that
        came so. `chunks` gives those ids' whole rows."""
        if not hold or not ids:
            return self.chunks(user_id, ids), set()
        with self._errors():
            generation = lexical_sync.generation(self.connection())
        got = self.heads.get(user_id, ids, generation, present)
        if got is None:  # not held (being read), or not at the database's generation
            return self.chunks(user_id, ids), set()
        heads, whole = got
        found = {**heads, **self.chunks(user_id, whole)} if whole else heads
        return {i: found[i] for i in sorted(found)}, set(heads)

    def _read_heads(self, user_id: str) -> tuple[int, Columns]:
        """A user's heads and the generation they are of, in one read transaction (WAL: no
        writer waits for it); on the heads' own thread, with its own connection."""
        with self._errors():
            db = self.connection()
            db.execute("BEGIN")
            try:
                generation = lexical_sync.generation(db)
                (count,) = db.execute(
                    "SELECT count(*) FROM chunks WHERE user_id = ?", (user_id,)
                ).fetchone()
                cursor = db.execute(
                    "SELECT c.id, c.message_id, c.session_id, c.role, c.name, c.created_at, "
                    "m.content_hash, m.turn FROM chunks c JOIN messages m ON m.id = c.message_id "
                    "WHERE c.user_id = ? ORDER BY c.id",
                    (user_id,),
                )
                columns = Columns.read(count, iter(lambda: cursor.fetchmany(4096), []))
            finally:
                db.execute("COMMIT")
        return generation, columns

    def _read_chunks(self, user_id: str, ids: Sequence[int]) -> dict[int, Chunk]:
        # One JSON row, not a row per chunk (see `read_one`). The time goes as text with all
        # 17 digits (`%!.17g`): JSON would round it to 15, SQLite's plain %g to 16.
        marks = ",".join("?" * len(ids))
        packed = self.read_one(
            "SELECT json_group_array(json_array(c.id, c.message_id, c.user_id, c.session_id, "
            "c.role, c.name, c.text, printf('%!.17g', c.created_at), m.content_hash, m.turn)) "
            "FROM chunks c JOIN messages m ON m.id = c.message_id "
            f"WHERE c.user_id = ? AND c.id IN ({marks})",
            [user_id, *ids],
        )
        found = {}
        for row in json.loads(packed) if packed else []:
            row[7] = float(row[7])
            found[row[0]] = Chunk(*row)
        return found

    def neighbours(
        self,
        user_id: str,
        message_ids: Sequence[int],
        around: int,
        exclude_hashes: Collection[str] = (),
        sessions: Mapping[int, str] | None = None,
    ) -> dict[int, list[Message]]:
        """For each of these messages (by id): up to `around` user/assistant turns on each
        side of it in its session, and itself, oldest first; one statement for them all.

        Turns whose content hash is in `exclude_hashes` (present in the request) are left out.
        `sessions` gives the messages' session ids when the caller knows them (a recalled
        chunk carries its message's): a message not found there, as the user's turn, then has
        no entry. Else they are read first, in one small statement.
        """
        given = sessions is not None
        if sessions is None:
            sessions = self._sessions_of(user_id, message_ids)
        anchors = [(mid, sessions[mid]) for mid in message_ids if mid in sessions]
        found: dict[int, list[Message]] = {}
        for start in range(0, len(anchors), _ANCHORS_PER_READ):
            found.update(
                self._neighbours(
                    user_id, anchors[start : start + _ANCHORS_PER_READ], around, exclude_hashes
                )
            )
        if given:  # a message gone, or not the user's: its session's turns are no neighbours
            return {mid: turns for mid, turns in found.items() if any(m.id == mid for m in turns)}
        return found

    def _sessions_of(self, user_id: str, message_ids: Sequence[int]) -> dict[int, str]:
        """The session of each of these messages that is the user's."""
        if not message_ids:
            return {}
        marks = ",".join("?" * len(message_ids))
        return dict(
            self.read(
                f"SELECT id, session_id FROM messages WHERE user_id = ? AND id IN ({marks})",
                [user_id, *message_ids],
            )
        )

    def _neighbours(
        self,
        user_id: str,
        anchors: Sequence[tuple[int, str]],
        around: int,
        exclude_hashes: Collection[str],
    ) -> dict[int, list[Message]]:
        # The session is given, not looked up a side, and the user's and session's ids are
        # not read back: 0.48 → 0.36 ms of CPU for the ~5 passages of a recall (u1k).
        same_session = (
            "SELECT ? AS anchor, id, role, name, content, created_at, partial, content_hash "
            "FROM messages WHERE user_id = ? AND session_id = ? AND role IN ('user', 'assistant') "
            f"AND indexed != {LEFT} AND {NOT_AN_EXAMPLE}"
        )
        parts: list[str] = []
        params: list[Any] = []
        for mid, session_id in anchors:
            parts.append(f"SELECT * FROM ({same_session} AND id < ? ORDER BY id DESC LIMIT ?)")
            parts.append(f"SELECT * FROM ({same_session} AND id >= ? ORDER BY id LIMIT ?)")
            params += [mid, user_id, session_id, mid, around]
            params += [mid, user_id, session_id, mid, around + 1]
        # A few rows a passage: read as rows (packing them as JSON, as `chunks` does for ~80,
        # cost 20% more here).
        rows = self.read(" UNION ALL ".join(parts), params) if parts else []
        session_of = dict(anchors)
        found: dict[int, list[Message]] = {mid: [] for mid, _ in anchors}
        for row in sorted(rows, key=lambda row: (row[0], row[1])):  # by anchor, then id
            anchor, mid, role, name, content, created_at, partial, content_hash = row
            if content_hash not in exclude_hashes or mid == anchor:
                session_id = session_of[anchor]
                message = Message(
                    mid, user_id, session_id, role, name, content, created_at, bool(partial)
                )
                found[anchor].append(message)
        return {mid: messages for mid, messages in found.items() if messages}

    def lexical_search(
        self, user_id: str, terms: Sequence[str], limit: int, context_weight: float
    ) -> list[tuple[int, float]]:
        """(chunk id, BM25) of the user's best `limit` chunks holding any of `terms` (from
        `memory.store.fts`), best first; higher is better.

        The tantivy index answers once verified (memory/store/lexical_index.py: a context
        term counts as much as the chunk's own there); else FTS5, where a term in a chunk's
        context (the end of the turn before it) counts `context_weight` times as much as one
        in its own text.
        """
        match = fts_match(user_id, terms)
        if match is None:
            return []
        index = self.lexical
        if index is not None and index.ready and self._lexical_current():
            return index.search(fts_stems(user_id, terms), limit)  # context weighs 1 there
        # The terms are the user's own (see memory/store/fts.py); the join re-checks the user id.
        # It runs on the top `limit` only (a materialised CTE): joining every match before
        # sorting cost 22 ms instead of 15 for a 100k-chunk user (5k matches).
        # The hits come back as one "id score,…" string, one row (see `read_one`), and are
        # sorted here: group_concat keeps no order of its own.
        packed = self.read_one(
            "WITH found AS MATERIALIZED ("
            "SELECT rowid AS id, bm25(chunks_fts, 1.0, ?) AS score FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY score LIMIT ?) "
            "SELECT group_concat(id || ' ' || printf('%!.17g', score)) FROM ("
            "SELECT c.id, found.score FROM found JOIN chunks c ON c.id = found.id "
            "WHERE c.user_id = ? ORDER BY found.score)",
            (float(context_weight), match, limit, user_id),
        )
        if not packed:
            return []
        hits = [(float(score), int(i)) for i, score in (h.split(" ") for h in packed.split(","))]
        return [(i, -score) for score, i in sorted(hits)]

    def _lexical_current(self) -> bool:
        """Whether the lexical index holds every change to chunks SQLite has: False when
        another process (a `moim memory import` or `delete` beside the server) changed them,
        until this one's next write has it rebuilt (`Store._mirror` sees the gap); FTS5, in the
        file itself, answers meanwhile. A change of this process's own, committed but not
        yet mirrored, can read as one too, for that moment."""
        with self._errors():
            current = lexical_sync.generation(self.connection()) == self.mirrored_generation
        return current and not self._stale

    def dense_search(self, user_id: str, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the user's nearest chunks, via sqlite-vec."""
        with self._errors():
            return vector_table.nearest(self.connection(), user_id, vector, limit)

    def user_vectors(
        self, user_id: str, half_from: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """All of a user's chunk ids (ascending) and vectors; the matrix may have spare rows.
        Its rows are float16 when the user has at least `half_from` vectors, else float32."""
        with self._errors():
            return vector_table.partition(self.connection(), user_id, self.dim or 0, half_from)

    def read_user_vectors(self, user_id: str, sink: vector_table.RowSink) -> None:
        """Hand all of a user's chunk ids and vectors (float32) to `sink`, batch by batch."""
        with self._errors():
            vector_table.read_partition(self.connection(), user_id, self.dim or 0, sink)

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of some of the user's chunks."""
        with self._errors():
            return vector_table.some(self.connection(), user_id, ids)
