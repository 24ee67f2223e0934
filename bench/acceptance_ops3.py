"""Operators' probes, the third part (`bench/acceptance_ops.py` has the first and the helpers):
`/health` and readiness (while the model loads, with the database file gone), the names
`/metrics` has of those the README lists, the inspector's pages with and without proxy keys,
and the CLI's smaller promises (a user as `moim users` prints it, a bad import, a delete not
confirmed, stopping and `kill -9` then restarting, a database that cannot be opened).

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_ops3.py [--part health|edges|pg|beside]
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.acceptance_ops import (  # noqa: E402
    KAYAK,
    RIVER,
    free_port,
    guarded,
    json_lines,
    moim,
    one_line_exit_1,
    report,
    run_parts,
    serving,
)
from tests.upstream import Upstream  # noqa: E402

# -- health, metrics, inspector ---------------------------------------------------------------


def readme_metric_names() -> set[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("#### Metrics", 1)[1].split("### Turning memory off", 1)[0]
    return set(re.findall(r"`(moim_[a-z_]+)", section)) | set(
        re.findall(r"(moim_[a-z_]+)`", section)
    )


def health(home: Path, up: Upstream) -> None:
    here = home / "health"
    seen: list[int] = []
    with serving(here, up, readiness=seen) as srv:
        report(
            "readiness answered 503 before 200 while the model loaded",
            503 in seen,
            sorted(set(seen)),
            info=True,
        )
        guarded("/health 200", lambda: (srv.api("GET", "/health").status_code == 200, "200"))
        srv.chat("carol", "s1", KAYAK)
        srv.flush()
        srv.block("carol", "where is the kayak")
        metrics = srv.api("GET", "/metrics").text
        names = {
            line.split("{")[0].split(" ")[0] for line in metrics.splitlines() if line[:1] != "#"
        }
        missing = sorted(
            n for n in readme_metric_names() if not any(m.startswith(n) for m in names)
        )
        report(
            "/metrics has every name the README lists (labelled ones after their event)",
            not missing,
            missing or "all",
            info=bool(missing) and all("_total" in m for m in missing),
        )
        for page in (
            "/ui",
            "/ui/users/carol",
            "/ui/users/carol/facts",
            "/ui/users/carol/search?q=kayak",
            "/ui/users/carol/why",
        ):
            guarded(
                f"inspector {page} without keys: 200",
                lambda page=page: (
                    srv.api("GET", page).status_code == 200,
                    srv.api("GET", page).status_code,
                ),
            )
        (here / "moim.db").unlink()
        srv.chat("carol", "s2", RIVER)
        time.sleep(3)
        ready = srv.api("GET", "/health/readiness")
        report(
            "readiness 503 with the reason once the database file is gone",
            ready.status_code == 503 and "ENOENT" in ready.text,
            (ready.status_code, ready.text[:200]),
        )
    keyed = home / "keyed"
    with serving(keyed, up, MOIM_PROXY_KEYS="sk-moim-admin") as srv:
        guarded(
            "with keys, /health needs none",
            lambda: (srv.api("GET", "/health").status_code == 200, "200"),
        )
        bare = srv.api("GET", "/ui", follow_redirects=False)
        report(
            "with keys, /ui without a login asks for one",
            bare.status_code in (302, 303, 401),
            (bare.status_code, bare.headers.get("location")),
        )
        metrics = srv.api("GET", "/metrics")
        report(
            "with keys, /metrics without a key is refused",
            metrics.status_code == 401,
            metrics.status_code,
        )
        with httpx.Client(base_url=srv.root, timeout=30) as browser:
            form = browser.get("/ui/login").text  # as a browser: the form, its CSRF token
            csrf = re.search(r'name="csrf" value="([^"]*)"', form)
            token = csrf.group(1) if csrf else ""
            login = browser.post("/ui/login", data={"key": "sk-moim-admin", "csrf": token})
            pages = [browser.get(p).status_code for p in ("/ui", "/ui/users/carol")]
            report(
                "with keys, the inspector after a login",
                pages == [200, 200],
                (login.status_code, pages),
            )


def edges(home: Path, up: Upstream) -> None:
    here = home / "edges"
    with serving(here, up, log_level="info") as srv:
        srv.chat("john smith", "s1", KAYAK)
        srv.flush()
        listed = json_lines(moim("users", "--json", cwd=here).stdout)
        printed = moim("users", cwd=here).stdout
        shown = re.search(r"~john%20smith", printed)
        a = moim("stats", "--user", "john smith", "--json", cwd=here).stdout
        b = moim("stats", "--user", "~john%20smith", "--json", cwd=here).stdout
        report(
            "--user as a client sends it and as moim users prints it: the same memory",
            bool(shown) and a == b and '"messages": 2' in a,
            (listed, printed.strip()[:120], a.strip(), b.strip()),
        )
        good = moim("memory", "export", "--user", "john smith", cwd=here).stdout
        bad = good + "{oops\n"
        line = f"line {len(good.splitlines()) + 1} "
        out = moim("memory", "import", "--user", "ivy", cwd=here, stdin=bad)
        ivy = moim("stats", "--user", "ivy", "--json", cwd=here).stdout
        report(
            "an import with a bad line: one error naming the line, nothing stored",
            out.returncode == 1 and line in out.stderr and '"messages": 0' in ivy,
            (out.returncode, out.stderr.strip()[-200:], ivy.strip()),
        )
        out = moim("memory", "delete", "--user", "john smith", cwd=here, stdin="")
        kept = moim("stats", "--user", "john smith", "--json", cwd=here).stdout
        report(
            "moim memory delete without --yes and nothing typed: nothing deleted",
            out.returncode != 0 and '"messages": 2' in kept,
            (out.returncode, out.stdout.strip()[-120:], out.stderr.strip()[-200:]),
        )
        out = moim(
            "memory", "delete", "--user", "john smith", "--session", "nope", "--yes", cwd=here
        )
        report(
            "delete --session of no such session: one line, exit 1", *one_line_exit_1(out, "nope")
        )
        out = moim("memory", "search", "--user", "john smith", "-k", "101", "kayak", cwd=here)
        report(
            "memory search -k 101 is refused",
            out.returncode != 0,
            (out.returncode, out.stderr.strip()[-160:]),
        )
        srv.chat("kim", "s1", RIVER)
        srv.proc.send_signal(signal.SIGTERM)
        code = srv.proc.wait(40)
    log = (here / "serve.log").read_text()
    report(
        "SIGTERM: exit 0 and the log says every finished turn is stored",
        code == 0 and "every finished turn is stored and indexed" in log,
        (code, log.strip().splitlines()[-2:]),
    )
    with serving(here, up, log_level="info") as srv:
        for n in range(5):
            srv.chat("lee", f"s{n}", f"Turn {n} before the crash: my badge number is 77{n}.")
        srv.proc.kill()
        srv.proc.wait()
    with serving(here, up, log_level="info") as srv:
        srv.flush()
        stats = srv.api("GET", "/v1/memory/stats", "lee").json()
        log = (here / "serve.log").read_text()
        report(
            "kill -9 then restart: every completed turn stored",
            stats["messages"] == 10,
            (stats["messages"], [line for line in log.splitlines() if "journal" in line][-1:]),
        )
    said = []
    for args in (
        ["stats", "--user", "lee"],
        ["users"],
        ["memory", "search", "--user", "lee", "x"],
        ["memory", "export", "--user", "lee"],
        ["facts", "list", "--user", "lee"],
        ["facts", "set", "--user", "lee", "k", "v"],
        ["reindex"],
        ["migrate"],
    ):
        first = (moim(*args, cwd=here).stderr.splitlines() or [""])[0]
        if first != f"moim: using {here.resolve() / 'moim.db'}":
            said.append((args[0], first))
    report("every command says first which database it uses", not said, said or "8 commands")
    empty = home / "edge-empty"
    empty.mkdir(parents=True)
    out = moim("facts", "set", "--user", "a", "k", "v", cwd=empty)
    report(
        "moim facts set with no database: one line, exit 1", *one_line_exit_1(out, "no database at")
    )
    out = moim("facts", "set", "--user", "a", "k", "v", "--create", cwd=empty)
    report(
        "moim facts set --create creates it",
        out.returncode == 0,
        (out.returncode, out.stderr.strip()),
    )
    junk = home / "edge-junk"
    junk.mkdir()
    (junk / "moim.db").write_text("this is not a database\n" * 100)
    for args in (["stats", "--user", "a"], ["serve", "--port", str(free_port())]):
        out = moim(*args, cwd=junk, MOIM_UPSTREAM_BASE_URL=up.url)
        report(
            f"moim {args[0]} on a file that is not a database: one line, exit 1",
            *one_line_exit_1(out, "moim.db"),
        )
    url = "postgresql://moim:s3cret-pw@127.0.0.1:1/moim"
    for args in (["stats", "--user", "a"], ["serve", "--port", str(free_port())]):
        out = moim(*args, cwd=junk, MOIM_DB=url, MOIM_UPSTREAM_BASE_URL=up.url)
        ok, seen = one_line_exit_1(out, "")
        report(
            f"moim {args[0]} with PostgreSQL unreachable: one line, exit 1, password hidden",
            ok and "s3cret" not in out.stderr + out.stdout,
            seen,
        )


def pg(home: Path, up: Upstream) -> None:
    """PostgreSQL's own promises: the database gone is "degraded", not 503; --vacuum does
    nothing and says so; a newer schema is refused in one line."""
    from bench.harness import ensure_database, pgserver_url, sibling_url

    base = pgserver_url(Path("/tmp/moim-ops-pg/data"), "moim_ops")
    url = ensure_database(sibling_url(base, f"_gone{int(time.time())}"))
    here = home / "pg"
    with serving(here, up, MOIM_DB=url) as srv:
        srv.chat("alice", "s1", KAYAK)
        srv.flush()
        out = moim(
            "memory", "delete", "--user", "alice", "--yes", "--vacuum", cwd=here, MOIM_DB=url
        )
        report(
            "--vacuum on PostgreSQL does nothing and says so",
            out.returncode == 0 and "vacuum" in (out.stdout + out.stderr).lower(),
            (out.stdout.strip(), out.stderr.strip()),
        )
        import psycopg

        parts = urlsplit(url)
        name, admin = parts.path.lstrip("/"), parts._replace(path="/postgres").geturl()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        reply = srv.client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hello again"}],
            extra_headers={"X-Memory-User-Id": "alice"},
        )
        time.sleep(3)
        ready = srv.api("GET", "/health/readiness")
        stats = srv.api("GET", "/v1/memory/stats", "alice")
        report(
            "the database gone: chat goes on with x-memory-error",
            reply.http_response.status_code == 200 and bool(reply.headers.get("x-memory-error")),
            reply.headers.get("x-memory-error"),
        )
        report(
            "...readiness 200 degraded, the memory API 503",
            ready.status_code == 200
            and ready.json().get("status") == "degraded"
            and stats.status_code == 503,
            (ready.status_code, ready.text[:200], stats.status_code),
        )
    newer = ensure_database(sibling_url(base, f"_newer{int(time.time())}"))
    moim("migrate", cwd=here, MOIM_DB=newer)
    import psycopg

    with psycopg.connect(newer, autocommit=True) as conn:
        conn.execute("INSERT INTO _moim_migrations VALUES ('m999_future', 0)")
    out = moim("stats", "--user", "a", cwd=here, MOIM_DB=newer)
    report(
        "a newer PostgreSQL schema: one line, exit 1",
        *one_line_exit_1(out, "upgraded by a newer moim"),
    )


def beside(home: Path, up: Upstream) -> None:
    """CLI writes beside a server that holds the user in RAM, and while it writes."""
    here = home / "beside"
    with serving(here, up) as srv:
        srv.chat("alice", "s1", KAYAK)
        srv.chat("alice", "s2", RIVER)
        srv.flush()
        srv.block("alice", "Where is my kayak?")  # her vectors now in the server's RAM
        srv.chat("donor", "s-imp", "Imported: my surfboard is stored at Nazaré in locker 31.")
        srv.flush()
        item = moim("memory", "export", "--user", "donor", cwd=here).stdout
        out = moim("memory", "import", "--user", "alice", cwd=here, stdin=item)
        block = srv.block("alice", "Where is my surfboard stored?")
        report(
            "an import into a user the server holds in RAM: its next recall has it",
            out.returncode == 0 and "locker 31" in block,
            (out.stdout, out.stderr[-200:], block[-200:]),
        )
        stop, said = threading.Event(), []

        def busy() -> None:
            n = 0
            while not stop.is_set():
                srv.chat("zed", f"z{n}", f"Busy turn {n} about the shed.")
                said.append(n)
                n += 1

        thread = threading.Thread(target=busy, daemon=True)
        thread.start()
        outs = [
            moim("facts", "set", "--user", "alice", f"k{n}", f"v{n}", cwd=here) for n in range(5)
        ]
        stop.set()
        thread.join(30)
        report(
            "CLI writes while the server writes: all succeed",
            all(o.returncode == 0 for o in outs),
            ([o.returncode for o in outs], len(said)),
        )
        out = moim("memory", "delete", "--user", "alice", "--yes", cwd=here)
        block = srv.block("alice", "Where is my kayak? And my surfboard?")
        why = srv.api("GET", "/ui/users/alice/why").text
        report(
            "moim memory delete --user beside the server: its next recall has nothing of her",
            out.returncode == 0
            and "berth" not in block
            and "locker" not in block
            and "v1" not in block,
            (out.stdout.strip(), block[-200:]),
        )
        report("...and the inspector's why-this-block shows nothing of her", "berth" not in why, "")
        srv.chat("ivan", "s-old", "An old turn about my green canoe.")
        srv.flush()
        srv.upstream.script.append({"content": "a slow reply " * 40, "delay": 0.02})
        streamed = threading.Thread(
            target=lambda: list(
                srv.client.chat.completions.create(
                    model="gpt-4o-mini",
                    stream=True,
                    messages=[{"role": "user", "content": "Tell me about my canoe."}],
                    extra_headers={"X-Memory-User-Id": "ivan", "X-Memory-Session-Id": "s-new"},
                )
            )
        )
        streamed.start()
        time.sleep(0.5)
        moim("memory", "delete", "--user", "ivan", "--yes", cwd=here)
        streamed.join(60)
        srv.flush()
        left = srv.api("GET", "/v1/memory/stats", "ivan").json()["messages"]
        report(
            "moim memory delete beside the server, a reply of theirs streaming: nothing stored",
            left == 0,
            f"{left} messages stored after (the README steers to DELETE /v1/memory)",
            info=True,
        )
        rows = json_lines(moim("users", "--limit", "1", "--json", cwd=here).stdout)
        report("moim users --limit 1 --json", len(rows) == 1, rows)
    keyed = home / "beside-keyed"
    keys = "sk-alice-key"
    (keyed).mkdir(parents=True, exist_ok=True)
    (keyed / "config.yaml").write_text(
        json.dumps(
            {
                "auth": {
                    "keys": [{"key": keys, "user_id": "alice"}],
                    "metrics_keys": ["sk-metrics-1"],
                }
            }
        )
    )
    with serving(keyed, up) as srv:
        with httpx.Client(base_url=srv.root, timeout=30) as browser:
            form = browser.get("/ui/login").text
            csrf = re.search(r'name="csrf" value="([^"]*)"', form)
            browser.post("/ui/login", data={"key": keys, "csrf": csrf.group(1) if csrf else ""})
            own, other = browser.get("/ui/users/alice"), browser.get("/ui/users/bob")
        report(
            "a key bound to alice: her pages 200, bob's 403",
            (own.status_code, other.status_code) == (200, 403),
            (own.status_code, other.status_code),
        )
        metrics = srv.api("GET", "/metrics", headers={"Authorization": "Bearer sk-metrics-1"})
        report("a metrics key reads /metrics", metrics.status_code == 200, metrics.status_code)


PARTS = {"health": health, "edges": edges, "pg": pg, "beside": beside}


def main() -> None:
    run_parts(__doc__, PARTS, "moim-ops3-")


if __name__ == "__main__":
    main()
