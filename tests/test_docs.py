"""The user's documentation keeps up with the code (cf. sqlite-utils' tests/test_docs.py).

Every `moim` command and option has help text and every command is in README.md's CLI
reference; every key config.py reads is in the commented config.yaml; the README's local links
lead somewhere; the install and test commands CI runs (.ci/run) are the README's.
"""

import ast
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from proxy.cli import main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def commands(group=main, path=("moim",)):
    """(`moim memory export`, its command) for every command under `group`, groups included."""
    for name, command in sorted(group.commands.items()):
        yield " ".join((*path, name)), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


COMMANDS = dict(commands())


def test_the_tree_holds_every_command_the_readme_lists():
    assert {"moim serve", "moim memory export", "moim facts unpin"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_text(name):
    command = COMMANDS[name]
    result = CliRunner().invoke(main, [*name.split()[1:], "--help"])

    assert (command.help or "").strip(), f"{name} has no help text"
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", ["moim", *COMMANDS])
def test_every_option_has_help_text(name):
    command = main if name == "moim" else COMMANDS[name]
    options = [param for param in command.params if isinstance(param, click.Option)]

    assert [option.opts for option in options if not (option.help or "").strip()] == []


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_is_in_the_readme(name):
    assert f"`{name}" in README, f"README.md's CLI reference lacks `{name}`"


def config_keys():
    """The keys `proxy/config.py`, `config_keys.py` and `config_embedder.py` read: the string
    literal naming each one where it is read.

    That is an argument of its readers (`typed(mem, "tools", …)`) or of a mapping's `.get`, a
    subscript, or the left side of an `in` test; environment variables (upper case) are not.
    """
    source = "\n".join(
        (REPO / "proxy" / name).read_text(encoding="utf-8")
        for name in ("config.py", "config_keys.py", "config_embedder.py")
    )
    tree = ast.parse(source)
    readers = {"typed": 1, "_choice": 1, "_section": 1, "_list": 1, "above_zero": 2}
    readers["at_least"] = 2
    for node in ast.walk(tree):
        named = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            position = readers.get(node.func.id)
            if position is not None and len(node.args) > position:
                named = node.args[position]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and node.args:
                named = node.args[0]
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            named = node.left
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            named = node.slice
        if isinstance(named, ast.Constant) and isinstance(named.value, str):
            if named.value.islower():
                yield named.value


def test_config_keys_are_found():
    keys = set(config_keys())

    assert {"db", "tools", "busy_timeout", "admin_keys", "min_new_turns", "tiers"} <= keys
    assert {"key", "users", "user_id"} <= keys  # in auth.keys entries
    assert not {key for key in keys if key.startswith("MOIM_")}


@pytest.mark.parametrize("key", sorted(set(config_keys())))
def test_every_config_key_is_in_the_commented_config_yaml(key):
    text = (REPO / "config.yaml").read_text(encoding="utf-8")

    assert re.search(rf"(^|[\s{{#,]){key}:", text, re.MULTILINE), f"config.yaml lacks {key}"


@pytest.mark.parametrize("document", ["README.md", "docs/benchmarks.md", "CHANGELOG.md"])
def test_local_links_lead_to_files_in_the_repository(document):
    text = (REPO / document).read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]

    assert [t for t in local if not (REPO / document).parent.joinpath(t).exists()] == []


def test_the_readme_gives_the_commands_ci_runs():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")

    assert 'pip install ".[test]" && python -m pytest -q' in README
    for check in ("ruff check .", "ruff format --check .", "mypy --strict memory proxy"):
        assert check in ci and check in README
