#!/usr/bin/env python3
"""Fails when a source file includes or imports something its layer may not: the C++ rule is the
table between the include-rule markers in docs/architecture.md, the Python package's the table
between the import-rule markers, both read here so each is written down once. Python imports are
read from the syntax tree, lazy ones inside functions too; besides the rule, no two modules of the
package may import each other, at any depth."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


PACKAGE = ROOT / "python" / "steptrace"


def read_rule(marker: str = "include-rule") -> dict[str, list[str]]:
    text = DOC.read_text(encoding="utf-8")
    if f"<!-- {marker}: begin -->" not in text:
        sys.exit(f"{DOC}: no {marker} markers")
    block = text.split(f"<!-- {marker}: begin -->")[1].split(f"<!-- {marker}: end -->")[0]
    rule = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        rule[cells[0].strip("`")] = re.findall(r"`([^`]+)`", cells[1])
    if not rule:
        sys.exit(f"{DOC}: no {marker} found between the markers")
    return rule


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """steptrace's dotted name of a file of the package (a folder's __init__ is the folder)."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_imports(path: Path, package_dir: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, module) for every module of the package `path` imports, anywhere in it: a name
    imported from a package is that package's module when it is one, else the package."""
    me = module_name(path, package_dir)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "steptrace"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "steptrace":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                is_module = (package_dir.parent / Path(*sub.split("."))).with_suffix(".py").is_file() or (
                    package_dir.parent / Path(*sub.split("."))
                ).is_dir()
                found.append((node.lineno, sub if is_module else source))
    return found


def check_python(package: Path = PACKAGE, rule: dict[str, list[str]] | None = None) -> tuple[int, list[str]]:
    """The import rule (which folder may import which) and no circle among the modules."""
    rule = read_rule("import-rule") if rule is None else rule
    bad, graph = [], {}
    files = sorted(package.rglob("*.py"))
    folders = {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    for folder in sorted(folders - set(rule)):
        bad.append(f"{package.name}/{folder}: a folder the import rule does not name")
    for path in files:
        me = module_name(path, package)
        rel = path.relative_to(package)
        folder = rel.parts[0] if len(rel.parts) > 1 else None
        graph[me] = set()
        for line, target in python_imports(path, package):
            parts = target.split(".")
            graph[me].add(target)
            if folder is None or len(parts) < 2:
                continue  # the package's face and its public modules import any folder
            other = parts[1]
            if other == folder or other == "_core" or other in rule[folder]:
                continue
            bad.append(f"{path.relative_to(package.parent)}:{line}: imports {target}, which {folder} may not")
    graph.pop("steptrace", None)  # the package's face imports what it exports; a module importing
    # steptrace (a public module from a top one) starts at the face, which is loaded first
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "open":
            bad.append("import circle: " + " -> ".join(trail[trail.index(name) :] + [name]))
            return
        state[name] = "open"
        for other in sorted(graph.get(name, ())):
            if other != name:
                visit(other, trail + [name])
        state[name] = "done"

    for name in sorted(graph):
        visit(name, [])
    return len(files), bad


def main() -> int:
    rule = read_rule()
    bad = []
    checked = 0
    # A file takes the row of the deepest folder the table names above it: a subsystem's folder
    # (cpp/src/core/hang) has a row of its own, and the owner's row does not reach into it.
    for folder, allowed in rule.items():
        base = ROOT / folder
        if not base.is_dir():
            bad.append(f"{folder}: named in the include rule but not in the tree")
            continue
        own = folder.removeprefix("cpp/src/") + "/" if folder.startswith("cpp/src/") else None
        deeper = [ROOT / f for f in rule if f != folder and f.startswith(folder + "/")]
        for path in sorted(p for p in base.rglob("*") if p.suffix in (".hpp", ".cpp", ".h")):
            if any(d in path.parents for d in deeper):
                continue  # its own row checks it
            checked += 1
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                target = m.group(1)
                if (own and target.startswith(own)) or any(target.startswith(a) for a in allowed):
                    continue
                if folder == "cpp/include/steptrace" or "/" in target:
                    bad.append(f'{path.relative_to(ROOT)}:{n}: includes "{target}", which {folder} may not')
    modules, py_bad = check_python()
    for b in bad + py_bad:
        print(b)
    print(
        f"include rule: {checked} files checked, {len(bad)} violations; "
        f"import rule: {modules} Python modules checked, {len(py_bad)} violations"
    )
    return 1 if bad or py_bad else 0


if __name__ == "__main__":
    sys.exit(main())
