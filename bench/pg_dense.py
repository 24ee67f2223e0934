"""Ways to make Postgres's per-user dense search fast for a big user: measured side by side.

Run from the repository root:

    /work/venv/bin/python bench/pg_dense.py [--pgserver DIR | --db-url URL] [--big 100000]
        [--queries 60] [--k 80]

One table shaped as moim's `chunk_vectors` (chunk id, user id, vector(384)) holds users of
1k, 10k and `--big` chunks and 100 users of 100; vectors are 300 real embeddings of
synthetic chunks (bench/overhead.py's `texts`) plus noise, as `bench/overhead.py`'s populate
makes them, and the queries are real embeddings of fresh questions. For each user size it
times (p50/p95 ms, one statement per query, no prepared statements, as moim sends them) and
scores (recall of the exact top k) each candidate:

- exact: today's `ORDER BY embedding <=> q LIMIT k` over the user's rows (found by index);
- halfvec: the same over a stored halfvec column;
- bq-N: the Hamming top N of a stored `binary_quantize` column read from a covering index,
  rescored exactly;
- hnsw-ef / hnsw-half-ef: an HNSW index (on the vector, or on its halfvec) searched with
  `hnsw.iterative_scan = relaxed_order`, the planner choosing per user between it and the
  user index.

It also times the index builds and inserting 2,000 rows with and without the HNSW index.
Prints a markdown table; asserts nothing (STYLE.md 18).

Found (2026-11-25, 2 cores shared with other jobs, pgvector 0.8.2, 121k rows, k 80; p50 ms
and recall for the 10k / 100k users): exact 7.2 / 64.7 at 1.000; halfvec 11.2 / 47.7 at
1.000 / 0.999; bq-2000 7.3 / 30.7 at 0.968 / 0.693, bq-4000 12.8 / 44.9 at 0.997 / 0.843;
HNSW (m 16, ef_construction 64; built in 29 s, inserts 2.4 ms a row against 0.35) at
ef_search 1000: 13.4 / 8.0 at 0.545 / 0.578, and with m 32, ef_construction 200 (71 s,
4.1 ms a row) 9.0 / 7.2 at 0.842 / 0.927; on sparser data (`--pool 1000 --noise 0.05`)
m 16 reached 0.955 at 100k for 26 ms, the 10k user 0.83 for 31 ms against the exact 9.
The planner chose the user index and an exact sort for users of 100 and 1k rows, HNSW for
10k and 100k. Nothing reached recall 0.98 at 100k faster than the exact scan, and the 10k
user lost both ways, so moim keeps the exact scan. What helped it was the server's memory:
with `shared_buffers` at 1GB instead of pgserver's 128MB (the 190 MB table then stays in
Postgres's cache) one backend's exact scan of the 100k user went from 107 to 61 ms.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402

from bench.harness import ensure_database, pgserver_url  # noqa: E402
from bench.overhead import TEMPLATES, WORDS, texts  # noqa: E402
from memory.embedding import FastEmbedder  # noqa: E402
from memory.store.pg_chunks import vector_text  # noqa: E402

DIM = 384
SMALL_USERS = 100


def sizes(big: int) -> dict[str, int]:
    """The measured users and their chunk counts (the 100 small ones come on top)."""
    return {"u1k": 1_000, "u10k": 10_000, f"u{big // 1000}k": big}


def pool_vectors(
    embedder: FastEmbedder, rng: np.random.Generator, n: int, pool: int, noise: float
) -> np.ndarray:
    """n chunk vectors: one of `pool` real embeddings plus noise, unit length."""
    centres = embedder.embed_documents(texts(rng, pool, 25, 40))
    rows = centres[rng.integers(pool, size=n)] + rng.normal(0, noise, (n, DIM)).astype(np.float32)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def questions(embedder: FastEmbedder, rng: np.random.Generator, n: int) -> np.ndarray:
    """n real query embeddings of fresh questions, as moim's recall embeds them."""
    asked = [TEMPLATES[i % len(TEMPLATES)].format(*rng.choice(WORDS[:3000], 3)) for i in range(n)]
    return np.asarray([embedder.embed_query(q) for q in asked], dtype=np.float32)


def load(conn: Any, users: dict[str, int], vectors: np.ndarray) -> None:
    """(Re)create the table and COPY every user's rows into it, users interleaved in time."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute("DROP TABLE IF EXISTS dense_bench")
    conn.execute(
        "CREATE TABLE dense_bench (chunk_id BIGSERIAL PRIMARY KEY, user_id TEXT NOT NULL, "
        f"embedding vector({DIM}) NOT NULL)"
    )
    conn.execute("CREATE INDEX dense_bench_by_user ON dense_bench (user_id)")
    owners = np.concatenate([np.full(n, i) for i, n in enumerate(users.values())])
    np.random.default_rng(1).shuffle(owners)  # chunks arrive from everyone at once
    names = list(users)
    with conn.cursor().copy("COPY dense_bench (user_id, embedding) FROM STDIN") as copy:
        buffer = io.StringIO()
        for owner, vector in zip(owners, vectors, strict=True):
            buffer.write(f"{names[owner]}\t{vector_text(vector)}\n")
        copy.write(buffer.getvalue())
    conn.execute("VACUUM (ANALYZE) dense_bench")


def side_tables(conn: Any) -> float:
    """Seconds to build the halfvec copy of the table (as if moim stored halfvec) and the
    binary-quantized one (its index covering the bits, so the Hamming pass reads no heap)."""
    statements = [
        "DROP TABLE IF EXISTS dense_half, dense_bits",
        f"CREATE TABLE dense_half AS SELECT chunk_id, user_id, embedding::halfvec({DIM}) AS half "
        "FROM dense_bench",
        "CREATE INDEX dense_half_by_user ON dense_half (user_id)",
        "CREATE TABLE dense_bits AS SELECT chunk_id, user_id, "
        f"binary_quantize(embedding)::bit({DIM}) AS bits FROM dense_bench",
        "CREATE INDEX dense_bits_by_user ON dense_bits (user_id) INCLUDE (chunk_id, bits)",
        "VACUUM (ANALYZE) dense_half",
        "VACUUM (ANALYZE) dense_bits",
    ]
    return sum(timed(conn, sql) for sql in statements)


def timed(conn: Any, sql: str) -> float:
    started = time.perf_counter()
    conn.execute(sql)
    return time.perf_counter() - started


EXACT = (
    "SELECT chunk_id FROM dense_bench WHERE user_id = %(u)s "
    "ORDER BY embedding <=> %(q)s::vector, chunk_id LIMIT %(k)s"
)
HALFVEC = (
    "SELECT chunk_id FROM dense_half WHERE user_id = %(u)s "
    "ORDER BY half <=> %(q)s::halfvec, chunk_id LIMIT %(k)s"
)
BQ = (
    "WITH near AS MATERIALIZED (SELECT chunk_id FROM dense_bits WHERE user_id = %(u)s "
    "  ORDER BY bits <~> binary_quantize(%(q)s::vector) LIMIT %(n)s) "
    "SELECT d.chunk_id FROM dense_bench d JOIN near USING (chunk_id) "
    "ORDER BY d.embedding <=> %(q)s::vector, d.chunk_id LIMIT %(k)s"
)
HNSW = (
    "WITH near AS MATERIALIZED (SELECT chunk_id, embedding <=> %(q)s::vector AS d "
    "  FROM dense_bench WHERE user_id = %(u)s ORDER BY embedding <=> %(q)s::vector LIMIT %(k)s) "
    "SELECT chunk_id FROM near ORDER BY d, chunk_id"
)
HNSW_HALF = (
    "WITH near AS MATERIALIZED (SELECT chunk_id, embedding <=> %(q)s::vector AS d "
    f"  FROM dense_bench WHERE user_id = %(u)s ORDER BY embedding::halfvec({DIM}) "
    f"  <=> %(q)s::halfvec({DIM}) LIMIT %(k)s) "
    "SELECT chunk_id FROM near ORDER BY d, chunk_id"
)


def run(
    conn: Any, sql: str, user: str, queries: list[str], k: int, extra: dict[str, Any]
) -> tuple[list[float], list[list[int]]]:
    """Each query's milliseconds (statement sent as text, so planned for its user) and ids."""
    times, found = [], []
    for q in queries:
        started = time.perf_counter()
        rows = conn.execute(sql, {"u": user, "q": q, "k": k, **extra}, prepare=False).fetchall()
        times.append((time.perf_counter() - started) * 1000)
        found.append([int(r[0]) for r in rows])
    return times, found


def recall(found: list[list[int]], truth: list[list[int]]) -> float:
    hits = sum(len(set(f) & set(t)) for f, t in zip(found, truth, strict=True))
    return hits / max(1, sum(len(t) for t in truth))


def plan(conn: Any, sql: str, user: str, q: str, k: int, extra: dict[str, Any]) -> str:
    """The scan the planner picked for this user: the first index named in its plan."""
    rows = conn.execute("EXPLAIN " + sql, {"u": user, "q": q, "k": k, **extra}).fetchall()
    text = " ".join(r[0] for r in rows)
    for index in ("hnsw_half", "hnsw", "bits_by_user", "half_by_user", "by_user"):
        if index in text:
            return index
    return "seq scan"


def insert_ms(conn: Any, vectors: np.ndarray) -> float:
    """Milliseconds per row inserting these vectors one statement each for a user of their
    own, then rolled back (and vacuumed away, so no measured user's scan meets them)."""
    with conn.transaction(force_rollback=True):
        started = time.perf_counter()
        for v in vectors:
            conn.execute(
                "INSERT INTO dense_bench (user_id, embedding) VALUES (%s, %s::vector)",
                ["inserted", vector_text(v)],
            )
        spent = (time.perf_counter() - started) * 1000 / len(vectors)
    conn.execute("VACUUM dense_bench")
    return spent


class Bench:
    """One loaded table, its queries and their exact answers; `rows` gathers the table."""

    def __init__(self, conn: Any, args: argparse.Namespace, queries: list[str]) -> None:
        self.conn, self.args, self.queries = conn, args, queries
        self.users = [*sizes(args.big), "s0"]
        self.truth = {u: run(conn, EXACT, u, queries, args.k, {})[1] for u in self.users}
        self.rows: list[str] = []

    def measure(self, name: str, sql: str, extra: dict[str, Any] | None = None) -> None:
        """Time and score one method for each measured user, after five warming queries."""
        extra, k = extra or {}, self.args.k
        for user in self.users:
            run(self.conn, sql, user, self.queries[:5], k, extra)
            times, found = run(self.conn, sql, user, self.queries, k, extra)
            p50, p95 = statistics.median(times), float(np.percentile(times, 95))
            scan = plan(self.conn, sql, user, self.queries[0], k, extra)
            score = recall(found, self.truth[user])
            self.rows.append(f"| {name} | {user} | {p50:.1f} | {p95:.1f} | {score:.3f} | {scan} |")
            print(self.rows[-1], flush=True)

    def quantized(self) -> None:
        """The exact scan over halfvec, and binary quantization rescored exactly."""
        print(f"halfvec and bit tables with their indexes: {side_tables(self.conn):.1f} s")
        self.measure("halfvec", HALFVEC)
        for n in (1000, 2000, 4000):
            self.measure(f"bq-{n}", BQ, {"n": n})

    def hnsw(self, index: str, column: str, sql: str, name: str, plain_insert: float) -> None:
        """Build an HNSW index, time inserts with it, search it at three breadths, drop it."""
        built = timed(
            self.conn,
            f"CREATE INDEX {index} ON dense_bench USING hnsw ({column}) "
            f"WITH (m = {self.args.m}, ef_construction = {self.args.ef_construction})",
        )
        self.conn.execute("ANALYZE dense_bench")
        per_row = insert_ms(self.conn, self.args.spare)
        print(f"{index}: built in {built:.1f} s; insert {per_row:.2f} ms/row ({plain_insert:.2f})")
        self.conn.execute("SET hnsw.iterative_scan = relaxed_order")
        for ef in (100, 400, 1000):
            self.conn.execute(f"SET hnsw.ef_search = {ef}")
            self.measure(f"{name}-{ef}", sql)
        self.conn.execute(f"DROP INDEX {index}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pgserver", type=Path, default=Path("/tmp/moim-pgdense/data"))
    parser.add_argument("--db-url")
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--k", type=int, default=80)
    parser.add_argument("--pool", type=int, default=300, help="real embeddings noise is added to")
    parser.add_argument("--noise", type=float, default=0.02, help="per-dimension noise (sd)")
    parser.add_argument("--m", type=int, default=16, help="HNSW links per node")
    parser.add_argument("--ef-construction", type=int, default=64, help="HNSW build breadth")
    parser.add_argument("--skip-exact-variants", action="store_true", help="HNSW only")
    args = parser.parse_args()
    url = ensure_database(args.db_url or pgserver_url(args.pgserver, "moim_pgdense"))
    rng, embedder = np.random.default_rng(42), FastEmbedder()
    users = sizes(args.big) | {f"s{i}": 100 for i in range(SMALL_USERS)}
    vectors = pool_vectors(embedder, rng, sum(users.values()) + 2000, args.pool, args.noise)
    args.spare = vectors[-2000:]  # inserted (and rolled back) to time inserts
    queries = [vector_text(q) for q in questions(embedder, rng, args.queries)]
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        load(conn, users, vectors[:-2000])
        print(f"loaded {sum(users.values())} rows in {time.perf_counter() - started:.1f} s")
        plain_insert = insert_ms(conn, args.spare)
        bench = Bench(conn, args, queries)
        bench.measure("exact", EXACT)
        if not args.skip_exact_variants:
            bench.quantized()
        conn.execute("SET maintenance_work_mem = '512MB'")
        bench.hnsw("dense_bench_hnsw", "embedding vector_cosine_ops", HNSW, "hnsw", plain_insert)
        half = f"(embedding::halfvec({DIM})) halfvec_cosine_ops"
        bench.hnsw("dense_bench_hnsw_half", half, HNSW_HALF, "hnsw-half", plain_insert)
    print("\n| method | user | p50 ms | p95 ms | recall@k | scan |\n|---|---|---|---|---|---|")
    print("\n".join(bench.rows))


if __name__ == "__main__":
    main()
