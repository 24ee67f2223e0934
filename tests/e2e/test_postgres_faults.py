"""Postgres unreachable: at start a clear error without the password; later, chat fails open,
the memory API answers 503 in OpenAI's shape, and no completed turn is lost (it waits in the
replica's local journal file and is stored once the server is back)."""

import shutil
import tempfile
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from click.testing import CliRunner

from proxy.cli import main


@pytest.fixture
def own_server(pg_server):
    """A Postgres server of this test's own, which it may stop and start again (after the
    session's `pg_server`, which prepares the environment pgserver reads on import)."""
    import pgserver  # type: ignore[import-untyped]

    home = Path(tempfile.mkdtemp(prefix="moim-pg-fault-"))
    home.chmod(0o755)
    server = pgserver.get_server(home / "data", cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE moim")
    yield home, server
    pgserver.get_server(home / "data", cleanup_mode="stop").cleanup()
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize(
    "url, shown",
    [
        ("postgresql://moim:s3cret-pw@127.0.0.1:9/moim", "postgresql://moim:***@127.0.0.1:9/moim"),
        # libpq's other spelling: the password as a parameter (it was printed as it is)
        (
            "postgresql://moim@127.0.0.1:9/moim?sslmode=disable&password=s3cret-pw",
            "postgresql://moim@127.0.0.1:9/moim?sslmode=disable&password=***",
        ),
    ],
)
def test_unreachable_at_start_names_the_url_without_its_password(tmp_path, monkeypatch, url, shown):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["stats"], env={"MOIM_DB": url})
    assert result.exit_code != 0
    assert shown in result.output
    assert "s3cret-pw" not in result.output


def test_a_server_down_mid_use_loses_no_completed_turn(own_server, make_proxy, upstream):
    home, server = own_server
    proxy = make_proxy(settings={"db_url": server.get_uri("moim")})
    headers = {"authorization": "Bearer sk-client", "x-memory-user-id": "rui"}

    def chat(text):
        return httpx.post(
            proxy.url + "/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]},
            headers=headers,
            timeout=30,
        )

    assert chat("My bicycle is a green Brompton").status_code == 200
    proxy.flush()
    server.cleanup()  # the database goes away
    down = chat("My scooter is a red Vespa")
    assert down.status_code == 200  # chat fails open
    assert "x-memory-error" in down.headers
    stats = httpx.get(proxy.root + "/v1/memory/stats", headers=headers)
    assert stats.status_code == 503
    assert set(stats.json()["error"]) == {"message", "type", "param", "code"}
    import pgserver  # type: ignore[import-untyped]

    pgserver.get_server(home / "data", cleanup_mode="stop")  # back
    deadline = time.monotonic() + 60
    texts: set[str] = set()
    while time.monotonic() < deadline and "My scooter is a red Vespa" not in texts:
        time.sleep(0.5)
        try:
            texts = {m.content for m in proxy.layer.store.messages("rui")}
        except Exception:
            continue
    assert {"My bicycle is a green Brompton", "My scooter is a red Vespa"} <= texts
