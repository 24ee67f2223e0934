"""A top-k lexical index beside the database: tantivy (block-max WAND), derived from SQLite.

FTS5 scores every posting of every query term: 11 ms for a 100k-chunk user, most of a
recall. tantivy skips the blocks of postings that cannot reach the top k (block-max WAND),
0.5 ms for the same search (docs/performance.md). It indexes what `chunks_fts` holds: a
chunk's owner-prefixed, stemmed terms (`memory.store.fts.fts_document`) and those of the
turn before it, the context; BM25 ranks them (k1 1.2, b 0.75, as FTS5's). The two go into
one field, so a context term counts as much as one of the chunk's own (FTS5: 0.7 of it). In
a field of its own the context had its own document frequencies: its terms, in fewer
documents, weighed more than the chunk's own, and LoCoMo lost 1.8 / 1.2 points (hit / all,
bench/tune_recall.py, all ten); in one field it is within 0.3 of FTS5. FTS5 stays the
durable record and answers whenever this index is not verified.

Never silently stale. Every transaction that changes `chunks` increments the generation
kept in SQLite (`meta.lexical_generation`, `Store`). This index records, in a file beside
its segments, the generation of its last commit. At start the two must agree, with the
chunk count; else the index is rebuilt from SQLite in the background (in batches under the
store's write lock, so no change slips between a read and its mirror) while FTS5 answers.
A crash between a SQLite commit and this index's commit leaves an older generation in the
file: the next start rebuilds.

A chunk is written as a delete of its id then an add (an upsert), so a rebuild racing new
turns never holds a chunk twice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import tantivy

logger = logging.getLogger(__name__)

# Bump when the schema or what is indexed changes: the index is then rebuilt.
_LAYOUT = 1
_STATE = "moim-state.json"
# tantivy's smallest writer arena is 15 MB; one indexing thread (the writer indexes a batch
# of turns at a time, and recall needs the other core).
_HEAP_BYTES = 15_000_000


def _schema() -> Any:
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field(
        "id", fast=True, indexed=True
    )  # i64: tantivy-py deletes by an int term only on i64 fields
    builder.add_text_field("owner", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("terms", tokenizer_name="moim", index_option="freq")
    return builder.build()


class LexicalIndex:
    """A tantivy index of every user's chunks, mirroring `chunks_fts`.

    Writes (`put`, `delete_ids`, `delete_owner`, `clear`, `commit`) are called by `Store`
    with its write lock held; `search` from any thread. `ready` is False until the index is
    verified against SQLite or rebuilt: callers then use FTS5.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ready = False
        self.building = False
        self.closed = False  # after `close`, writes are ignored (a rebuild under way stops)
        self._dirty = False
        self._rollback_failed = False  # see `_rollback`
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # users' words: owner only
        self._schema = _schema()
        try:
            self._index = self._open()
        except ValueError:  # a layout tantivy cannot read: start empty, rebuild
            logger.warning("lexical index at %s unreadable: rebuilding it", directory)
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(mode=0o700, parents=True)
            self._index = self._open()
        self._writer = self._index.writer(heap_size=_HEAP_BYTES, num_threads=1)
        self._lock = threading.Lock()  # tantivy's writer: one call at a time

    def _open(self) -> Any:
        index = tantivy.Index(self._schema, path=str(self.directory))
        analyzer = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        index.register_tokenizer("moim", analyzer)
        return index

    # -- verification ----------------------------------------------------------------------

    def recorded_generation(self) -> int | None:
        """The SQLite generation of this index's last commit (None: unknown, rebuild)."""
        try:
            state = json.loads((self.directory / _STATE).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or state.get("layout") != _LAYOUT:
            return None
        generation = state.get("generation")
        return generation if isinstance(generation, int) else None

    def lost(self) -> bool:
        """Whether its directory was removed or made unreadable under moim (searches would
        read the segments still open, and the next commit fail)."""
        return not self.closed and not os.access(self.directory, os.R_OK | os.W_OK | os.X_OK)

    def count(self) -> int:
        """Chunks held (as of the last commit)."""
        self._index.reload()
        return int(self._index.searcher().num_docs)

    def verify(self, generation: int, chunks: int) -> bool:
        """Ready when the file's generation and the chunk count match SQLite's, or when both
        are new and empty (a new store: nothing to rebuild; its generation is recorded)."""
        recorded, count = self.recorded_generation(), self.count()
        fresh = recorded is None and chunks == 0 and count == 0
        self.ready = fresh or (recorded == generation and count == chunks)
        if fresh:
            self.commit(generation)
        return self.ready

    # -- writes (the store's write lock held) ----------------------------------------------

    def put(self, rows: Iterable[tuple[int, str, str, str]]) -> None:
        """Add or replace chunks: (chunk id, owner token, terms, context terms)."""
        with self._lock:
            if self.closed:
                return
            for chunk_id, owner, terms, context in rows:
                self._writer.delete_documents_by_term("id", chunk_id)
                document = tantivy.Document()
                document.add_integer("id", chunk_id)
                document.add_text("owner", owner)
                document.add_text("terms", f"{terms} {context}" if context else terms)
                self._writer.add_document(document)
                self._dirty = True

    def delete_ids(self, chunk_ids: Sequence[int]) -> None:
        with self._lock:
            if self.closed:
                return
            for chunk_id in chunk_ids:
                self._writer.delete_documents_by_term("id", chunk_id)
                self._dirty = True

    def delete_owner(self, owner: str) -> None:
        with self._lock:
            if self.closed:
                return
            self._writer.delete_documents_by_term("owner", owner)
            self._dirty = True

    def clear(self) -> None:
        with self._lock:
            if self.closed:
                return
            # Pending adds survive delete_all_documents (still in the indexing thread):
            # they are dropped first, or a rebuild would hold them twice.
            self._rollback()
            self._writer.delete_all_documents()
            self._dirty = True

    def forget_state(self) -> None:
        """Drop the recorded generation first thing in a rebuild: a crash mid-way rebuilds.

        Under the writer's lock, after `building` is set: a commit under way either wrote
        its state before (deleted here) or sees `building` and writes none."""
        with self._lock, contextlib.suppress(FileNotFoundError):
            (self.directory / _STATE).unlink()

    def commit(self, generation: int) -> None:
        """Make the writes searchable and durable; record `generation` unless rebuilding."""
        with self._lock:
            if self.closed:
                return
            if self._dirty:
                self._writer.commit()
                self._index.reload()
                self._dirty = False
            if self.building or not self.ready:
                return
            state = json.dumps({"layout": _LAYOUT, "generation": generation})
            scratch = self.directory / (_STATE + ".tmp")
            scratch.write_text(state)
            os.replace(scratch, self.directory / _STATE)

    # -- reads -----------------------------------------------------------------------------

    def search(self, stems: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """(chunk id, BM25) of the best `limit` chunks holding any of `stems` (owner-prefixed
        terms, as `fts_stems` gives them), best first; ties by ascending id, as FTS5's."""
        should = tantivy.Occur.Should
        clauses = [
            (should, tantivy.Query.term_query(self._schema, "terms", stem, "freq"))
            for stem in stems
        ]
        if not clauses:
            return []
        searcher = self._index.searcher()
        found = searcher.search(tantivy.Query.boolean_query(clauses), limit, count=False)
        ids = searcher.fast_field_values("id", [address for _, address in found.hits])
        hits = [(float(score), int(i)) for (score, _), i in zip(found.hits, ids, strict=True)]
        return [(i, score) for score, i in sorted(hits, key=lambda h: (-h[0], h[1]))]

    def held_ids(self) -> list[int]:
        """Every chunk id the index holds (as of the last commit), ascending: for checks."""
        self._index.reload()
        searcher = self._index.searcher()
        found = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False)
        return sorted(searcher.fast_field_values("id", [address for _, address in found.hits]))

    def terms_of(self, owner: str) -> list[str]:
        """Every term of `owner`'s the dictionaries hold, deleted documents' included (as of
        the last commit): for checks that a forgotten user's words are gone."""
        self._index.reload()
        found = self._index.searcher().terms_with_prefix("terms", owner + "_")
        return sorted(str(term) for term, _ in found)

    def collect_garbage(self) -> None:
        """Delete the segment files no commit uses any more (a rebuild's old segments)."""
        with self._lock:
            if not self.closed:
                self._writer.garbage_collect_files()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed, self.ready = True, False
            try:
                self._rollback()  # uncommitted writes are lost, as after a crash
                self._writer.wait_merging_threads()  # and the writer's lock is released
            except ValueError as exc:  # its files gone: the next start rebuilds it anyway
                logger.warning("lexical index at %s not rolled back: %s", self.directory, exc)

    def _rollback(self) -> None:
        """Drop the writes not committed. A rollback that failed (the index's files removed
        under moim) leaves the writer without its lock, and tantivy panics on the next one,
        an exception no handler expects: that one raises a ValueError instead."""
        if self._rollback_failed:
            raise ValueError("the lexical index's writer failed to roll back before")
        try:
            self._writer.rollback()
        except ValueError:
            self._rollback_failed = True
            raise
