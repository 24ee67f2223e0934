"""proxy/cli.py given a config it cannot use: one clear line on stderr, no traceback, exit 1;
and `moim serve`'s startup banner: where it listens, where requests go, whether memory is on.

Each command runs as a real subprocess, as an operator would run it, so what is checked is what
they would see.
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from proxy.cli import banner
from proxy.config import Config, EmbedderConfig

REPO = Path(__file__).resolve().parents[2]


def moim(tmp_path, yaml_text, env=None, verb="serve"):
    config = tmp_path / "moim.yaml"
    config.write_text(yaml_text, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", verb, "--config", str(config)],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "yaml_text, env, error",
    [
        (
            "memory: {placment: system}\n",
            {},
            "Error: {file}: memory.placment: unknown key; did you mean memory.placement?",
        ),
        (
            "auth: {keys: [{key: sk-moim-s3cret, users: []}]}\n",
            {},
            "Error: {file}: auth.keys[0].users: the list is empty;",
        ),
        (
            "server: {port: 70000}\n",
            {},
            "Error: {file}: server.port: must be from 1 to 65535, got 70000",
        ),
        ("", {"MOIM_PORT": "99999"}, "Error: MOIM_PORT: must be from 1 to 65535, got 99999"),
        # The embedding service's address without its scheme was taken, and every turn's
        # indexing then waited on a service never reached (a model's api_base was refused).
        (
            "memory: {embedder: {model: e5, api_base: 'localhost:8081/v1'}}\n",
            {},
            "Error: {file}: memory.embedder.api_base: must be an http:// or https:// URL",
        ),
        (
            "",
            {"MOIM_EMBEDDER_MODEL": "e5", "MOIM_EMBEDDER_API_BASE": "localhost:8081/v1"},
            "Error: MOIM_EMBEDDER_API_BASE: must be an http:// or https:// URL with a host",
        ),
        (
            "",
            {"MOIM_DB": "mysql://moim:sk-moim-s3cret@db-host/moim"},
            "Error: MOIM_DB: mysql:// is not a store moim knows: give a SQLite file's path "
            "(or sqlite:///path) or a postgresql:// URL",
        ),
        # Each thread opened an empty database of its own: the embedder failed to load ("no
        # such table: meta"), readiness said failing, and nothing would have been kept.
        (
            "",
            {"MOIM_DB": ":memory:"},
            "Error: MOIM_DB: :memory: cannot hold moim's memory: give a SQLite file's path",
        ),
        ("db: 'sqlite://:memory:'\n", {}, "Error: {file}: db: :memory: cannot hold moim's memory"),
        ("db: ''\n", {}, "Error: {file}: db: an empty path cannot hold moim's memory"),
    ],
)
def test_a_config_error_is_one_clear_line_and_a_non_zero_exit(tmp_path, yaml_text, env, error):
    result = moim(tmp_path, yaml_text, env)
    assert result.returncode == 1, result.stderr
    # The file is named when the error is in it (env vars name themselves).
    assert result.stderr.startswith(error.format(file=tmp_path / "moim.yaml")), result.stderr
    assert "Traceback" not in result.stderr
    assert "sk-moim-s3cret" not in result.stderr


@pytest.mark.parametrize("given", ["./config.yaml", "MOIM_CONFIG"])
def test_a_config_error_names_the_file_however_it_was_found(tmp_path, given):
    """With no --config the file read is ./config.yaml or MOIM_CONFIG's: say which."""
    config = tmp_path / ("config.yaml" if given == "./config.yaml" else "elsewhere.yaml")
    config.write_text("memroy: {placement: system}\nserver: {max_body_byte: 10}\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    if given == "MOIM_CONFIG":
        clean["MOIM_CONFIG"] = str(config)
    result = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve"],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"Error: {config}: memroy: unknown key; did you mean memory?\n"
        f"{config}: server.max_body_byte: unknown key; did you mean server.max_body_bytes?\n"
    )


@pytest.mark.parametrize(
    "yaml_text, env, name, file",
    [
        ("db: no/such/directory/moim.db\n", {}, "db", "moim.db"),
        ("", {"MOIM_JOURNAL": "no/such/directory/moim.db.journal"}, "journal", "moim.db.journal"),
    ],
)
def test_a_missing_directory_is_named_by_its_absolute_path(tmp_path, yaml_text, env, name, file):
    result = moim(tmp_path, yaml_text, env)

    directory = tmp_path.resolve() / "no/such/directory"  # absolute, as "cannot open" names it
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"Error: {name}: cannot create {directory / file}: no such directory {directory}\n"
    )


def test_a_store_that_cannot_be_opened_is_one_clear_line(tmp_path):
    result = moim(tmp_path, "db: no/such/directory/moim.db\n", verb="migrate")
    assert result.returncode == 1, result.stderr
    db = tmp_path.resolve() / "no/such/directory/moim.db"  # absolute: what finds it
    assert result.stderr.startswith(f"Error: cannot open {db}: "), result.stderr
    assert "Traceback" not in result.stderr


def test_serve_on_a_port_in_use_is_one_clear_line_before_anything_starts(tmp_path):
    """uvicorn found out only after the whole startup (the store opened or created, the
    banner claiming the address), and said so among its shutdown lines, exit status 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = moim(tmp_path, f"server: {{port: {port}}}\n")

    assert result.returncode == 1, result.stderr
    assert result.stderr == f"Error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert not (tmp_path / "moim.db").exists()


def test_serve_on_a_file_that_is_not_a_database_is_one_clear_line(tmp_path):
    """The store was opened in the app's startup: uvicorn printed SQLite's error as a
    traceback and exited 3."""
    (tmp_path / "moim.db").write_text("notes, not a database\n" * 10, encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    result = moim(tmp_path, f"server: {{port: {port}}}\n")

    assert result.returncode == 1, result.stderr
    db = tmp_path.resolve() / "moim.db"
    assert result.stderr == f"Error: cannot open {db}: file is not a database\n"


def test_an_unknown_log_level_is_a_usage_error_naming_the_levels(tmp_path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    result = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", os.devnull, "--log-level", "loud"],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Invalid value for '--log-level': 'loud' is not one of" in result.stderr
    assert "'debug'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "moim.db").exists()


def test_banner_names_the_upstream_without_its_secrets():
    config = Config(
        upstream_base_url="https://user:s3cret@api.example.com:8443/v1?api-key=s3cret#x",
        upstream_api_key="sk-s3cret",
    )

    assert banner(config).splitlines() == [
        "moim on http://127.0.0.1:8080/v1",
        "  upstream: https://api.example.com:8443/v1 (provider key from config);"
        " other /v1/ requests pass through",
        "  memory:   on (chat completions, Responses API)",
    ]


def test_banner_names_a_remote_embedder_without_its_secrets():
    config = Config(
        embedder=EmbedderConfig(
            "text-embedding-3-small", "https://user:s3cret@api.example.com/v1", "sk-s3cret"
        )
    )

    assert banner(config).splitlines()[3] == (
        "  embedder: text-embedding-3-small at https://api.example.com/v1 (key from config)"
    )
    assert "s3cret" not in banner(config)
    assert len(banner(Config()).splitlines()) == 3  # the bundled model: no line


def test_banner_brackets_an_ipv6_address():
    assert banner(Config(host="::1", port=8081)).splitlines()[0] == "moim on http://[::1]:8081/v1"


def test_banner_without_an_upstream_and_with_memory_off():
    lines = banner(Config(memory_enabled=False)).splitlines()

    assert lines[1] == (
        "  upstream: none: every model name goes through litellm (chat completions, embeddings)"
    )
    assert lines[2] == "  memory:   off"


def test_banner_of_an_unparsable_url_says_only_that_it_is_set():
    config = Config(upstream_base_url="http://user:s3cret@host:notaport/v1")

    assert "s3cret" not in banner(config)
    assert "(set, not a valid URL)" in banner(config)


def test_moim_serve_prints_the_banner(tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MOIM_")},
        "PYTHONPATH": str(REPO),
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
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    ) as server:
        try:
            said = [server.stderr.readline() for _ in range(4)]
        finally:
            server.terminate()
            server.communicate(timeout=30)

    assert said[0] == f"moim: creating {tmp_path / 'moim.db'}\n"
    lines = said[1:]
    assert lines[0].startswith(f"moim on http://127.0.0.1:{port}/v1")
    assert lines[1].startswith("  upstream: http://127.0.0.1:9/v1 (provider key from config)")
    assert lines[2] == "  memory:   off\n"
    assert "s3cret" not in "".join(said)


def test_moim_serve_logs_no_credentials_of_the_upstream_url(tmp_path, upstream):
    """A base URL may carry a gateway's credentials: httpx logs each request's URL at INFO, the
    default level (until litellm, loaded for a litellm route, turns httpx down), and logged
    them with it."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MOIM_")},
        "PYTHONPATH": str(REPO),
        "MOIM_UPSTREAM_BASE_URL": upstream.url.replace("http://", "http://me:s3cret@"),
        "MOIM_MEMORY": "off",
        "MOIM_DB": str(tmp_path / "moim.db"),
    }
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "proxy.cli", "serve", "--port", str(port)]
    command += ["--config", os.devnull, "--log-level", "info"]
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    ) as server:
        try:
            said = [""]
            while "Application startup complete" not in said[-1]:
                said.append(server.stderr.readline())
                assert said[-1], "moim stopped: " + "".join(said)
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            # uvicorn says its startup is complete before it binds the port: wait for it
            wait_listening(port)
            assert httpx.post(url, json=body, timeout=30).status_code == 200
            while "HTTP Request: POST" not in said[-1]:
                said.append(server.stderr.readline())
                assert said[-1], "moim stopped: " + "".join(said)
        finally:
            server.terminate()
            server.communicate(timeout=30)

    assert upstream.requests[-1].headers["authorization"].startswith("Basic ")  # still sent
    assert "/v1/chat/completions" in said[-1]
    assert "s3cret" not in "".join(said)


def wait_listening(port, seconds=30.0):
    """Return once something accepts connections on the loopback `port`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_moim_serve_takes_the_environment_over_config_yaml(tmp_path, upstream):
    """CONTRACT.md: each MOIM_* variable beats config.yaml (the file named by MOIM_CONFIG
    here), as `moim serve` reads them: where it listens, the database, the upstream and its
    key, and memory on."""
    port = free_port()
    config = tmp_path / "moim.yaml"
    config.write_text(
        f"server: {{host: 127.0.0.2, port: {free_port()}}}\n"
        f"db: {tmp_path / 'yaml.db'}\n"
        "upstream: {base_url: 'http://127.0.0.1:9/v1', api_key: sk-yaml}\n"
        "memory: {enabled: false}\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MOIM_")},
        "PYTHONPATH": str(REPO),
        "MOIM_CONFIG": str(config),
        "MOIM_HOST": "127.0.0.1",
        "MOIM_PORT": str(port),
        "MOIM_DB": str(tmp_path / "env.db"),
        "MOIM_UPSTREAM_BASE_URL": upstream.url,
        "MOIM_UPSTREAM_API_KEY": "sk-env",
        "MOIM_MEMORY": "on",
    }
    command = [sys.executable, "-m", "proxy.cli", "serve"]
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    ) as server:
        try:
            said = [""]
            while "Application startup complete" not in said[-1]:
                said.append(server.stderr.readline())
                assert said[-1], "moim stopped: " + "".join(said)
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            wait_listening(port)
            response = httpx.post(url, json=body, timeout=30)
        finally:
            server.terminate()
            server.communicate(timeout=30)

    assert (response.status_code, response.headers["x-memory-mode"]) == (200, "auto")
    assert upstream.requests[-1].headers["authorization"] == "Bearer sk-env"
    assert (tmp_path / "env.db").is_file() and not (tmp_path / "yaml.db").exists()
