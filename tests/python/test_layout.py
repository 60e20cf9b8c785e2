"""The package's imports go one way: no module imports, at any depth (lazily inside a function
too), a module that imports it back. Read from the source, so a circle fails here before it
bites at import time."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent.parent / "python" / "steptrace"


def _imports(path: Path) -> set:
    """The package's own modules `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_the_package_has_no_import_circles():
    modules = {p.stem: p for p in PACKAGE.glob("*.py")}
    graph = {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}
    graph.pop("__init__", None)  # the package's face imports what it exports; nothing imports it
    state = {}

    def visit(name, trail):
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", "import circle: " + " -> ".join(trail + [name])
        state[name] = "open"
        for other in sorted(graph.get(name, ())):
            visit(other, trail + [name])
        state[name] = "done"

    for name in sorted(graph):
        visit(name, [])
