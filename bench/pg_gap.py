"""Where Postgres's LoCoMo recall differs from SQLite's: each search compared, each swapped.

Both stores must hold the same replay (`bench/locomo.py --db PATH` for SQLite, `--db-url URL`
for Postgres; or `moim memory copy`). For every question (categories 1-4) the script compares
the two backends' dense and lexical top `--k` (chunks matched across stores by user, session,
message key and position), then scores the block `MemoryLayer.recall` builds on each backend
and on Postgres with one search answered by SQLite, so each search's share of a gap shows.
The SQLite file is copied; the Postgres database is used as it is (recall marks facts
injected). Query vectors come from `bench/tune_recall.py`'s cache.

    PYTHONPATH=. python bench/pg_gap.py --db /tmp/locomo.db --db-url postgresql://…/locomo

With the IDF-weighted `ts_rank_cd` Postgres had before BM25 (issue 17), the dense top 80
agreed with SQLite's for every question, the lexical top 10 for 61 % of chunks, and Postgres
answering lexical searches through SQLite closed the whole gap (0.837 / 0.703 -> 0.861 /
0.724); answering dense searches through it changed nothing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sqlean
import threadpoolctl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.locomo import load, parse_range  # noqa: E402
from bench.tune_recall import CachedEmbedder, ask, score  # noqa: E402
from memory import Settings  # noqa: E402
from memory.layer import MemoryLayer  # noqa: E402
from memory.store.fts import search_terms  # noqa: E402

_KEY_SQL = (
    "SELECT c.id, c.user_id, m.session_id, m.message_key, c.position FROM chunks c "
    "JOIN messages m ON m.id = c.message_id"
)


def chunk_keys(layer: MemoryLayer) -> dict[int, tuple[str, str, str, int]]:
    """Chunk id → what names the same chunk in the other store."""
    return {int(i): (u, s, k, int(p)) for i, u, s, k, p in layer.store.read(_KEY_SQL)}


class Swapped:
    """A store answering one search from another store (ids translated), the rest itself."""

    def __init__(self, own: Any, other: Any, to_own: dict[int, int], search: str) -> None:
        self._own, self._other, self._to_own, self._search = own, other, to_own, search

    def __getattr__(self, name: str) -> Any:
        if name == self._search:
            return self._translated
        return getattr(self._own, name)

    def _translated(self, *args: Any) -> list[tuple[int, float]]:
        found = getattr(self._other, self._search)(*args)
        return [(self._to_own[i], s) for i, s in found if i in self._to_own]


def dense(layer: MemoryLayer, user: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    if layer.settings.vector_search == "db":
        return layer.store.dense_search(user, vector, k)
    return layer.index.search(user, vector, k)


def overlap(a: Sequence[tuple[int, float]], b: Sequence[tuple[int, float]], n: int) -> float:
    """Share of `a`'s top n (ids already translated) also in `b`'s top n."""
    top_a, top_b = {i for i, _ in a[:n]}, {i for i, _ in b[:n]}
    return len(top_a & top_b) / max(len(top_a), 1)


def run(layer: MemoryLayer, convs: list[Any], label: str) -> list[dict[str, Any]]:
    started = time.perf_counter()
    out = []
    for conv in convs:
        for q in conv.questions:
            if q.category in (1, 2, 3, 4) and (q.evidence or q.audited):
                q.result = ask(layer, conv, q)
                out.append(q.result)
    qs = [q for c in convs for q in c.questions if q.category in (1, 2, 3, 4)]
    n, hit, every = score(qs, False)
    _, ahit, aevery = score(qs, True)
    _, lhit, levery = score([q for q in qs if q.conv >= 5], False)
    ms = np.percentile([r["ms"] for r in out], [50, 95])
    print(
        f"{label:<34} hit/all {hit:.3f}/{every:.3f} audited {ahit:.3f}/{aevery:.3f} last five "
        f"{lhit:.3f}/{levery:.3f} (n {n}) | recall p50 {ms[0]:.1f} ms "
        f"p95 {ms[1]:.1f} | {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="SQLite replay")
    parser.add_argument("--db-url", required=True, help="Postgres replay")
    parser.add_argument("--conversations", default="0-9")
    parser.add_argument("--k", type=int, default=80)
    parser.add_argument("--skip", default="", help="comma list: compare,swap")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")
    convs = load(parse_range(args.conversations), None)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "locomo.db"
        shutil.copyfile(args.db, db)
        lite_settings = Settings(db_path=db)
        stored = (
            sqlean.connect(str(db))
            .execute("SELECT value FROM meta WHERE key = 'embedding_model'")
            .fetchone()
        )
        embedder = CachedEmbedder(lite_settings, stored[0] if stored else "")
        lite = MemoryLayer(lite_settings, lambda _: embedder)  # type: ignore[arg-type,return-value]
        lite.wait_for_lexical_index()
        pg = MemoryLayer(Settings(db_url=args.db_url), lambda _: embedder)  # type: ignore[arg-type,return-value]
        assert lite.embedder and pg.embedder  # the stores learn the vectors' width
        lite_keys, pg_keys = chunk_keys(lite), chunk_keys(pg)
        by_key = {key: i for i, key in pg_keys.items()}
        lite_to_pg = {i: by_key[key] for i, key in lite_keys.items() if key in by_key}
        print(
            f"chunks: SQLite {len(lite_keys)}, Postgres {len(pg_keys)}, matched {len(lite_to_pg)}"
        )
        skip = set(args.skip.split(","))
        if "compare" not in skip:
            compare(lite, pg, lite_to_pg, embedder, convs, args.k)
        if "swap" not in skip:
            run(lite, convs, "SQLite")
            base = pg.store
            run(pg, convs, "Postgres")
            for search in ("lexical_search", "dense_search"):
                pg.store = Swapped(base, lite.store, lite_to_pg, search)  # type: ignore[assignment]
                run(pg, convs, f"Postgres, SQLite's {search}")
            pg.store = base
        embedder.save()


def compare(
    lite: MemoryLayer,
    pg: MemoryLayer,
    lite_to_pg: dict[int, int],
    embedder: Any,
    convs: list[Any],
    k: int,
) -> None:
    """Top-k agreement of each search, question by question."""
    weight = Settings().lexical_context_weight
    stats: dict[str, list[float]] = {"dense": [], "lexical": [], "lexical10": [], "dense10": []}
    for conv in convs:
        for q in conv.questions:
            if q.category not in (1, 2, 3, 4):
                continue
            vector = embedder.embed_query(q.text)
            a = [(lite_to_pg[i], s) for i, s in dense(lite, conv.sample_id, vector, k)]
            b = dense(pg, conv.sample_id, vector, k)
            stats["dense"].append(overlap(a, b, k))
            stats["dense10"].append(overlap(a, b, 10))
            terms = search_terms(q.text)
            a = [
                (lite_to_pg[i], s)
                for i, s in lite.store.lexical_search(conv.sample_id, terms, k, weight)
            ]
            b = pg.store.lexical_search(conv.sample_id, terms, k, weight)
            if a:
                stats["lexical"].append(overlap(a, b, k))
                stats["lexical10"].append(overlap(a, b, 10))
    for name, values in stats.items():
        print(f"{name}: mean top-k overlap {np.mean(values):.3f} over {len(values)} questions")


if __name__ == "__main__":
    main()
