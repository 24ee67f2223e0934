"""Lexical search ranks by Okapi BM25 on both backends (memory/store/postgres.py, m003).

Real SQLite with its tantivy index, real PostgreSQL (`pg_server`, tests/conftest.py). The
reference below is BM25 as FTS5 and tantivy compute it: k1 1.2, b 0.75, IDF
ln(1 + (N - n + 0.5) / (n + 0.5)), a chunk's length counting its context's terms too.
"""

import math
import threading

import psycopg
import pytest

from memory.records import Message
from memory.store.fts import fts_document
from memory.store.pg_schema import MIGRATION_LOCK, MIGRATIONS, applied
from memory.store.postgres import PgStore
from memory.store.store import NewMessage, Store

NOW = 1_700_000_000.0
# Words that are their own Porter stems, so the reference can count them as written.
TEXTS = [
    "kayak kayak kayak kayak",
    "kayak marina",
    "marina harbor sunset lantern garden",
    "garden lantern",
    "kayak harbor sunset lantern garden island river",
]


@pytest.fixture
def store(store_backend, tmp_path, request):
    if store_backend == "postgres":
        opened = PgStore(request.getfixturevalue("pg_database")())
    else:
        opened = Store(tmp_path / "moim.db", lexical_index=True)
    opened.ensure_vectors("test/hash-8", 8)
    yield opened
    opened.close()


@pytest.fixture
def pg_store(pg_database):
    opened = PgStore(pg_database())
    opened.ensure_vectors("test/hash-8", 8)
    yield opened
    opened.close()


def add_turn(store, user_id, text, context=""):
    """Store one message alone in its session, indexed as one chunk; return the chunk id."""
    session_id = f"s-{text}"
    key = f"{user_id}-{session_id}"
    row = NewMessage(key, key, "user", None, text, "{}", None, 5, False, NOW)
    (message_id,) = store.insert_messages(user_id, session_id, [row])
    message = Message(message_id, user_id, session_id, "user", None, text, NOW, False)
    (chunk_id,) = store.add_chunks(message, [text], None, context=context)
    store.commit_lexical()
    return chunk_id


def bm25(docs, query, context_weight):
    """(index, score) of `docs` ((own words, context words) each) for `query`, best first."""
    n = len(docs)
    mean = sum(len(own) + len(ctx) for own, ctx in docs) / n
    scores = {}
    for term in dict.fromkeys(query):
        holding = [i for i, (own, ctx) in enumerate(docs) if term in own or term in ctx]
        idf = math.log(1 + (n - len(holding) + 0.5) / (len(holding) + 0.5))
        for i in holding:
            own, ctx = docs[i]
            tf = own.count(term) + context_weight * ctx.count(term)
            norm = 1.2 * (1 - 0.75 + 0.75 * (len(own) + len(ctx)) / mean)
            scores[i] = scores.get(i, 0.0) + idf * tf * 2.2 / (tf + norm)
    return sorted(scores.items(), key=lambda s: (-s[1], s[0]))


def test_the_reference_words_are_their_own_stems():
    for text in [*TEXTS, "island river"]:
        stems = [w.split("_", 1)[1] for w in fts_document("ana", text).split()]
        assert stems == text.split()


@pytest.mark.both_backends
def test_lexical_scores_are_bm25_over_the_users_chunks(store):
    ids = [add_turn(store, "ana", text) for text in TEXTS]
    ids.append(add_turn(store, "ana", "harbor kayak", context="island river kayak"))
    docs = [(t.split(), []) for t in TEXTS] + [
        ("harbor kayak".split(), "island river kayak".split())
    ]

    for query in (["kayak", "marina"], ["kayak", "island", "lantern"], ["sunset"]):
        found = store.lexical_search("ana", query, 10, 1.0)
        expected = bm25(docs, query, 1.0)
        assert [i for i, _ in found] == [ids[i] for i, _ in expected], query
        assert [s for _, s in found] == pytest.approx([s for _, s in expected], rel=1e-5)


def test_postgres_weighs_context_terms_by_the_context_weight(pg_store):
    ids = [add_turn(pg_store, "ana", text) for text in TEXTS]
    ids.append(add_turn(pg_store, "ana", "harbor kayak", context="island river kayak"))
    docs = [(t.split(), []) for t in TEXTS] + [
        ("harbor kayak".split(), "island river kayak".split())
    ]

    found = pg_store.lexical_search("ana", ["kayak", "river"], 10, 0.5)
    expected = bm25(docs, ["kayak", "river"], 0.5)
    assert [i for i, _ in found] == [ids[i] for i, _ in expected]
    assert [s for _, s in found] == pytest.approx([s for _, s in expected], rel=1e-5)


def test_postgres_counts_documents_and_lengths_per_user(pg_store):
    for text in TEXTS:
        add_turn(pg_store, "ana", text)
    before = pg_store.lexical_search("ana", ["kayak", "marina"], 10, 0.7)
    for n in range(30):  # another user, talking of kayaks at length
        add_turn(pg_store, "bob", f"kayak kayak marina island river {n}")

    assert pg_store.lexical_search("ana", ["kayak", "marina"], 10, 0.7) == before


def test_postgres_postings_go_with_their_chunks(pg_store):
    for text in TEXTS:
        add_turn(pg_store, "ana", text)
        add_turn(pg_store, "bob", text)
    before = pg_store.lexical_search("bob", ["kayak", "garden"], 10, 0.7)

    pg_store.delete_user("ana")
    assert pg_store.read("SELECT count(*) FROM chunk_terms WHERE user_id = ?", ["ana"])[0][0] == 0
    assert pg_store.lexical_search("ana", ["kayak"], 10, 0.7) == []
    assert pg_store.lexical_search("bob", ["kayak", "garden"], 10, 0.7) == before

    pg_store.reset_index()
    assert pg_store.read("SELECT count(*) FROM chunk_terms")[0][0] == 0
    for message in pg_store.unindexed_messages():
        pg_store.add_chunks(message, [message.content], None)
    again = pg_store.lexical_search("bob", ["kayak", "garden"], 10, 0.7)
    assert [s for _, s in again] == pytest.approx([s for _, s in before])


def _migrate_to_m002(url):
    with psycopg.connect(url, autocommit=True) as conn:
        for name, migration in MIGRATIONS[:2]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS _moim_migrations "
                    "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION)"
                )
                migration(conn)
                conn.execute("INSERT INTO _moim_migrations VALUES (%s, %s)", [name, NOW])


def test_m003_gives_chunks_indexed_before_it_their_postings(pg_database):
    url = pg_database()
    _migrate_to_m002(url)
    with psycopg.connect(url, autocommit=True) as conn:  # chunks as m002's store wrote them
        for n, text in enumerate(TEXTS):
            message_id = conn.execute(
                "INSERT INTO messages (user_id, session_id, message_key, content_hash, role, "
                "content, payload, created_at, indexed) VALUES ('ana', %s, %s, %s, 'user', %s, "
                "'{}', %s, 1) RETURNING id",
                [f"s{n}", f"k{n}", f"h{n}", text, NOW],
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO chunks (message_id, user_id, session_id, role, position, text, "
                "created_at, terms) VALUES (%s, 'ana', %s, 'user', 0, %s, %s, "
                "setweight(to_tsvector('simple', %s), 'A') || "
                "setweight(to_tsvector('simple', ''), 'B'))",
                [message_id, f"s{n}", text, NOW, text],
            )

    migrated = PgStore(url)
    found = migrated.lexical_search("ana", ["kayak", "marina"], 10, 0.7)
    migrated.close()

    expected = bm25([(t.split(), []) for t in TEXTS], ["kayak", "marina"], 0.7)
    assert [s for _, s in found] == pytest.approx([s for _, s in expected], rel=1e-5)


def test_replicas_starting_together_apply_m003_once(pg_database):
    url = pg_database()
    _migrate_to_m002(url)
    opened, failed = [], []

    def start():
        try:
            opened.append(PgStore(url))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            failed.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failed == [] and len(opened) == 3
    with psycopg.connect(url) as conn:
        assert applied(conn) == [name for name, _ in MIGRATIONS]
    for store in opened:
        store.close()
