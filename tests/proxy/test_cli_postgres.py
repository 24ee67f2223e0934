"""The operator's verbs on Postgres: migrate, stats, reindex, export/import, and
`moim memory copy` from a SQLite file into Postgres without losing a message or a fact."""

import json

from click.testing import CliRunner

from memory import MemoryLayer, Settings, Turn, redact_url
from proxy.cli import main


def _fill(layer):
    for n in range(3):
        layer.remember(
            Turn(
                "ines",
                f"s{n}",
                "gpt-4o-mini",
                ({"role": "user", "content": f"My locker number is {n}{n}7 at the gym"},),
                {"role": "assistant", "content": f"Noted: locker {n}{n}7."},
                1_700_000_000.0 + n,
            )
        )
    layer.set_fact("ines", "city", "Braga")
    layer.set_fact("ines", "city", "Porto")  # history: Braga superseded
    layer.set_fact("bo", "diet", "vegetarian")


def test_copy_moves_every_message_and_fact_from_sqlite_to_postgres(tmp_path, pg_database, embedder):
    source = tmp_path / "old.db"
    layer = MemoryLayer(Settings(db_path=source), embedder_factory=lambda _: embedder)
    _fill(layer)
    before = {u: list(layer.export(u)) for u in ("ines", "bo")}
    url = pg_database()
    runner = CliRunner()
    copied = runner.invoke(main, ["memory", "copy", "--from", f"sqlite://{source}", "--to", url])
    assert copied.exit_code == 0, copied.output
    assert "copied 6 messages (6 new) and 3 fact rows of 2 users" in copied.output
    again = runner.invoke(main, ["memory", "copy", "--from", f"sqlite://{source}", "--to", url])
    assert again.exit_code == 0, again.output  # idempotent: nothing doubles, and it says so
    assert "copied 6 messages (0 new)" in again.output
    target = MemoryLayer(Settings(db_url=url), embedder_factory=lambda _: embedder)
    try:
        for user, items in before.items():
            after = list(target.export(user))
            key = lambda i: (i["type"], i.get("content") or i.get("value"), i["created_at"])  # noqa: E731
            assert sorted(map(key, after)) == sorted(map(key, items))
        assert target.store.count_unindexed() == 0
        assert [f.value for f in target.fact_history("ines", "city")] == ["Braga", "Porto"]
        hits = target.search("ines", "which locker at the gym?")
        assert "My locker number is 117 at the gym" in {h.chunk.text for h in hits}
    finally:
        target.close()


def test_migrate_stats_reindex_export_import_on_postgres(pg_database, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = pg_database()
    env = {"MOIM_DB": url}
    runner = CliRunner()
    migrated = runner.invoke(main, ["migrate"], env=env)
    assert migrated.exit_code == 0 and "schema up to date" in migrated.output
    line = json.dumps(
        {
            "type": "message",
            "session_id": "s",
            "message_key": "k#1",
            "content_hash": "k",
            "role": "user",
            "content": "I park in space 42",
            "payload": {"role": "user", "content": "I park in space 42"},
            "created_at": 1_700_000_000.0,
        }
    )
    imported = runner.invoke(main, ["memory", "import", "--user", "kim"], input=line, env=env)
    assert imported.exit_code == 0, imported.output
    stats = runner.invoke(main, ["stats", "--user", "kim", "--json"], env=env)
    assert json.loads(stats.stdout)["messages"] == 1
    reindexed = runner.invoke(main, ["reindex"], env=env)
    assert reindexed.exit_code == 0 and "re-indexed 1 messages" in reindexed.output
    exported = runner.invoke(main, ["memory", "export", "--user", "kim"], env=env)
    assert json.loads(exported.stdout.splitlines()[0])["content"] == "I park in space 42"


def test_users_on_postgres_lists_counts_and_last_activity(pg_database, embedder):
    url = pg_database()
    layer = MemoryLayer(Settings(db_url=url), embedder_factory=lambda _: embedder)
    try:
        _fill(layer)
    finally:
        layer.close()

    listed = CliRunner().invoke(main, ["users", "--json"], env={"MOIM_DB": url})

    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    counts = {r["user_id"]: (r["messages"], r["sessions"], r["facts"]) for r in rows}
    assert counts == {"ines": (6, 3, 1), "bo": (0, 0, 1)}  # Braga superseded: one active
    assert all(isinstance(r["last_active"], float) for r in rows)


def test_delete_with_vacuum_on_postgres_says_it_is_postgres_own_work(pg_database, embedder):
    url = pg_database()
    layer = MemoryLayer(Settings(db_url=url), embedder_factory=lambda _: embedder)
    try:
        _fill(layer)
    finally:
        layer.close()

    args = ["memory", "delete", "--user", "ines", "--yes", "--vacuum"]
    deleted = CliRunner().invoke(main, args, env={"MOIM_DB": url})

    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout == "deleted 6 messages of ines\n"  # no "database file rewritten"
    assert "VACUUM FULL" in deleted.stderr


def test_a_postgres_database_a_newer_moim_migrated_is_refused(pg_database, tmp_path, monkeypatch):
    """After a rollback, the older moim opened a schema it does not know without a word."""
    import psycopg

    monkeypatch.chdir(tmp_path)
    url = pg_database()
    runner = CliRunner()
    assert runner.invoke(main, ["migrate"], env={"MOIM_DB": url}).exit_code == 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO _moim_migrations VALUES ('m999_from_the_future', 0)")

    for args in (["migrate"], ["stats", "--user", "kim"]):
        refused = runner.invoke(main, args, env={"MOIM_DB": url})
        assert refused.exit_code == 1, refused.output
        assert refused.stderr == (
            f"Error: {redact_url(url)} was upgraded by a newer moim: its schema is at "
            "m999_from_the_future, this moim's at m007_left_messages; upgrade moim again, or "
            "restore the backup taken before `moim migrate`\n"
        )
