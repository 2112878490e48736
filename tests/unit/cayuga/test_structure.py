"""The engine's modules: a facade over two instance stores, without an import circle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[3] / "matchers" / "cayuga"


def _imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at any depth of its body)."""
    out: dict[str, set[str]] = {}
    for path in PKG.glob("*.py"):
        deps: set[str] = set()
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.ImportFrom) and n.level == 1:
                deps.update([n.module] if n.module else [a.name for a in n.names])
        out[path.stem] = deps
    return out


def test_no_module_imports_the_engine_and_there_is_no_circle():
    graph = _imports()
    assert not any("engine" in deps for deps in graph.values())
    done: set[str] = set()

    def visit(mod: str, path: tuple[str, ...]) -> None:
        assert mod not in path, f"import circle: {' -> '.join((*path, mod))}"
        if mod in done:
            return
        for dep in graph.get(mod, ()):
            visit(dep, (*path, mod))
        done.add(mod)

    for mod in graph:
        visit(mod, ())


def test_the_engine_without_the_flat_store_imports_no_numba():
    code = ("import sys; from matchers.cayuga.engine import Engine; e = Engine(); "
            "e.add('q', 'Stock NEXT{$2.price > $1.price} Stock'); print('numba' in sys.modules)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PKG.parents[1])
    assert ran.stdout.strip() == "False"
