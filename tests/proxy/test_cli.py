"""`moim serve`'s startup banner: where it listens, where requests go, whether memory is on."""

import os
import socket
import subprocess
import sys
from pathlib import Path

from memory import Settings
from proxy.cli import banner
from proxy.config import Config


def test_banner_names_the_upstream_without_its_secrets():
    config = Config(
        upstream_base_url="https://user:s3cret@api.example.com:8443/v1?api-key=s3cret#x",
        upstream_api_key="sk-s3cret",
        memory=Settings(db_path=Path("/data/moim.db")),
    )

    assert banner(config).splitlines() == [
        "moim on http://127.0.0.1:8080/v1  (db /data/moim.db)",
        "  upstream: https://api.example.com:8443/v1 (provider key from config);"
        " other /v1/ requests pass through",
        "  memory:   on (chat completions)",
    ]


def test_banner_without_an_upstream_and_with_memory_off():
    lines = banner(Config(memory_enabled=False)).splitlines()

    assert lines[1] == (
        "  upstream: none: provider/model names go through litellm; other /v1/ requests get 404"
    )
    assert lines[2] == "  memory:   off"


def test_banner_of_an_unparsable_url_says_only_that_it_is_set():
    config = Config(upstream_base_url="http://user:s3cret@host:notaport/v1")

    assert "s3cret" not in banner(config)
    assert "(set, not a valid URL)" in banner(config)


def test_moim_serve_prints_the_banner(tmp_path):
    env = {
        **os.environ,
        "MOIM_UPSTREAM_BASE_URL": "http://me:s3cret@127.0.0.1:9/v1",
        "MOIM_UPSTREAM_API_KEY": "sk-s3cret",
        "MOIM_MEMORY": "off",
        "MOIM_DB": str(tmp_path / "moim.db"),
    }
    with socket.socket() as probe:  # a free port, in case the server gets as far as binding
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "proxy.cli", "serve", "--port", str(port)]
    command += ["--config", os.devnull]
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as server:
        try:
            lines = [server.stderr.readline() for _ in range(3)]
        finally:
            server.terminate()
            server.communicate(timeout=30)

    assert lines[0].startswith(f"moim on http://127.0.0.1:{port}/v1")
    assert lines[1].startswith("  upstream: http://127.0.0.1:9/v1 (provider key from config)")
    assert lines[2] == "  memory:   off\n"
    assert "s3cret" not in "".join(lines)
