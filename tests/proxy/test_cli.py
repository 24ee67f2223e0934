"""proxy/cli.py given a config it cannot use: one clear line on stderr, no traceback, exit 1.

Each command runs as a real subprocess, as an operator would run it, so what is checked is what
they would see.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
            "Error: memory.placment: unknown key; did you mean memory.placement?",
        ),
        (
            "auth: {keys: [{key: sk-moim-s3cret, users: []}]}\n",
            {},
            "Error: auth.keys[0].users: the list is empty;",
        ),
        ("server: {port: 70000}\n", {}, "Error: server.port: must be from 1 to 65535, got 70000"),
        ("", {"MOIM_PORT": "99999"}, "Error: MOIM_PORT: must be from 1 to 65535, got 99999"),
        (
            "db: no/such/directory/moim.db\n",
            {},
            "Error: db: cannot create no/such/directory/moim.db: "
            "no such directory no/such/directory",
        ),
    ],
)
def test_a_config_error_is_one_clear_line_and_a_non_zero_exit(tmp_path, yaml_text, env, error):
    result = moim(tmp_path, yaml_text, env)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(error), result.stderr
    assert "Traceback" not in result.stderr
    assert "sk-moim-s3cret" not in result.stderr


def test_a_store_that_cannot_be_opened_is_one_clear_line(tmp_path):
    result = moim(tmp_path, "db: no/such/directory/moim.db\n", verb="migrate")
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("Error: cannot open no/such/directory/moim.db"), result.stderr
    assert "Traceback" not in result.stderr
