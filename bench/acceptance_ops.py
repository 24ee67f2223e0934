"""Black-box probes of what an operator does with moim, following the README's Operations and
"One process or many" sections literally: the installed `moim` console script (this source
tree first on PYTHONPATH) run as subprocesses beside a running `moim serve`, and the official
openai SDK as the client, in front of the stand-in provider of `tests/upstream.py`.

Parts: `life` (a user's life cycle through the CLI while the server runs: users, stats, search,
facts, export | import into another user and another database, delete a session, --vacuum),
`errors` (wrong directory, port in use, a second server, a newer database, --help of every
command); `bench/acceptance_ops2.py` has backups, upgrades, copy to PostgreSQL and replicas,
`bench/acceptance_ops3.py` health, metrics, the inspector and the CLI's smaller promises.
One line a check (`ok` / `FAIL` / `info`), then a total; the exit status is the number of
failures (capped at 100).

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_ops.py [--part life|errors]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402

from bench.locomo import block_of  # noqa: E402
from tests.upstream import Upstream, serve_upstream  # noqa: E402

MOIM = str(Path(sys.executable).parent / "moim")
KAYAK = "I keep my red kayak at the marina in Porto, berth number 14."
RIVER = "We paddled along the Douro river last weekend, the water was calm."
TALLY = {"counted": 0, "failed": 0}


def report(name: str, ok: bool, seen: Any, info: bool = False) -> bool:
    """Print one check's line; `info` lines are not counted."""
    if info:
        print(f"info {name}: {'ok' if ok else 'missed'}, {seen}", flush=True)
        return ok
    TALLY["counted"] += 1
    TALLY["failed"] += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {str(seen)[:400]}", flush=True)
    return ok


def guarded(name: str, check: Callable[[], tuple[bool, Any]]) -> bool:
    """A check that raised has failed; the others go on."""
    try:
        ok, seen = check()
    except Exception as exc:
        ok, seen = False, f"raised {type(exc).__name__}: {exc}"
    return report(name, ok, seen)


def env_of(**extra: str) -> dict[str, str]:
    """The operator's environment: no MOIM_* of ours, this tree first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def moim(
    *args: str, cwd: Path, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """`moim ARGS` as an operator types it in `cwd`."""
    return subprocess.run(
        [MOIM, *args],
        cwd=cwd,
        env=env_of(**env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line one JSON object, or ValueError."""
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not all(isinstance(row, dict) for row in rows):
        raise ValueError("a line is not a JSON object")
    return rows


def items(text: str) -> list[tuple[str, Any]]:
    """An export's items as (type, text), ids and times aside: what a round trip keeps."""
    return [(r["type"], r.get("content") or r.get("value")) for r in json_lines(text)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A `moim serve` the operator started in `cwd`, and a client of it."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, cwd: Path, up: Upstream):
        self.proc, self.cwd, self.upstream = proc, cwd, up
        self.root = f"http://127.0.0.1:{port}"
        self.client = openai.OpenAI(base_url=self.root + "/v1", api_key="sk-test", max_retries=0)

    def chat(
        self, user: str, session: str, text: str, reply: str = "Noted.", **headers: str
    ) -> Any:
        self.upstream.script.append({"content": reply})
        return self.client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Memory-User-Id": user, "X-Memory-Session-Id": session, **headers},
        )

    def block(self, user: str, question: str) -> str:
        """The memory block the provider received for a read-only question of `user`'s."""
        self.chat(user, f"q-{time.monotonic_ns()}", question, **{"X-Memory-Mode": "read"})
        return str(block_of(self.upstream.last_json) or "")

    def api(self, method: str, path: str, user: str = "", **kw: Any) -> httpx.Response:
        headers = {"X-Memory-User-Id": user} if user else {}
        headers.update(kw.pop("headers", {}))
        return httpx.request(method, self.root + path, headers=headers, timeout=130, **kw)

    def flush(self) -> None:
        assert self.api("POST", "/v1/memory/flush").status_code == 200


def wait_ready(root: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> list[int]:
    """Poll readiness until 200; the statuses seen on the way."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moim serve exited {proc.returncode} while starting")
        try:
            status = httpx.get(root + "/health/readiness", timeout=2).status_code
            seen.append(status)
            if status == 200:
                return seen
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError("moim serve did not become ready")


@contextmanager
def serving(
    cwd: Path,
    up: Upstream,
    readiness: list[int] | None = None,
    log_level: str = "warning",
    **env: str,
) -> Iterator[Server]:
    """`moim serve --port P` in `cwd` (its log in `cwd`/serve.log), ready; SIGTERM at the end."""
    cwd.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env.setdefault("MOIM_UPSTREAM_BASE_URL", up.url)
    log = (cwd / "serve.log").open("ab")
    proc = subprocess.Popen(
        [MOIM, "serve", "--port", str(port), "--log-level", log_level],
        cwd=cwd,
        env=env_of(**env),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        seen = wait_ready(f"http://127.0.0.1:{port}", proc)
        if readiness is not None:
            readiness.extend(seen)
        yield Server(proc, port, cwd, up)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


# -- a user's life cycle through the CLI, beside the server ------------------------------------


def life(home: Path, up: Upstream) -> None:
    here = home / "life"
    with serving(here, up) as srv:
        srv.chat("alice", "s-kayak", KAYAK)
        srv.chat("alice", "s-river", RIVER)
        srv.flush()

        def users() -> tuple[bool, Any]:
            out = moim("users", "--json", cwd=here)
            rows = json_lines(out.stdout)
            alice = [r for r in rows if "alice" in json.dumps(r)]
            return out.returncode == 0 and len(alice) == 1, rows

        guarded("moim users --json lists alice, one JSON object a line", users)

        def stats() -> tuple[bool, Any]:
            out = moim("stats", "--user", "alice", "--json", cwd=here)
            (row,) = json_lines(out.stdout)
            api = srv.api("GET", "/v1/memory/stats", "alice").json()
            return row.get("messages") == api["messages"] == 4, (row, api["messages"])

        guarded("moim stats --json agrees with the server's /v1/memory/stats", stats)

        def search() -> tuple[bool, Any]:
            out = moim(
                "memory", "search", "--user", "alice", "--json", "where is my kayak", cwd=here
            )
            rows = json_lines(out.stdout)
            return bool(rows) and "kayak" in json.dumps(rows[0]), rows[:1]

        guarded("moim memory search --json ranks the kayak first", search)

        def fact_set() -> tuple[bool, Any]:
            out = moim("facts", "set", "--user", "alice", "diet", "vegetarian", cwd=here)
            fact = json.loads(out.stdout)
            block = srv.block("alice", "What should I cook tonight?")
            return fact.get("value") == "vegetarian" and "vegetarian" in block, (fact, block[-300:])

        guarded("moim facts set: the server injects it at its next recall", fact_set)

        def fact_reset() -> tuple[bool, Any]:
            moim("facts", "set", "--user", "alice", "diet", "vegan", cwd=here)
            out = moim("facts", "history", "--user", "alice", "--json", "diet", cwd=here)
            values = [r.get("value") for r in json_lines(out.stdout)]
            block = srv.block("alice", "What should I cook tonight?")
            ok = values == ["vegetarian", "vegan"] and "vegan" in block
            return ok and "vegetarian" not in block, (values, block[-200:])

        guarded("moim facts set again: history has both, the server injects the new", fact_reset)

        def pins() -> tuple[bool, Any]:
            pinned = json.loads(moim("facts", "pin", "--user", "alice", "diet", cwd=here).stdout)
            listed = json_lines(moim("facts", "list", "--user", "alice", "--json", cwd=here).stdout)
            unpinned = json.loads(
                moim("facts", "unpin", "--user", "alice", "diet", cwd=here).stdout
            )
            api = srv.api("GET", "/v1/memory/facts", "alice").json()["facts"]
            ok = pinned.get("pinned") is True and unpinned.get("pinned") is False
            ok = ok and any(r.get("pinned") is True for r in listed)
            return ok and api[0]["pinned"] is False, (pinned, unpinned, listed)

        guarded("moim facts pin/list/unpin, seen by the server's API", pins)

        def fact_delete() -> tuple[bool, Any]:
            out = moim("facts", "delete", "--user", "alice", "diet", cwd=here)
            block = srv.block("alice", "What should I cook tonight?")
            ok = out.stdout.strip() == "archived diet of alice" and "vegan" not in block
            return ok, (out.stdout.strip(), block[-200:])

        guarded("moim facts delete: archived, the server injects it no more", fact_delete)
        moim("facts", "set", "--user", "alice", "home", "Porto", cwd=here)

        def to_user() -> tuple[bool, Any]:
            export = moim("memory", "export", "--user", "alice", cwd=here).stdout
            out = moim("memory", "import", "--user", "bob", cwd=here, stdin=export)
            again = moim("memory", "export", "--user", "bob", cwd=here).stdout
            kinds, kinds2 = items(export), items(again)
            block = srv.block("bob", "Where do I keep my kayak?")
            ok = out.returncode == 0 and kinds == kinds2 and "berth number 14" in block
            return ok, (out.stdout.strip(), out.stderr.strip()[-200:], len(kinds), len(kinds2))

        guarded("export | import into bob beside the server: same items, bob recalls it", to_user)

        def to_db() -> tuple[bool, Any]:
            export = moim("memory", "export", "--user", "alice", cwd=here).stdout
            other = home / "other"
            other.mkdir(exist_ok=True)
            out = moim("memory", "import", "--user", "alice", "--create", cwd=other, stdin=export)
            again = moim("memory", "export", "--user", "alice", cwd=other).stdout
            hits = json_lines(
                moim("memory", "search", "--user", "alice", "--json", "kayak", cwd=other).stdout
            )
            ok = out.returncode == 0 and items(export) == items(again)
            return ok and bool(hits) and "kayak" in json.dumps(hits[0]), (
                out.stdout,
                out.stderr[-200:],
            )

        guarded("export | import --create into another database: same items and recall", to_db)

        def session() -> tuple[bool, Any]:
            out = moim(
                "memory", "delete", "--user", "alice", "--session", "s-kayak", "--yes", cwd=here
            )
            block = srv.block("alice", "Where do I keep my kayak?")
            stats = srv.api("GET", "/v1/memory/stats", "alice").json()
            ok = out.returncode == 0 and "berth" not in block and stats["messages"] == 2
            return ok, (out.stdout.strip(), stats["messages"], block[-200:])

        guarded("moim memory delete --session beside the server: its next recall lacks it", session)

        def vacuum() -> tuple[bool, Any]:
            out = moim("memory", "delete", "--user", "bob", "--yes", "--vacuum", cwd=here)
            block = srv.block("bob", "Where do I keep my kayak?")
            stats = json.loads(moim("stats", "--user", "bob", "--json", cwd=here).stdout)
            ok = out.returncode == 0 and "berth" not in block and stats["messages"] == 0
            return ok and "Porto" not in block, (out.stdout.strip(), out.stderr.strip(), stats)

        guarded("moim memory delete --vacuum beside the server: bob forgotten", vacuum)
        guarded(
            "the server still serves after all that", lambda: (srv.proc.poll() is None, "alive")
        )


# -- error paths ------------------------------------------------------------------------------


def one_line_exit_1(out: subprocess.CompletedProcess[str], needle: str) -> tuple[bool, Any]:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    ok = out.returncode == 1 and len(errors) == 1 and needle in errors[0]
    return ok and len(lines) <= 2, (out.returncode, lines[-3:])


def errors(home: Path, up: Upstream) -> None:
    empty = home / "nowhere"
    empty.mkdir(parents=True)
    for args in (["stats", "--user", "a"], ["users"], ["reindex"], ["memory", "export"]):
        guarded(
            f"moim {' '.join(args)} from the wrong directory: one line, exit 1",
            lambda args=args: one_line_exit_1(moim(*args, cwd=empty), "no database at"),
        )
    guarded("...and creates no database", lambda: (not (empty / "moim.db").exists(), "none"))
    here = home / "errors"
    with serving(here, up) as srv:
        port = srv.root.rsplit(":", 1)[1]
        other = home / "errors-other"
        other.mkdir(parents=True)
        out = moim("serve", "--port", port, cwd=other, MOIM_UPSTREAM_BASE_URL=up.url)
        guarded("a port in use: one line, exit 1", lambda: one_line_exit_1(out, "cannot listen"))
        out = moim("serve", "--port", str(free_port()), cwd=here, MOIM_UPSTREAM_BASE_URL=up.url)
        guarded(
            "a second serve in the same directory: one line, exit 1",
            lambda: one_line_exit_1(out, "another moim is using"),
        )
    newer = home / "newer"
    newer.mkdir(parents=True)
    moim("migrate", cwd=newer)
    import sqlite3

    with sqlite3.connect(newer / "moim.db") as conn:
        conn.execute("INSERT INTO _moim_migrations VALUES ('m999_future', 0)")
    for args in (["stats", "--user", "a"], ["migrate"], ["serve", "--port", str(free_port())]):
        guarded(
            f"moim {args[0]} on a newer database: one line, exit 1",
            lambda args=args: one_line_exit_1(moim(*args, cwd=newer), "upgraded by a newer moim"),
        )
    commands = [
        [],
        ["serve"],
        ["migrate"],
        ["reindex"],
        ["users"],
        ["stats"],
        ["consolidate"],
        ["mcp"],
        ["memory"],
        ["facts"],
    ]
    commands += [["memory", c] for c in ("stats", "search", "export", "import", "delete", "copy")]
    commands += [["facts", c] for c in ("list", "set", "delete", "history", "pin", "unpin")]
    bad = []
    for args in commands:
        out = moim(*args, "--help", cwd=empty)
        if out.returncode != 0 or "Usage:" not in out.stdout or out.stderr:
            bad.append((args, out.returncode, out.stderr[-100:]))
    report(
        f"--help of all {len(commands)} commands: exit 0, usage on stdout", not bad, bad or "all"
    )
    out = moim("--version", cwd=empty)
    report("moim --version", out.returncode == 0 and bool(out.stdout.strip()), out.stdout.strip())


PARTS = {"life": life, "errors": errors}


def run_parts(doc: str, parts: dict[str, Callable[[Path, Upstream], None]], prefix: str) -> None:
    """The probe scripts' command line: `--part` (repeatable) and `--keep DIR`; each part run
    in a scratch directory (or DIR) beside one stand-in upstream, a part that raises counted as
    failed; then the total, and the failures as the exit status (`finish`)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--part", choices=sorted(parts), action="append")
    parser.add_argument("--keep", type=Path, help="a directory for the stores and logs, kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch, serve_upstream() as up:
        home = args.keep or Path(scratch)
        for part in args.part or list(parts):
            print(f"-- {part}", flush=True)
            try:
                parts[part](home, up)
            except Exception as exc:
                report(f"{part} ran", False, f"raised {type(exc).__name__}: {exc}")
    finish()


def finish() -> None:
    """Print the total and exit with the number of failed checks (at most 100)."""
    print(f"total: {TALLY['counted'] - TALLY['failed']}/{TALLY['counted']} ok")
    sys.exit(min(TALLY["failed"], 100))


def main() -> None:
    run_parts(__doc__, PARTS, "moim-ops-")


if __name__ == "__main__":
    main()
