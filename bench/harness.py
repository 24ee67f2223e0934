"""Shared parts of the load benchmarks (bench/ingest.py, bench/load.py): synthetic chat
text, a moim proxy in a subprocess or a thread, CPU/RSS sampling and percentile formatting.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from memory import MemoryLayer, Settings, Turn  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from tests.conftest import serve_app  # noqa: E402

MODEL = "gpt-4o-mini"
SYSTEM = "You are a helpful assistant. Answer briefly and say so when you are unsure."
NAMES = "Ana Ben Chloé Dmitri Elif Farah Gus Hana Ivan Jun Kofi Lena Mateo Nadia Omar Priya".split()
PLACES = (
    "Lisbon",
    "Kyoto",
    "the Dolomites",
    "Oaxaca",
    "Tromsø",
    "Marrakesh",
    "Vancouver",
    "the Peak District",
    "Hanoi",
    "Valparaíso",
    "Tbilisi",
    "Cork",
)
THINGS = (
    "the old harbour",
    "a cooking class",
    "the night market",
    "a ferry to the islands",
    "the modern art museum",
    "a hike to the waterfall",
    "the botanical garden",
    "a jazz bar",
    "the cathedral roof",
    "a bike tour",
    "the thermal baths",
)
TECH = (
    "Postgres",
    "the React app",
    "our Django API",
    "pandas",
    "Kubernetes",
    "the CI job",
    "SQLite",
    "the Rust service",
    "nginx",
    "the Terraform plan",
    "asyncio",
    "the iOS build",
)
ERRORS = (
    "a timeout after 30 s",
    "KeyError: 'user_id'",
    "a 502 from the load balancer",
    "an out-of-memory kill",
    "a deadlock warning",
    "permission denied on /var/lib/data",
    "TypeError: cannot unpack non-iterable NoneType",
    "a flaky test on Fridays",
)
FOODS = (
    "lentil soup",
    "banana bread",
    "a green curry",
    "shakshuka",
    "risotto",
    "dumplings",
    "a chickpea salad",
    "pad thai",
    "sourdough",
    "a lemon tart",
)
MONTHS = "January March April May June September October November December".split()
USER_SENTENCES = (
    "Can you help me plan a trip to {place} in {month}?",
    "I want to see {thing}.",
    "I'm getting {error} from {tech} since yesterday's deploy.",
    "Any idea why?",
    "What's a good recipe for {food} without nuts?",
    "My sister {name} is visiting in {month}.",
    "Remind me what we decided about {tech} last week.",
    "I prefer {food} over {food2}.",
    "How long does {thing} in {place} usually take?",
    "My name is {name}.",
    "Is {n} minutes enough for {thing}?",
    "Could you rewrite this more politely for {name}?",
    "We moved the {tech} migration to {month} {n}.",
    "Remember that I'm allergic to peanuts.",
    "What did {name} say about {place}?",
    "Should I worry about {error}?",
)
ASSISTANT_SENTENCES = (
    "Sure, here is a plan for {place} in {month}.",
    "Start the first day with {thing}.",
    "Book {thing} ahead, it fills up quickly in {month}.",
    "{error} usually means a connection pool is exhausted; check the settings of {tech}.",
    "For {food}, soak the beans overnight and cook them slowly for {n} minutes.",
    "You mentioned that {name} prefers {food}, so that could work for dinner.",
    "I'd roll back {tech} first and compare the logs before and after the change.",
    "That takes about {n} minutes, a bit more on weekends.",
    "Here is a shorter version you could send to {name}.",
    "I'm not sure; the docs for {tech} changed recently, so double-check the version.",
    "Step one: reproduce {error} locally. Step two: add logging around the call.",
    "Pack layers, {place} can be cold at night even in {month}.",
)


def chat_text(rng: random.Random, role: str, low: int = 50, high: int = 400) -> str:
    """A chat message of low..high characters: user turns short, assistant turns longer."""
    pool, lo, hi = (
        (USER_SENTENCES, low, min(high, 250))
        if role == "user"
        else (ASSISTANT_SENTENCES, max(low, 100), high)
    )
    target, words = rng.randint(lo, hi), []
    while len(" ".join(words)) < target:
        words.append(
            rng.choice(pool).format(
                name=rng.choice(NAMES),
                place=rng.choice(PLACES),
                thing=rng.choice(THINGS),
                tech=rng.choice(TECH),
                error=rng.choice(ERRORS),
                food=rng.choice(FOODS),
                food2=rng.choice(FOODS),
                month=rng.choice(MONTHS),
                n=rng.randint(2, 90),
            )
        )
    text = " ".join(words)
    return text if len(text) <= high else text[:high].rsplit(" ", 1)[0]


def conversation_turns(
    rng: random.Random, messages: int, users: int = 20, exchanges: int = 8
) -> list[Turn]:
    """Turns holding about `messages` new messages: each resends its session's history."""
    turns: list[Turn] = []
    new, now, session = 0, time.time() - 86400, 0
    while new < messages:
        user, history = f"user-{session % users}", [{"role": "system", "content": SYSTEM}]
        new += 1
        for _ in range(exchanges):
            if new >= messages:
                break
            asked = {"role": "user", "content": chat_text(rng, "user")}
            reply = {"role": "assistant", "content": chat_text(rng, "assistant")}
            turns.append(
                Turn(user, f"s-{session}", MODEL, tuple(history + [asked]), reply, now + len(turns))
            )
            history += [asked, reply]
            new += 2
        session += 1
    return turns


# -- machine, processes, the proxy -------------------------------------------------------------


def machine() -> dict[str, Any]:
    git = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "loadavg_start": os.getloadavg(),
        "moim": git,
    }


def rss_mb(pid: int | None = None) -> float:
    """Resident memory (VmRSS) of a process, from /proc (psutil is not installed)."""
    status = Path(f"/proc/{pid or 'self'}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024


def cpu_s(pid: int | None = None) -> float:
    """User + system CPU seconds a process has used, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid or 'self'}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_s() -> float:
    """CPU seconds the whole machine has been busy (all processes), from /proc/stat."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_window(pids: dict[str, int | None | Callable[[], float]]) -> Any:
    """Start counting; the returned function gives cores busy since, per named process (a
    pid, None for this one, or a function giving CPU seconds: a group of processes), for
    the whole machine, and for every other process (other work on a shared machine)."""

    def used(source: int | None | Callable[[], float]) -> float:
        return source() if callable(source) else cpu_s(source)

    started, machine0 = time.perf_counter(), busy_s()
    own = {name: used(source) for name, source in pids.items()}

    def stop() -> dict[str, float]:
        elapsed = time.perf_counter() - started
        cores = {name: (used(source) - own[name]) / elapsed for name, source in pids.items()}
        whole = (busy_s() - machine0) / elapsed
        return {**cores, "whole machine": whole, "other processes": whole - sum(cores.values())}

    return stop


def cores_text(cores: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in cores.items())


@dataclass
class ProxyHandle:
    root: str  # http://127.0.0.1:PORT
    pid: int  # the proxy's process (this one with --no-subprocess)
    mode: str  # "subprocess" or "threads in the benchmark process"
    layer: MemoryLayer | None = None


def processes(handle: ProxyHandle) -> dict[str, int | None]:
    if handle.pid == os.getpid():
        return {"benchmark process (proxy in threads)": None}
    return {"proxy": handle.pid, "benchmark process (client, upstream)": None}


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when this process dies (Linux prctl), so a killed
    benchmark leaves no proxy behind."""
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(root: str, alive: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the proxy exited while starting")
        try:
            if httpx.get(root + "/health/readiness", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the proxy did not become ready")


@contextmanager
def serve_proxy(
    upstream_url: str,
    db: Path,
    as_subprocess: bool = True,
    layer: MemoryLayer | None = None,
    source: Path = ROOT,
    config: Mapping[str, Any] | None = None,
    log_level: str = "warning",
) -> Iterator[ProxyHandle]:
    """The real moim in front of `upstream_url`, storing in `db`, ready (model loaded).

    As a subprocess it is `python -m proxy.cli serve` with a written config (`config`'s
    sections beside `db` and `upstream`) and log level `log_level` (warning: the default
    `info` logs a line per request), run from the source tree `source` (another build to compare:
    `git archive main | tar -x -C DIR`); else uvicorn in a thread here.
    """
    if not as_subprocess:
        built = Config(upstream_base_url=upstream_url, memory=Settings(db_path=db))
        with serve_app(build_app(built, layer or MemoryLayer(built.memory))) as root:
            _wait_ready(root, lambda: True)
            yield ProxyHandle(root, os.getpid(), "threads in the benchmark process", layer)
        return
    files = db.resolve().with_suffix("")
    with _moim_serve(upstream_url, str(db.resolve()), files, source, config, log_level) as handle:
        yield handle


@contextmanager
def serve_replicas(upstream_url: str, db_url: str, count: int, home: Path) -> Iterator[list[Any]]:
    """`count` `moim serve` processes on the Postgres database `db_url`, as replicas behind a
    balancer would run: each in a directory of its own under `home` (its config, log and
    local journal, `moim.db.journal`), all ready before this yields their handles."""
    with ExitStack() as stack:
        handles = []
        for n in range(count):
            (home / f"replica-{n}").mkdir(parents=True, exist_ok=True)
            files = home / f"replica-{n}" / "moim"
            handles.append(stack.enter_context(_moim_serve(upstream_url, db_url, files)))
        yield handles


@contextmanager
def _moim_serve(
    upstream_url: str,
    db: str,
    files: Path,
    source: Path = ROOT,
    sections: Mapping[str, Any] | None = None,
    log_level: str = "warning",
) -> Iterator[ProxyHandle]:
    """`python -m proxy.cli serve` of the source tree `source`, storing in `db` (a path or a
    Postgres URL), its config (with `sections`) at `files`.yaml and its log at `files`.log,
    working in `files`' directory."""
    if not (Path(source) / "proxy" / "cli.py").is_file():  # else the installed moim would serve
        raise FileNotFoundError(f"{source} holds no moim source tree (proxy/cli.py)")
    port, config = _free_port(), files.with_suffix(".yaml")
    written = {"db": db, "upstream": {"base_url": upstream_url}, **(sections or {})}
    if sections and "upstream" in sections:  # more upstream settings (a key, a timeout)
        written["upstream"] = {"base_url": upstream_url, **sections["upstream"]}
    config.write_text(json.dumps(written))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    # the source first; the caller's own entries after it (e.g. a private directory of packages
    # to try)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(source), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    log = files.with_suffix(".log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxy.cli",
            "serve",
            "--config",
            str(config),
            "--port",
            str(port),
            "--log-level",
            log_level,
        ],
        cwd=files.parent,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    try:
        root = f"http://127.0.0.1:{port}"
        _wait_ready(root, lambda: proc.poll() is None)
        yield ProxyHandle(root, proc.pid, "subprocess (python -m proxy.cli serve)")
    finally:
        proc.terminate()  # uvicorn shuts down gracefully; the writer flushes
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if proc.returncode not in (0, -15):
            print(f"proxy exited {proc.returncode}; log: {files.with_suffix('.log')}")


# -- PostgreSQL --------------------------------------------------------------------------------


def pgserver_url(data: Path, database: str) -> str:
    """The URL of `database` on a PostgreSQL with pgvector started from the `pgserver` wheel
    with its data in `data` (created on first use). The server is left running, so the next
    run reuses it and its stores; stop it with `…/pgserver/pginstall/bin/pg_ctl -D DATA
    stop`. As root, `data` must not be under a 0700 directory: postgres runs as its own user.
    """
    import warnings

    data.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # platformdirs' XDG_RUNTIME_DIR warning
        warnings.simplefilter("ignore")
        import pgserver  # type: ignore[import-untyped]

        server = pgserver.get_server(data, cleanup_mode=None)
    return str(server.get_uri(database))


def sibling_url(url: str, suffix: str) -> str:
    """The URL of the database named like `url`'s plus `suffix`, on the same server."""
    parts = urlsplit(url)
    return parts._replace(path=parts.path + suffix).geturl()


def ensure_database(url: str) -> str:
    """Create the database `url` names if its server does not have it yet; return `url`."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return url


def vacuum(url: str) -> float:
    """VACUUM (ANALYZE) the database `url` names; seconds taken. A store filled in bulk
    has no planner statistics and no visibility map yet (index-only scans then read the
    heap): a running deployment's autovacuum gets there soon after, so the bench starts
    from there, not from the minute after a bulk load."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    return time.perf_counter() - started


def postgres_cpu(url: str) -> Callable[[], float] | None:
    """A function giving the CPU seconds of the PostgreSQL server `url` points to, when it
    runs on this machine behind a Unix socket in its data directory (pgserver's way): the
    postmaster, its live backends, and the backends that have exited (the postmaster's
    children's time). None otherwise (not measured)."""
    parts = urlsplit(url)
    host = parse_qs(parts.query).get("host", [parts.hostname or ""])[0]
    pidfile = Path(host) / "postmaster.pid"
    if not host.startswith("/") or not pidfile.is_file():
        return None
    postmaster = int(pidfile.read_text().split()[0])

    def total() -> float:
        ticks = os.sysconf("SC_CLK_TCK")
        fields = _stat(postmaster)
        seconds = sum(int(f) for f in fields[11:15]) / ticks if fields else 0.0
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit() and (child := _stat(int(proc.name))):
                if int(child[1]) == postmaster:
                    seconds += (int(child[11]) + int(child[12])) / ticks
        return seconds

    return total


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command (state first); [] if it has exited."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return []


def pct(values: Sequence[float], qs: Sequence[int] = (50, 95, 99)) -> dict[str, float | None]:
    if not values:
        return {f"p{q}": None for q in qs} | {"max": None}
    return {f"p{q}": float(np.percentile(values, q)) for q in qs} | {"max": float(max(values))}


def fmt(p: dict[str, float | None], scale: float = 1.0, unit: str = "") -> str:
    return " / ".join(
        f"{k} {v * scale:.1f}{unit}" if v is not None else f"{k} -" for k, v in p.items()
    )


# -- 1. throughput -----------------------------------------------------------------------------


def embedding_counters(metrics: str) -> dict[str, float]:
    """moim's embedding CPU seconds and texts by kind, from its /metrics text."""
    found = {}
    for name, kind, value in re.findall(
        r'^moim_embedding_(cpu_seconds|texts)_total\{kind="(\w+)"\} (\S+)', metrics, re.M
    ):
        found[f"embed_{name}_{kind}"] = float(value)
    return found


def writer_gauges(metrics: str) -> dict[str, float]:
    """From moim's /metrics text: the turns submitted and not yet indexed (`pending`: they
    wait in SQLite, not in RAM) and the most turns the writer's RAM queue has held
    (`queue_peak`); nan when the text lacks one."""
    found = {}
    for key, name in (("pending", "moim_ingest_pending"), ("queue_peak", "moim_ingest_queue_peak")):
        value = re.search(rf"^{name} (\S+)", metrics, re.M)
        found[key] = float(value[1]) if value else float("nan")
    return found


class Sampler(threading.Thread):
    """Every `every` seconds: the proxy's RSS and CPU seconds, and the writer's backlog."""

    def __init__(self, handle: ProxyHandle, every: float = 1.0, also: Any = None) -> None:
        super().__init__(daemon=True)
        self.handle, self.every, self.also = handle, every, also
        # More figures for each sample (e.g. the database server's CPU seconds).
        self.extra: Callable[[], dict[str, float]] | None = None
        self.samples: list[dict[str, float]] = []
        self.stop = threading.Event()
        self.started_at = time.perf_counter()

    def sample(self) -> dict[str, float]:
        try:
            text = httpx.get(self.handle.root + "/metrics", timeout=5).text
        except httpx.HTTPError:
            text = ""
        row = {
            "t": time.perf_counter() - self.started_at,
            "rss_mb": rss_mb(self.handle.pid),
            "cpu_s": cpu_s(self.handle.pid),
            **writer_gauges(text),
            **embedding_counters(text),
            **(self.extra() if self.extra is not None else {}),
        }
        self.samples.append(row)
        return row

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.sample()
            if self.also is not None:
                self.also()
