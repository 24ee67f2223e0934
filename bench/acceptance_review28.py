"""Black-box probes of session 28's proxy changes (review28): the inspector's record, now made
on a worker thread once the answer is sent, against a forget and a stop.

A real `moim serve` (this tree, `bench/acceptance_ops.py`'s `serving`) in front of the stand-in
provider, the official openai SDK as the client, the inspector read as a browser reads it
(`/ui`, loopback, no keys). Parts: `forget` (a user forgotten right after a streamed answer,
or while one streams, through the API or `moim memory delete` beside the server: nothing of
theirs on the inspector's pages afterwards), `stop` (SIGTERM while an answer streams: exit 0,
the stream whole, every turn that completed stored after a restart, no record lost to a
traceback). One line a check, a total; the exit status is the number of failures.

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_review28.py [--part forget|stop]
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.acceptance_ops import (  # noqa: E402
    Server,
    guarded,
    moim,
    report,
    run_parts,
    serving,
)
from tests.upstream import Upstream  # noqa: E402

PAST = [
    "I moved to Quokkaville last spring, the flat is on Wombat Lane, number 31.",
    "My landlord in Quokkaville is called Perpetua Brightwater, she's lovely.",
    "The bins in Quokkaville go out on Tuesdays, I always forget.",
]
QUESTION = "Which town do I live in these days, and who is my landlord?"
STREAMS = 4
MARKS = ("Quokkaville", "Brightwater", "Wombat", "which town do i live")


def seed(srv: Server, user: str) -> None:
    for n, said in enumerate(PAST):
        when = {"X-Memory-Timestamp": f"2026-0{n + 3}-01T10:00:00"}
        srv.chat(user, f"{user}-s{n}", said, **when)
    srv.flush()


def stream(
    srv: Server,
    user: str,
    delay: float = 0.0,
    first: threading.Event | None = None,
    session: str = "ask",
) -> str:
    """A streamed question of `user`'s, read to its end; the answer's text."""
    srv.upstream.script.append({"content": "You live in Quokkaville. " * 6, "delay": delay})
    chunks = srv.client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        extra_headers={"X-Memory-User-Id": user, "X-Memory-Session-Id": f"{user}-{session}"},
    )
    text = ""
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
            if first is not None:
                first.set()
    return text


def quoted(srv: Server, user: str) -> list[str]:
    """What of the user's text the inspector's pages show: their "why this block" page and
    the users list (their marks, lowercase)."""
    pages = [srv.api("GET", f"/ui/users/{user}/why").text, srv.api("GET", "/ui").text]
    return [m for m in MARKS if any(m.lower() in page.lower() for page in pages)]


def forget(home: Path, up: Upstream) -> None:
    here = home / "forget"
    with serving(here, up) as srv:
        seed(srv, "control")
        stream(srv, "control")
        time.sleep(0.5)  # the record is made once the answer is sent
        report(
            "control: a user not forgotten is on the inspector's why page, marks and all",
            len(quoted(srv, "control")) == len(MARKS),
            quoted(srv, "control"),
        )

        def after_answer() -> tuple[bool, Any]:
            seen = {}
            for n in range(6):
                user = f"after-{n}"
                seed(srv, user)
                stream(srv, user)
                assert srv.api("DELETE", "/v1/memory", user).status_code == 200
                seen[user] = quoted(srv, user)
                time.sleep(0.3)  # a record still pending is made by now
                seen[user] += quoted(srv, user)
            return not any(seen.values()), seen

        guarded("forgotten right after a streamed answer: nothing on the inspector", after_answer)

        def while_streaming() -> tuple[bool, Any]:
            seed(srv, "during")
            first = threading.Event()
            with ThreadPoolExecutor(1) as pool:
                answer = pool.submit(stream, srv, "during", 0.1, first)
                assert first.wait(30)
                assert srv.api("DELETE", "/v1/memory", "during").status_code == 200
                text = answer.result(60)
            time.sleep(0.5)
            stats = srv.api("GET", "/v1/memory/stats", "during").json()
            shown = quoted(srv, "during")
            return not shown and stats["messages"] == 0 and "Quokkaville" in text, (
                shown,
                stats["messages"],
            )

        guarded(
            "forgotten while an answer streams: nothing stored nor shown after", while_streaming
        )

        def racing() -> tuple[bool, Any]:
            seen = {}
            for offset in (0.0, 0.005, 0.01, 0.02, 0.04, 0.08):
                user = f"race-{offset}"
                seed(srv, user)
                with ThreadPoolExecutor(1) as pool:
                    answer = pool.submit(stream, srv, user, 0.01)
                    time.sleep(offset)
                    assert srv.api("DELETE", "/v1/memory", user).status_code == 200
                    answer.result(60)
                time.sleep(0.3)
                seen[user] = quoted(srv, user)
            return not any(seen.values()), seen

        guarded("forgotten as its recall runs (0-80 ms in): nothing on the inspector", racing)

        def beside() -> tuple[bool, Any]:
            seed(srv, "cli")
            stream(srv, "cli")
            out = moim("memory", "delete", "--user", "cli", "--yes", cwd=here)
            return out.returncode == 0 and not quoted(srv, "cli"), (
                out.returncode,
                quoted(srv, "cli"),
            )

        guarded("`moim memory delete` beside the server after a streamed answer", beside)

        def many() -> tuple[bool, Any]:
            seed(srv, "many")
            with ThreadPoolExecutor(12) as pool:
                answers = [pool.submit(stream, srv, "many", 0.02) for _ in range(12)]
                time.sleep(0.3)
                assert srv.api("DELETE", "/v1/memory", "many").status_code == 200
                texts = [a.result(120) for a in answers]
            time.sleep(1.0)
            stats = srv.api("GET", "/v1/memory/stats", "many").json()
            shown = quoted(srv, "many")
            whole = all("Quokkaville" in t for t in texts)
            # turns whose request arrived after the forget are stored: not the forgotten ones
            return whole and not (set(shown) & {"Brightwater", "Wombat"}), (
                shown,
                stats["messages"],
            )

        guarded("twelve streams of a user forgotten among them: the old text not shown", many)


def stop(home: Path, up: Upstream) -> None:
    here = home / "stop"
    answer = "You live in Quokkaville. " * 6
    with serving(here, up, log_level="info") as srv:
        seed(srv, "sig")
        started = [threading.Event() for _ in range(STREAMS)]
        with ThreadPoolExecutor(STREAMS) as pool:
            answers = [
                pool.submit(stream, srv, "sig", 0.1, first, f"ask-{n}")
                for n, first in enumerate(started)
            ]
            assert all(first.wait(30) for first in started)
            srv.proc.send_signal(signal.SIGTERM)
            code = srv.proc.wait(60)
            texts = [a.result(10) for a in answers]
    log = (here / "serve.log").read_text()
    report(
        f"SIGTERM while {STREAMS} answers stream: exit 0, every answer whole",
        code == 0 and texts == [answer] * STREAMS,
        (code, [len(t) for t in texts], log.strip().splitlines()[-1:]),
    )
    report(
        "no inspector record failed on the way out",
        "keeping the request for the inspector failed" not in log and "Traceback" not in log,
        [line for line in log.splitlines() if "Error" in line or "failed" in line][-3:],
    )
    with serving(here, up) as srv:
        srv.flush()
        stats = srv.api("GET", "/v1/memory/stats", "sig").json()
        report(
            "restarted: the three turns before and the streamed ones are stored",
            stats["messages"] == 2 * (3 + STREAMS),
            stats["messages"],
        )


PARTS = {"forget": forget, "stop": stop}

if __name__ == "__main__":
    run_parts(__doc__, PARTS, "moim-review28-")
