"""Postgres unreachable: at start a clear error without the password; later, chat fails open,
the memory API answers 503 in OpenAI's shape, and no completed turn is lost (it waits in the
replica's local journal file and is stored once the server is back). Every replica stays
ready meanwhile ("degraded"): draining them all would stop chat too; a replica whose own
journal fails is unready."""

import shutil
import tempfile
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from click.testing import CliRunner

from proxy.cli import main
from tests.e2e.test_replicas import Replica, chat
from tests.e2e.test_writer_faults import eventually, fill_disk


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


def test_replicas_stay_ready_while_the_database_is_down_but_not_with_their_journal_failing(
    own_server, upstream, tmp_path
):
    home, server = own_server
    url = server.get_uri("moim")
    a, b = (Replica(url, upstream.url, tmp_path / name) for name in ("a", "b"))
    try:
        for replica in (a, b):
            replica.wait("/health/readiness")
        server.cleanup()  # the database every replica shares goes away
        fill_disk(tmp_path / "a" / "moim.db.journal")  # and a's own journal fails too

        def readiness(replica):
            response = httpx.get(replica.root + "/health/readiness", timeout=30)
            return response.status_code, response.json()

        for replica in (a, b):
            answered = chat(replica, "rui", "My scooter is a red Vespa")  # asserts a 200
            assert "x-memory-error" in answered.headers
        eventually(lambda: "store failing" in readiness(b)[1].get("writer", ""), 60)
        status, body = readiness(b)
        assert (status, body["status"]) == (200, "degraded")
        assert "(StoreUnavailable)" in body["writer"]
        eventually(lambda: "journal failing" in readiness(a)[1].get("writer", ""), 60)
        status, body = readiness(a)
        assert (status, body["status"]) == (503, "failing")
    finally:
        for replica in (a, b):
            replica.__exit__(None, None, None)
