"""proxy/cli_common.py: `moim` names the database each command uses, refuses a missing one.

The database path is relative to the working directory (`./moim.db` by default), so a command
run from another directory used to create and use a new, empty store without a word.
"""

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from proxy.cli import main

REPO = Path(__file__).resolve().parents[2]

# Every command that opens the store, with the arguments it needs to get that far.
STORE_COMMANDS = [
    ["stats"],
    ["reindex"],
    ["memory", "stats"],
    ["memory", "export"],
    ["memory", "import"],
    ["memory", "delete", "--yes"],
    ["facts", "list"],
    ["facts", "set", "name", "Ann"],
    ["facts", "delete", "name"],
    ["facts", "history", "name"],
    ["facts", "pin", "name"],
    ["facts", "unpin", "name"],
    ["consolidate", "--model", "gpt-4o-mini"],
    ["consolidate", "--model", "gpt-4o-mini", "--user", "ann"],
]


def moim(*args, cwd, db=None, stdin=""):
    """Run `moim ARGS` in `cwd` with no config file; MOIM_DB only when `db` is given."""
    env = {"MOIM_DB": None if db is None else str(db), "MOIM_CONFIG": None}
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args), env=env, input=stdin)
    finally:
        os.chdir(previous)


@pytest.mark.parametrize("args", STORE_COMMANDS, ids=" ".join)
def test_a_command_run_away_from_the_database_refuses_and_names_the_path(tmp_path, args):
    result = moim(*args, cwd=tmp_path)

    expected = tmp_path.resolve() / "moim.db"
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: no database at {expected}: ")
    assert "MOIM_DB" in result.stderr
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_the_refusal_offers_create_only_where_the_command_has_it(tmp_path):
    stats = moim("stats", cwd=tmp_path)
    imported = moim("memory", "import", cwd=tmp_path)

    assert "--create" not in stats.stderr
    assert "or pass --create to start an empty one" in imported.stderr


def test_a_command_names_the_database_it_uses_on_stderr(tmp_path):
    db = tmp_path / "data" / "store.db"
    db.parent.mkdir()
    moim("migrate", cwd=tmp_path, db=db)

    result = moim("stats", "--user", "ann", "--json", cwd=tmp_path, db=db)

    assert result.exit_code == 0, result.output
    assert result.stderr == f"moim: using {db.resolve()}\n"
    assert json.loads(result.stdout)["user_id"] == "ann"


def test_moim_db_takes_a_sqlite_url_as_moim_memory_copy_does(tmp_path):
    """`MOIM_DB=sqlite:///path` was read as the relative path `sqlite:/path`: "no such
    directory sqlite:"."""
    db = tmp_path / "store.db"
    moim("migrate", cwd=tmp_path, db=f"sqlite://{db}")

    result = moim("stats", "--user", "ann", cwd=tmp_path, db=f"sqlite://{db}")

    assert result.exit_code == 0, result.output
    assert result.stderr == f"moim: using {db}\n"


def test_a_relative_database_path_is_named_in_full(tmp_path):
    moim("migrate", cwd=tmp_path)

    result = moim("memory", "export", cwd=tmp_path, db="moim.db")

    assert result.exit_code == 0, result.output
    assert result.stderr == f"moim: using {tmp_path.resolve() / 'moim.db'}\n"
    assert result.stdout == ""  # nothing stored yet


def test_migrate_creates_a_missing_database_and_says_so(tmp_path):
    result = moim("migrate", cwd=tmp_path)
    again = moim("migrate", cwd=tmp_path)

    path = tmp_path.resolve() / "moim.db"
    assert result.exit_code == 0, result.output
    assert result.stderr == f"moim: creating {path}\n"
    assert result.stdout == f"{path}: schema up to date\n"
    assert again.stderr == f"moim: using {path}\n"
    assert path.exists()


def test_create_starts_an_empty_database_for_facts_set(tmp_path):
    result = moim("facts", "set", "name", "Ann", "--user", "ann", "--create", cwd=tmp_path)
    listed = moim("facts", "list", "--user", "ann", "--json", cwd=tmp_path)

    assert result.exit_code == 0, result.output
    assert result.stderr == f"moim: creating {tmp_path.resolve() / 'moim.db'}\n"
    assert [json.loads(row)["value"] for row in listed.stdout.splitlines()] == ["Ann"]


@pytest.mark.parametrize("ttl", ["-5", "0", "inf"])
def test_a_ttl_that_is_not_a_positive_number_of_seconds_names_the_option(tmp_path, ttl):
    result = moim("facts", "set", "trip", "Rome", "--ttl", ttl, "--user", "ann", cwd=tmp_path)

    assert result.exit_code == 2
    assert "'--ttl'" in result.output
    assert "ttl_seconds" not in result.output


def test_create_starts_an_empty_database_for_import(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    moim("facts", "set", "home_city", "Lisbon", "--user", "ann", "--create", cwd=tmp_path / "old")
    exported = moim("memory", "export", "--user", "ann", cwd=tmp_path / "old").stdout

    imported = moim("memory", "import", "--user", "bo", "--create", cwd=tmp_path, stdin=exported)
    listed = moim("facts", "list", "--user", "bo", "--json", cwd=tmp_path)

    assert imported.exit_code == 0, imported.output
    assert imported.stderr == f"moim: creating {tmp_path.resolve() / 'moim.db'}\n"
    assert imported.stdout == "imported 0 messages and 1 fact row for bo\n"
    assert [json.loads(row)["value"] for row in listed.stdout.splitlines()] == ["Lisbon"]


def test_import_names_a_line_that_is_not_json_and_creates_nothing(tmp_path):
    fact = '{"type": "fact", "key": "pet", "value": "cat", "created_at": 1}\n'
    result = moim("memory", "import", "--create", cwd=tmp_path, stdin=fact + "\n{oops\n")

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: line 3 is not JSON: ")
    assert list(tmp_path.iterdir()) == []


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_creates_the_database_and_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["MOIM_MEMORY"] = "off"  # no model to load: the store is opened all the same
    lines = []
    with subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stderr is not None
        try:
            for line in server.stderr:  # until uvicorn has run the app's startup, or exits
                lines.append(line)
                if "Application startup complete" in line:
                    break
        finally:
            server.terminate()
            server.wait(timeout=30)

    path = tmp_path.resolve() / "moim.db"
    assert lines[0] == f"moim: creating {path}\n", "".join(lines)
    assert any("Application startup complete" in line for line in lines), "".join(lines)
    assert path.exists()


def test_memory_delete_erases_the_users_words_from_the_files(tmp_path):
    word = "zanzibarquokka"
    lines = "".join(
        json.dumps(
            {
                "type": "message",
                "session_id": "s-1",
                "message_key": f"k{i}",
                "content_hash": f"h{i}",
                "role": "user",
                "content": f"my {word} number {i} sleeps in the garden shed",
                "created_at": 1_700_000_000 + i,
            }
        )
        + "\n"
        for i in range(12)
    )
    imported = moim("memory", "import", "--user", "zed", "--create", cwd=tmp_path, stdin=lines)
    assert imported.exit_code == 0, imported.output
    holding = [f for f in tmp_path.rglob("*") if f.is_file() and word.encode() in f.read_bytes()]
    assert holding  # the message log and the FTS5 index

    deleted = moim("memory", "delete", "--user", "zed", "--yes", cwd=tmp_path)

    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout == "deleted 12 messages of zed\n"
    assert [f for f in tmp_path.rglob("*") if f.is_file() and word.encode() in f.read_bytes()] == []


def test_delete_with_a_session_forgets_only_that_conversation(tmp_path):
    lines = "".join(exported_message(i, session_id=f"s-{i % 2}") for i in range(4))
    moim("memory", "import", "--user", "zed", "--create", cwd=tmp_path, stdin=lines)

    deleted = moim("memory", "delete", "--user", "zed", "--session", "s-0", "--yes", cwd=tmp_path)
    unknown = moim("memory", "delete", "--user", "zed", "--session", "s-9", "--yes", cwd=tmp_path)
    loose = moim("memory", "delete", "--user", "zed", "--facts", "--yes", cwd=tmp_path)

    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout == "deleted 2 messages of zed's session s-0\n"
    assert unknown.exit_code == 1 and "zed has no session 's-9'" in unknown.stderr
    assert loose.exit_code == 2 and "--facts goes with --session" in loose.stderr
    left = moim("memory", "export", "--user", "zed", cwd=tmp_path).stdout.splitlines()
    assert [json.loads(line)["content"] for line in left] == [
        "message number 1",
        "message number 3",
    ]


def exported_message(i, **fields):
    """One message line as `moim memory export` writes it."""
    item = {
        "type": "message",
        "session_id": "s-1",
        "message_key": f"k{i}",
        "content_hash": f"h{i}",
        "role": "user",
        "content": f"message number {i}",
        "created_at": 1_700_000_000 + i,
    }
    return json.dumps({**item, **fields}) + "\n"


@pytest.mark.parametrize(
    ("edited", "reason"),
    [
        ('{"type": "message", "session_id": "s-1"}\n', "message: 'message_key' must be a string"),
        (exported_message(2, created_at="yesterday"), "message: 'created_at' must be a number"),
        (exported_message(2, type="mesage"), "unknown type 'mesage'"),
        ('{"type": "fact", "key": "pet", "created_at": 1}\n', "fact 'pet': 'value' must be"),
        ('{"type": "fact", "key": "pet", "value": "cat"}\n', "fact 'pet': 'created_at' is missing"),
        ('{"x": 1}\n', "neither a message nor a fact (no 'type', no 'content')"),
    ],
    ids=[
        "no message_key",
        "created_at a word",
        "unknown type",
        "fact without value",
        "no date",
        "no kind at all",
    ],
)
def test_import_refuses_a_hand_edited_file_whole_and_names_the_line(tmp_path, edited, reason):
    moim("facts", "set", "home_city", "Lisbon", "--user", "ann", "--create", cwd=tmp_path)
    before = moim("memory", "export", "--user", "ann", cwd=tmp_path).stdout
    lines = exported_message(0) + exported_message(1) + edited + exported_message(3)

    result = moim("memory", "import", "--user", "ann", cwd=tmp_path, stdin=lines)

    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: line 3 is not an exported item: {reason}")
    assert moim("memory", "export", "--user", "ann", cwd=tmp_path).stdout == before


def test_import_refuses_a_file_that_is_not_utf8_whole_and_names_the_line(tmp_path):
    moim("facts", "set", "home_city", "Lisbon", "--user", "ann", "--create", cwd=tmp_path)
    before = moim("memory", "export", "--user", "ann", cwd=tmp_path).stdout
    edited = exported_message(1).replace("message number 1", "un café")
    latin1 = edited.encode("latin-1")  # as an editor set to Latin-1 saved it
    export = tmp_path / "ann.jsonl"
    export.write_bytes(exported_message(0).encode() + latin1 + exported_message(2).encode())

    result = moim("memory", "import", "--user", "ann", str(export), cwd=tmp_path)

    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: line 2 is not UTF-8 text"), result.stderr
    assert moim("memory", "export", "--user", "ann", cwd=tmp_path).stdout == before


def test_migrate_redoes_the_derived_rows_an_older_layout_left_so_the_restart_need_not(tmp_path):
    lines = "".join(exported_message(i, content=f"my kayak number {i} is red") for i in range(6))
    moim("memory", "import", "--user", "ann", "--create", cwd=tmp_path, stdin=lines)
    with sqlite3.connect(tmp_path / "moim.db") as db:  # as a release with another layout left it
        db.execute("UPDATE meta SET value = 'old' WHERE key = 'vector_layout'")
    db.close()

    result = moim("migrate", cwd=tmp_path)

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "re-indexed 6 messages"
    with sqlite3.connect(tmp_path / "moim.db") as db:
        layout = db.execute("SELECT value FROM meta WHERE key = 'vector_layout'").fetchone()
        waiting = db.execute("SELECT count(*) FROM messages WHERE indexed = 0").fetchone()
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()
        # vec0's own table of rows: the virtual table needs the extension loaded
        vectors = db.execute("SELECT count(*) FROM chunk_vectors_rowids").fetchone()
    db.close()
    assert layout != ("old",)
    assert waiting == (0,)
    assert chunks == vectors == (6,)


def test_an_import_into_a_new_database_says_nothing_of_a_layout_change(tmp_path, caplog):
    result = moim(
        "memory", "import", "--user", "ann", "--create", cwd=tmp_path, stdin=exported_message(1)
    )

    assert result.exit_code == 0, result.output
    assert [r.message for r in caplog.records if "layout" in r.message] == []


def test_memory_delete_names_the_database_before_it_asks_and_keeps_all_on_no(tmp_path):
    moim("facts", "set", "home_city", "Lisbon", "--user", "ann", "--create", cwd=tmp_path)

    result = moim("memory", "delete", "--user", "ann", cwd=tmp_path, stdin="n\n")

    path = tmp_path.resolve() / "moim.db"
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"moim: using {path}\nDelete every message, chunk and fact of ann? [y/N]: "
    )
    listed = moim("facts", "list", "--user", "ann", "--json", cwd=tmp_path)
    assert [json.loads(row)["value"] for row in listed.stdout.splitlines()] == ["Lisbon"]


def test_what_a_command_imports_beside_a_running_server_is_found_by_its_words_at_once(
    make_proxy, tmp_path
):
    db = tmp_path / "shared.db"
    proxy = make_proxy(settings={"db_path": db, "capture_facts": False})
    assert proxy.layer.wait_for_lexical_index(30)  # the server's own index answers
    line = exported_message(1, content="my xylophonequark sleeps in the attic")

    imported = moim("memory", "import", "--user", "ann", cwd=tmp_path, db=db, stdin=line)

    assert imported.exit_code == 0, imported.output
    response = httpx.get(
        proxy.root + "/v1/memory/search",
        params={"q": "xylophonequark", "k": 1},
        headers={"X-Memory-User-Id": "ann"},
    )
    [hit] = response.json()["results"]
    assert hit["lexical_rank"] == 1  # not only the dense search's


def test_a_command_beside_a_running_server_starts_its_stderr_with_the_database(
    make_proxy, tmp_path
):
    db = tmp_path / "shared.db"
    make_proxy(settings={"db_path": db})  # holds the lexical index's lock

    env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["MOIM_DB"] = str(db)
    result = subprocess.run(  # its own process, with logging as a shell's command has it
        [sys.executable, "-m", "proxy.cli", "stats", "--user", "ann"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stderr == f"moim: using {db.resolve()}\n"


def test_what_a_command_imports_for_a_user_the_server_holds_is_found_by_meaning(
    make_proxy, tmp_path
):
    db = tmp_path / "shared.db"
    proxy = make_proxy(settings={"db_path": db, "capture_facts": False})
    first = exported_message(1, content="I am allergic to peanuts and shellfish")
    assert (
        moim("memory", "import", "--user", "ann", cwd=tmp_path, db=db, stdin=first).exit_code == 0
    )

    def search(query):
        response = httpx.get(
            proxy.root + "/v1/memory/search",
            params={"q": query, "k": 5},
            headers={"X-Memory-User-Id": "ann"},
        )
        return [hit["text"] for hit in response.json()["results"]]

    assert search("peanuts") == ["I am allergic to peanuts and shellfish"]  # ann's vectors in RAM
    alpacas = "My grandmother breeds alpacas on a farm near Braga"
    second = exported_message(2, content=alpacas)
    assert (
        moim("memory", "import", "--user", "ann", cwd=tmp_path, db=db, stdin=second).exit_code == 0
    )

    assert alpacas in search("llama ranching relatives")  # no word in common: the vectors'


def moim_process(*args, cwd):
    """`moim ARGS --config moim.yaml` as a process of its own: SQLite's locks are the OS's, per
    process, so a lock this test's process holds is seen only by another."""
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args, "--config", "moim.yaml"],
        cwd=cwd,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MOIM_")},
            "PYTHONPATH": str(REPO),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_memory_search_answers_while_another_process_holds_the_write_lock(tmp_path):
    """A search only reads, yet it took SQLite's write lock to check the vector table: beside
    `moim serve` storing a backlog it waited memory.busy_timeout, then failed."""
    db = tmp_path / "moim.db"
    said = {"role": "user", "content": "I moved to Porto"}
    exported = {
        "type": "message", "session_id": "s1", "message_key": "k1", "content_hash": "h1",
        "name": None, "payload": said, "model": "gpt-4o-mini", "tokens": 5, "partial": False,
        "created_at": 1795716614.0, **said,
    }  # fmt: skip
    line = json.dumps(exported) + "\n"
    imported = moim("memory", "import", "--user", "ann", "--create", cwd=tmp_path, stdin=line)
    assert imported.exit_code == 0, imported.output
    (tmp_path / "moim.yaml").write_text("memory: {busy_timeout: 0.1}\n")
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # as moim serve's writer in the middle of storing
    try:
        result = moim_process("memory", "search", "--user", "ann", "Porto", cwd=tmp_path)
    finally:
        writer.close()

    assert result.returncode == 0, result.stderr
    assert "I moved to Porto" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["facts", "set", "--user", "ann", "home", "Porto"],
        ["facts", "delete", "--user", "ann", "home"],
    ],
    ids=" ".join,
)
def test_a_store_locked_past_the_busy_timeout_is_one_line_not_a_traceback(tmp_path, args):
    """`moim serve`'s writer holds SQLite's write lock while it stores; a command that could not
    have it within memory.busy_timeout ended in a traceback of StoreUnavailable."""
    db = tmp_path / "moim.db"
    assert (
        moim("facts", "set", "--user", "ann", "home", "Lisbon", "--create", cwd=tmp_path).exit_code
        == 0
    )
    (tmp_path / "moim.yaml").write_text("memory: {busy_timeout: 0.1}\n")
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # as a writer in the middle of storing
    try:
        result = moim_process(*args, cwd=tmp_path)
    finally:
        writer.close()

    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[1:] == [
        "Error: OperationalError: database is locked "
        "(another process held its write lock; try again)"
    ]
