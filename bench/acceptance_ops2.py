"""Operators' probes, the second half (`bench/acceptance_ops.py` has the first and the helpers):
the README's backup recipe followed literally while the server writes, a restore served from,
`moim migrate` on a copy, `moim reindex` while serving, `moim memory copy` from SQLite to
PostgreSQL and back (served from each copy: the same recall), and two `moim serve` replicas on
one PostgreSQL (a turn, a forget and a fact through one seen by the other; `kill -9` of one
mid-stream loses no completed turn). PostgreSQL is the `pgserver` wheel's, its data in
`--pgdata` (left running for the next run, as `bench.harness.pgserver_url` does).

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_ops2.py [--part backup|upgrade|copy|...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.acceptance_ops import (  # noqa: E402
    KAYAK,
    RIVER,
    Server,
    env_of,
    finish,
    guarded,
    json_lines,
    moim,
    report,
    serving,
)
from bench.harness import _moim_serve, ensure_database, pgserver_url, sibling_url  # noqa: E402
from tests.upstream import Upstream, serve_upstream  # noqa: E402

QUESTION = "Where do I keep my kayak?"


def block_text(block: str) -> str:
    """The recalled part of a block (the question itself is not in it)."""
    return block


def chatter(srv: Server, user: str, stop: threading.Event, said: list[str]) -> threading.Thread:
    """A client chatting without pause until `stop`: the server writes meanwhile."""

    def run() -> None:
        n = 0
        while not stop.is_set():
            srv.chat(user, f"busy-{n}", f"Busy turn number {n} about the garden shed.")
            said.append(f"busy-{n}")
            n += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def backup(home: Path, up: Upstream) -> None:
    here = home / "backup"
    recipe = (
        '(umask 077; python -c "import sqlite3; '
        "sqlite3.connect('moim.db').backup(sqlite3.connect('moim-backup.db'))\")"
    )
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    with serving(here, up) as srv:
        srv.chat("alice", "s-kayak", KAYAK)
        srv.chat("alice", "s-river", RIVER)
        srv.flush()
        before = srv.block("alice", QUESTION)
        stop, said = threading.Event(), []
        busy = chatter(srv, "dora", stop, said)
        time.sleep(1.0)
        shell = subprocess.run(
            ["sh", "-c", recipe], cwd=here, env=env_of(PATH=path), capture_output=True, text=True
        )
        stop.set()
        busy.join(30)
        copy = here / "moim-backup.db"
        mode = stat.S_IMODE(copy.stat().st_mode) if copy.exists() else None
        report(
            "the README's backup line while the server writes",
            shell.returncode == 0 and mode == 0o600,
            (shell.returncode, shell.stderr[-200:], oct(mode or 0), f"{len(said)} busy turns"),
        )
        check = moim("stats", "--user", "alice", cwd=here, MOIM_DB="moim-backup.db")
        report(
            "MOIM_DB=moim-backup.db moim stats --user alice checks the copy",
            check.returncode == 0 and "4" in check.stdout,
            (check.stdout.strip(), check.stderr.strip()),
        )

        def reindex() -> tuple[bool, object]:
            out = moim("reindex", cwd=here)
            after = srv.block("alice", QUESTION)
            ok = out.returncode == 0 and "berth number 14" in after and "\r" not in out.stderr
            return ok, (out.stdout.strip(), out.stderr.strip()[-200:], after == before)

        guarded("moim reindex while serving: recall stays right", reindex)

        def keywords() -> tuple[bool, object]:
            found = srv.api("GET", "/v1/memory/search", "alice", params={"q": "berth"}).json()
            texts = [h["text"] for h in found["results"] if h["lexical_rank"] is not None]
            return bool(texts) and all("berth" in t for t in texts), texts

        guarded("...and a keyword search after it finds the word's chunk, no other", keywords)
        srv.chat("alice", "s-later", "Said after the backup: my bike is a blue Brompton.")
        srv.flush()
        found = srv.api("GET", "/v1/memory/search", "alice", params={"q": "Brompton"}).json()
        texts = [h["text"] for h in found["results"] if h["lexical_rank"] is not None]
        report(
            "a turn the server stores after moim reindex is found by its word, alone",
            len(texts) == 1 and "Brompton" in texts[0],
            texts,
        )
    # The README's restore, in place: moim stopped, -wal and -shm deleted, the copy put in
    # place of moim.db (moim.db-lexical/ and the journal stay: the README says nothing of them).
    for name in ("moim.db-wal", "moim.db-shm"):
        (here / name).unlink(missing_ok=True)
    shutil.copy(here / "moim-backup.db", here / "moim.db")
    with serving(here, up) as srv:
        block = srv.block("alice", QUESTION)
        later = srv.block("alice", "What bike do I have? The Brompton?")
        report(
            "served from the restored backup: recall as before, nothing said after it",
            "berth number 14" in block and "Brompton" not in block_text(later),
            (block[-200:], later[-300:]),
        )
        srv.chat("alice", "s-new", "After the restore: my canoe paddle is carbon, 210 cm.")
        srv.flush()
        hits = srv.api(
            "GET", "/v1/memory/search", "alice", params={"q": "canoe paddle carbon"}
        ).json()
        top = hits["results"][0] if hits.get("results") else {}
        report(
            "after the restore, a new turn is found by keywords",
            "canoe" in top.get("text", "") and top.get("lexical_rank") == 1,
            top,
        )
    migrated = home / "migrated"
    migrated.mkdir()
    shutil.copy(here / "moim-backup.db", migrated / "moim.db")
    out = moim("migrate", cwd=migrated)
    again = moim("memory", "search", "--user", "alice", "--json", "kayak", cwd=migrated)
    rows = json_lines(again.stdout) if again.returncode == 0 else []
    report(
        "moim migrate on a copy, then search it",
        out.returncode == 0 and bool(rows) and "kayak" in json.dumps(rows[0]),
        (out.stderr.strip()[-200:], len(rows)),
    )


OLD = "bacd105^"  # schema at m010_vocabulary: this moim adds m011 and m012


def upgrade(home: Path, up: Upstream) -> None:
    """A store an older moim wrote (its own code, `git archive`), upgraded as the README says:
    a backup, `moim migrate` on it, then served; the older moim refuses it after."""
    old = home / "old-source"
    old.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", OLD], capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    here = home / "upgrade"
    here.mkdir()
    old_env = {"PYTHONPATH": str(old)}
    with _moim_serve(up.url, str(here / "moim.db"), here / "old", source=old) as handle:
        client = openai.OpenAI(base_url=handle.root + "/v1", api_key="sk-test", max_retries=0)
        up.script.append({"content": "Noted."})
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": KAYAK}],
            extra_headers={"X-Memory-User-Id": "alice", "X-Memory-Session-Id": "s-kayak"},
        )
        fact = {"key": "home", "value": "Porto"}
        head = {"X-Memory-User-Id": "alice"}
        httpx.post(handle.root + "/v1/memory/facts", json=fact, headers=head, timeout=30)
        made = httpx.post(handle.root + "/v1/memory/flush", timeout=120)
    report("an older moim (its own moim serve) wrote a store", made.status_code == 200, made.text)
    out = moim("migrate", cwd=here)
    report(
        "moim migrate says the migrations it applied",
        out.returncode == 0 and "m011_index_failed, m012_left_messages" in out.stderr,
        out.stderr.strip()[-300:],
    )
    with serving(here, up) as srv:
        block = srv.block("alice", QUESTION)
        report(
            "the upgraded store is served: recall and facts",
            "berth number 14" in block and "Porto" in block,
            block[-250:],
        )
    back = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "stats", "--user", "alice"],
        cwd=here,
        capture_output=True,
        text=True,
        env=env_of(**old_env),
    )
    report(
        "the older moim refuses the upgraded store in one line",
        back.returncode == 1 and "upgraded by a newer moim" in back.stderr,
        back.stderr.strip()[-200:],
    )


def copy(home: Path, up: Upstream, pg: str) -> None:
    here = home / "copy"
    with serving(here, up) as srv:
        srv.chat("alice", "s-kayak", KAYAK)
        srv.chat("alice", "s-river", RIVER)
        srv.chat("erin", "s-1", "My locker code at the gym is 4417.")
        moim("facts", "set", "--user", "alice", "home", "Porto", cwd=here)
        srv.flush()
        original = srv.block("alice", QUESTION)
    source = f"sqlite:///{(here / 'moim.db').resolve()}"
    target = ensure_database(sibling_url(pg, "_copy"))
    out = moim("memory", "copy", "--from", source, "--to", target, cwd=home)
    report(
        "moim memory copy sqlite -> postgresql",
        out.returncode == 0,
        (out.stdout.strip()[-200:], out.stderr.strip()[-300:]),
    )
    out2 = moim("memory", "copy", "--from", source, "--to", target, cwd=home)
    report(
        "the copy again adds nothing",
        out2.returncode == 0,
        (out2.stdout.strip()[-200:], out2.stderr.strip()[-200:]),
    )
    back = home / "back"
    back.mkdir()
    out = moim(
        "memory", "copy", "--from", target, "--to", f"sqlite:///{back / 'moim.db'}", cwd=home
    )
    report(
        "moim memory copy postgresql -> sqlite",
        out.returncode == 0,
        (out.stdout.strip()[-200:], out.stderr.strip()[-300:]),
    )
    for name, cwd, env in (
        ("postgresql copy", home / "on-pg", {"MOIM_DB": target}),
        ("sqlite copy of the copy", back, {}),
    ):
        with serving(cwd, up, **env) as srv:
            block = srv.block("alice", QUESTION)
            erin = srv.block("erin", "what's my locker code?")
            report(
                f"served from the {name}: the same recall",
                block == original and "4417" in erin,
                (block == original, block[-250:], original[-250:])
                if block != original
                else "same block",
            )


def slow_stream(srv: Server, user: str, session: str) -> threading.Thread:
    """A reply streaming for ~2 s through `srv`, read to its end in a thread."""
    srv.upstream.script.append({"content": "a slow reply " * 40, "delay": 0.02})

    def run() -> None:
        for _ in srv.client.chat.completions.create(
            model="gpt-4o-mini",
            stream=True,
            messages=[{"role": "user", "content": f"{KAYAK} Tell me about kayaks."}],
            extra_headers={"X-Memory-User-Id": user, "X-Memory-Session-Id": session},
        ):
            pass

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def mid_stream_forget(one: Server, two: Server, url: str, home: Path) -> None:
    """A user forgotten through one replica (its API, or the CLI on the database) while a
    reply of theirs streams through the other: nothing of it is stored when it ends."""
    for how in ("DELETE /v1/memory", "moim memory delete"):
        user = "gail" if how.startswith("DELETE") else "hank"
        one.chat(user, "s-old", "An old turn about my green canoe.")
        one.flush()
        reader = slow_stream(two, user, "s-new")
        time.sleep(0.5)
        if how.startswith("DELETE"):
            one.api("DELETE", "/v1/memory", user)
        else:
            moim("memory", "delete", "--user", user, "--yes", cwd=home, MOIM_DB=url)
        reader.join(60)
        two.flush()
        one.flush()
        left = [srv.api("GET", "/v1/memory/stats", user).json()["messages"] for srv in (one, two)]
        report(
            f"{how} through one replica mid-stream on the other: nothing stored",
            left == [0, 0],
            left,
        )


def replicas(home: Path, up: Upstream, pg: str) -> None:
    url = ensure_database(sibling_url(pg, "_replicas"))
    with serving(home / "r0", up, MOIM_DB=url) as one, serving(home / "r1", up, MOIM_DB=url) as two:
        one.chat("alice", "s-kayak", KAYAK)
        one.flush()
        report(
            "a turn stored through one replica is recalled through the other",
            "berth number 14" in two.block("alice", QUESTION),
            "",
        )
        one.api("POST", "/v1/memory/facts", "alice", json={"key": "diet", "value": "vegan"})
        report(
            "a fact set through one's API is injected by the other",
            "vegan" in two.block("alice", "What should I cook?"),
            "",
        )
        gone = one.api("DELETE", "/v1/memory", "alice")
        block = two.block("alice", QUESTION)
        report(
            "a forget through one is honoured by the other at once",
            gone.status_code == 200 and "berth" not in block and "vegan" not in block,
            block[-200:],
        )
        mid_stream_forget(one, two, url, home)
        done: list[str] = []
        errors: list[str] = []

        def turn(n: int) -> None:
            try:
                one.chat("finn", f"k-{n}", f"Completed turn {n}: my spare key is in drawer {n}.")
                done.append(f"k-{n}")
            except Exception as exc:
                errors.append(type(exc).__name__)

        threads = [threading.Thread(target=turn, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        up.script.append({"content": "a long reply " * 200, "delay": 0.05})
        streamed: list[str] = []

        def stream() -> None:
            try:
                for chunk in one.client.chat.completions.create(
                    model="gpt-4o-mini",
                    stream=True,
                    messages=[{"role": "user", "content": "Tell me a long story."}],
                    extra_headers={"X-Memory-User-Id": "finn", "X-Memory-Session-Id": "k-stream"},
                ):
                    streamed.append(chunk.id)
            except Exception as exc:
                streamed.append(type(exc).__name__)

        reader = threading.Thread(target=stream)
        reader.start()
        time.sleep(1.0)
        one.proc.kill()  # kill -9 mid-stream
        one.proc.wait()
        reader.join(30)
        deadline, sessions = time.monotonic() + 60, set()
        while time.monotonic() < deadline:
            two.flush()
            export = two.api("GET", "/v1/memory/export", "finn").text
            sessions = {r["session_id"] for r in json_lines(export) if r["type"] == "message"}
            if set(done) <= sessions:
                break
            time.sleep(1)
        lost = sorted(set(done) - sessions)
        report(
            "kill -9 of one replica mid-stream loses no completed turn",
            not lost and len(done) == 12,
            (
                len(done),
                errors,
                lost,
                "stream stored" if "k-stream" in sessions else "stream not stored",
            ),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--part", choices=["backup", "upgrade", "copy", "replicas"], action="append"
    )
    parser.add_argument("--keep", type=Path, help="a directory for the stores and logs, kept")
    parser.add_argument("--pgdata", type=Path, default=Path("/tmp/moim-ops-pg/data"))
    args = parser.parse_args()
    parts = args.part or ["backup", "upgrade", "copy", "replicas"]
    pg = pgserver_url(args.pgdata, "moim_ops") if {"copy", "replicas"} & set(parts) else ""
    stamp = str(int(time.time()))
    with tempfile.TemporaryDirectory(prefix="moim-ops2-") as scratch, serve_upstream() as up:
        home = args.keep or Path(scratch)
        home.mkdir(parents=True, exist_ok=True)
        for part in parts:
            print(f"-- {part}", flush=True)
            try:
                if part in ("backup", "upgrade"):
                    {"backup": backup, "upgrade": upgrade}[part](home, up)
                else:
                    {"copy": copy, "replicas": replicas}[part](home, up, sibling_url(pg, stamp))
            except Exception as exc:
                report(f"{part} ran", False, f"raised {type(exc).__name__}: {exc}")
    finish()


if __name__ == "__main__":
    main()
