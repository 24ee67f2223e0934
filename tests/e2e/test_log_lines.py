"""`moim serve`'s log, as a real subprocess: what a client chooses cannot write a line of its
own. The body's `model` is any string and a request's path is percent-decoded (`%1B` is an
escape); both are in the request's log line, where a line break forged an entry that a reader
takes for moim's (`… INFO proxy.pipeline request_id=… user_id=admin`) and an ANSI escape
rewrote the operator's terminal."""

import httpx
import openai

from tests.e2e.test_crash import Server

FORGED = "2026-01-01 00:00:00,000 INFO proxy.pipeline request_id=forged user_id=admin status=200"


def test_a_clients_line_break_or_escape_stays_inside_its_log_line(tmp_path, upstream):
    log = tmp_path / "log"
    with Server(tmp_path / "moim.db", upstream.url, log) as server:
        server.wait("/health")
        client = openai.OpenAI(base_url=server.root + "/v1", api_key="sk-test", max_retries=0)
        client.chat.completions.create(
            model="gpt-4o-mini\n" + FORGED + "\x1b[2J",
            messages=[{"role": "user", "content": "Hi"}],
        )
        httpx.get(server.root + "/v1/files%1B[2J", timeout=30)  # passed through, logged
        server.stop()

    lines = log.read_text().splitlines()
    assert not [line for line in lines if line.startswith(FORGED[:30])]
    assert not [line for line in lines if "\x1b" in line]
    said = [line for line in lines if "request_id=forged" in line]
    assert len(said) == 1, lines  # inside its own line, escaped
    assert "model=gpt-4o-mini\\n2026-01-01" in said[0]
    assert "\\x1b[2J mode=auto" in said[0]
    assert [line for line in lines if "path=/v1/files\\x1b[2J " in line]
