"""The memory package's shape: SQL only in `memory/store/`, no HTTP anywhere in `memory/`."""

import ast
from pathlib import Path

MEMORY = Path(__file__).resolve().parents[2] / "memory"


def _modules() -> list[Path]:
    return sorted(MEMORY.rglob("*.py"))


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def _calls_execute(path: Path) -> bool:
    return any(
        isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript")
        for node in ast.walk(ast.parse(path.read_text()))
    )


def test_sql_runs_only_in_the_store_package():
    outside = [
        str(p.relative_to(MEMORY)) for p in _modules() if "store" not in p.relative_to(MEMORY).parts
    ]
    assert outside, "the walk found no modules"
    assert [m for m in outside if _calls_execute(MEMORY / m)] == []


def test_memory_imports_no_http_and_nothing_from_proxy():
    for path in _modules():
        assert not _imported(path) & {"proxy", "starlette", "httpx", "uvicorn"}, path


def test_every_subsystem_folder_is_a_documented_package():
    folders = [p for p in MEMORY.iterdir() if p.is_dir() and p.name != "__pycache__"]
    for folder in folders:
        if folder.name == "assets":
            continue
        init = folder / "__init__.py"
        assert init.exists(), folder
        assert ast.get_docstring(ast.parse(init.read_text())), init
