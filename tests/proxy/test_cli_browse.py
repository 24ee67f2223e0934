"""The CLI that finds things: `moim users`, `moim memory search` with each hit's scores, text
for people and `--json` for scripts, and progress bars on stderr only when it is a terminal
(proxy/cli_browse.py, proxy/cli_common.py)."""

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory import MemoryLayer, Settings, Turn
from proxy.cli import main

REPO = Path(__file__).resolve().parents[2]
KAYAK = "I keep my red kayak at the marina in Porto, berth number 14"
PASTA = "My carbonara uses guanciale, pecorino and plenty of black pepper"


def said(layer, user, session, text, at):
    message = {"role": "user", "content": text}
    layer.remember(Turn(user, session, "gpt-4o-mini", (message,), None, at))


@pytest.fixture
def db(tmp_path, embedder):
    """alice: two sessions and a fact; bob: one message; both stored at known times."""
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"), embedder_factory=lambda _: embedder)
    said(layer, "alice", "s1", KAYAK, 1_700_000_000.0)
    said(layer, "alice", "s2", PASTA, 1_700_000_100.0)
    said(layer, "bob", "s3", "Bob likes chess openings", 1_600_000_000.0)
    layer.set_fact("alice", "city", "Porto")
    return tmp_path / "moim.db"


def moim(db, *args):
    result = CliRunner().invoke(main, list(args), env={"MOIM_DB": str(db), "MOIM_CONFIG": None})
    assert result.exit_code == 0, result.output
    return result


def json_lines(text):
    return [json.loads(line) for line in text.splitlines()]


# -- moim users --------------------------------------------------------------------------------


def test_users_json_lists_counts_and_last_activity_most_recent_first(db):
    rows = json_lines(moim(db, "users", "--json").stdout)

    assert [{k: v for k, v in r.items() if k != "last_active"} for r in rows] == [
        {"user_id": "alice", "messages": 2, "sessions": 2, "facts": 1},
        {"user_id": "bob", "messages": 1, "sessions": 1, "facts": 0},
    ]
    assert rows[0]["last_active"] > 1_700_000_100.0  # the fact, set just now
    assert rows[1]["last_active"] == 1_600_000_000.0


def test_users_text_is_a_table_and_quiet_on_stderr_when_not_a_terminal(db):
    result = moim(db, "users")

    lines = result.stdout.splitlines()
    assert lines[0].split() == ["USER", "MESSAGES", "SESSIONS", "FACTS", "LAST", "ACTIVE"]
    assert lines[1].split()[:4] == ["alice", "2", "2", "1"]
    assert lines[2].split() == ["bob", "1", "1", "0", "2020-09-13", "12:26:40", "UTC"]
    assert result.stderr == f"moim: using {db.resolve()}\n"


def test_users_of_an_empty_store_says_so_on_stderr(tmp_path):
    moim(tmp_path / "e.db", "migrate")

    result = moim(tmp_path / "e.db", "users")

    assert result.stdout == ""
    assert result.stderr.endswith("no user has memory yet\n")


# -- moim memory search ------------------------------------------------------------------------


def test_search_json_gives_every_score_of_each_hit(db):
    found = moim(db, "memory", "search", "--user", "alice", "--json", "kayak berth")

    rows = json_lines(found.stdout)
    top = rows[0]
    assert (top["rank"], top["text"], top["role"], top["session_id"]) == (1, KAYAK, "user", "s1")
    assert top["lexical"] > 0 and top["lexical_rank"] == 1  # BM25: the words match
    assert -1 <= top["dense"] <= 1 and top["dense_rank"] == 1
    assert 0 <= top["fused"] <= 1
    assert top["final"] >= top["fused"]  # bonuses only add
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert [r["final"] for r in rows] == sorted((r["final"] for r in rows), reverse=True)


def test_search_is_scoped_to_the_user(db):
    rows = json_lines(moim(db, "memory", "search", "--user", "bob", "--json", "kayak").stdout)

    assert KAYAK not in [r["text"] for r in rows]


def test_search_text_shows_the_scores_and_where_the_hit_comes_from(db):
    out = moim(db, "memory", "search", "--user", "alice", "-k", "1", "kayak berth").stdout

    scores, source, text = out.splitlines()
    assert scores.startswith(" 1. final ")
    assert "fused " in scores and "lexical " in scores and "(#1)" in scores and "dense " in scores
    assert source.split(" · ")[1:3] == ["s1", "user"]
    assert text.strip() == KAYAK


def test_search_refuses_a_blank_query(db):
    result = CliRunner().invoke(main, ["memory", "search", " "], env={"MOIM_DB": str(db)})

    assert result.exit_code == 2 and "must not be blank" in result.output


# -- stats and facts: text by default, --json for scripts ----------------------------------------


def test_stats_text_and_json(db):
    text = moim(db, "stats", "--user", "alice").stdout
    data = json.loads(moim(db, "memory", "stats", "--user", "alice", "--json").stdout)

    assert text == "alice: 2 messages in 2 sessions, 2 chunks, 1 facts\n"
    assert data == {"user_id": "alice", "messages": 2, "chunks": 2, "facts": 1, "sessions": 2}


def test_facts_list_is_a_table_or_json_lines(db):
    table = moim(db, "facts", "list", "--user", "alice").stdout.splitlines()
    rows = json_lines(moim(db, "facts", "list", "--user", "alice", "--json").stdout)

    assert table[0].split() == ["KEY", "VALUE", "CATEGORY", "POLICY", "PINNED", "STATUS"] + [
        "UPDATED",
        "ID",
    ]
    assert table[1].split()[:5] == ["city", "Porto", "profile", "speak", "active"]
    assert [(r["key"], r["value"]) for r in rows] == [("city", "Porto")]


# -- progress bars -----------------------------------------------------------------------------


def on_a_terminal(args, db):
    """Run `moim ARGS` with stderr on a pseudo-terminal; (exit status, stdout, stderr)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "MOIM_DB": str(db), "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    env.pop("MOIM_CONFIG", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", *args],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
        cwd=db.parent,
    )
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if ready:
            try:
                data = os.read(leader, 4096)
            except OSError:  # the follower closed: the process is done
                break
            if not data:
                break
            shown += data
        elif process.poll() is not None:
            break
    os.close(leader)
    out = process.stdout.read().decode()
    process.stdout.close()
    return process.wait(timeout=60), out, shown.decode(errors="replace")


def test_reindex_draws_a_bar_with_counts_on_a_terminal_and_nothing_otherwise(db):
    status, out, err = on_a_terminal(["reindex"], db)
    quiet = moim(db, "reindex")

    assert status == 0, err
    assert out == "re-indexed 3 messages\n"
    assert "re-indexing messages" in err and "3/3" in err
    assert quiet.stdout == "re-indexed 3 messages\n"
    assert quiet.stderr == f"moim: using {db.resolve()}\n"


def test_import_draws_a_bar_while_it_indexes(db, tmp_path):
    exported = moim(db, "memory", "export", "--user", "alice").stdout
    (tmp_path / "alice.jsonl").write_text(exported)

    status, out, err = on_a_terminal(
        ["memory", "import", "--user", "carol", "--create", str(tmp_path / "alice.jsonl")],
        tmp_path / "other.db",
    )

    assert status == 0, err
    assert out == "imported 2 messages and 1 fact row for carol\n"
    assert "indexing imported messages" in err and "2/2" in err


def test_migrate_of_an_old_database_draws_a_bar_per_migration(tmp_path):
    import sqlean

    from memory.store.migrations import MIGRATIONS, _run_in_transaction

    old = tmp_path / "old.db"
    db = sqlean.connect(str(old), isolation_level=None)
    db.execute("CREATE TABLE _moim_migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for migration in MIGRATIONS[:6]:
        db.execute("BEGIN")
        _run_in_transaction(db, migration)
        db.execute("INSERT INTO _moim_migrations VALUES (?, 0)", (migration.__name__,))
        db.execute("COMMIT")
    db.close()

    status, out, err = on_a_terminal(["migrate"], old)

    pending = len(MIGRATIONS) - 6
    assert status == 0, err
    assert out == f"{old.resolve()}: schema up to date\n"
    assert "upgrading the database" in err
    assert f"{pending}/{pending}" in err and MIGRATIONS[6].__name__ in err


# -- --user: a client's id or the namespace `moim users` prints -----------------------------------


def test_user_is_found_by_the_id_a_client_sends_and_by_its_printed_namespace(db, embedder):
    from proxy.identity import user_namespace

    layer = MemoryLayer(Settings(db_path=db), embedder_factory=lambda _: embedder)
    said(layer, user_namespace("john smith"), "s4", KAYAK, 1_700_000_200.0)
    layer.close()
    printed = [r["user_id"] for r in json_lines(moim(db, "users", "--json").stdout)]

    assert "~john%20smith" in printed
    by_id = json.loads(moim(db, "memory", "stats", "--user", "john smith", "--json").stdout)
    by_namespace = json.loads(moim(db, "stats", "--user", "~john%20smith", "--json").stdout)
    assert by_id == by_namespace and by_id["messages"] == 1
    assert by_id["user_id"] == "~john%20smith"


def test_a_user_id_too_long_for_a_request_is_refused_on_the_command_line(db):
    result = CliRunner().invoke(
        main, ["stats", "--user", "x" * 300], env={"MOIM_DB": str(db), "MOIM_CONFIG": None}
    )

    assert result.exit_code == 2 and "at most 256 characters" in result.output


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_user_is_refused_not_taken_as_a_namespace_no_client_names(db, blank):
    """`moim memory delete --user "$U" --yes` with U unset went to the namespace `~`."""
    result = CliRunner().invoke(
        main,
        ["memory", "delete", "--user", blank, "--yes"],
        env={"MOIM_DB": str(db), "MOIM_CONFIG": None},
    )

    assert result.exit_code == 2
    assert "a blank user id names no user; leave --user out for 'default'" in result.output
