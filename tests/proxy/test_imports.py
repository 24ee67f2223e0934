"""proxy/'s modules import one another without a cycle (type-only imports included).

A cycle through `proxy.app` made the shared state reachable only by importing the app that
imports every step; `AppState` lives in `proxy/state.py` so that no step needs the app.
Imports inside functions (the CLI's lazy ones) are not edges: they run after loading.
"""

import ast
from pathlib import Path

PROXY = Path(__file__).resolve().parents[2] / "proxy"


def _module_level_imports(tree):
    """Imports at module level, and inside `if TYPE_CHECKING:` blocks."""
    for node in tree.body:
        if isinstance(node, ast.If):
            yield from (n for n in node.body if isinstance(n, ast.Import | ast.ImportFrom))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _graph():
    graph = {}
    for path in sorted(PROXY.glob("*.py")):
        name = f"proxy.{path.stem}"
        edges = set()
        for node in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "proxy":
                edges.update(f"proxy.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("proxy."):
                edges.add(node.module)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name.startswith("proxy."))
        graph[name] = edges - {name}
    return graph


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return trail[trail.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt, [*trail, nxt])):
                return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_the_walk_sees_the_modules_and_their_imports():
    graph = _graph()
    assert "proxy.state" in graph["proxy.app"]
    assert "proxy.state" in graph["proxy.pipeline"]


def test_proxy_modules_import_one_another_without_a_cycle():
    assert _cycle(_graph()) is None
