"""Runs a function on a module of another package (torch) once it is imported: at once if it
already is, else right after its import, through an import hook that finds the module with the
other finders and steps aside after that one import. steptrace never imports torch itself."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Set

_done: Set[str] = set()


def when_imported(name: str, wrap: Callable[[Any], None]) -> None:
    """Calls ``wrap(module)`` once for module ``name``; an exception in it is swallowed (the
    import it follows must never fail because of steptrace)."""
    if name in _done:
        return
    _done.add(name)
    module = sys.modules.get(name)
    if module is not None:
        _call(wrap, module)
    else:
        sys.meta_path.insert(0, _Finder(name, wrap))


def _call(wrap: Callable[[Any], None], module: Any) -> None:
    try:
        wrap(module)
    except Exception:
        pass


class _Finder:
    def __init__(self, name: str, wrap: Callable[[Any], None]) -> None:
        self._name = name
        self._wrap = wrap

    def find_spec(self, name: str, path: Any, target: Any = None) -> Optional[Any]:
        if name != self._name:
            return None
        sys.meta_path.remove(self)  # once only
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, self._wrap)
        return spec


class _Loader:
    """Loads the module as its own loader would, then wraps it; everything else is the original's."""

    def __init__(self, inner: Any, wrap: Callable[[Any], None]) -> None:
        self._inner = inner
        self._wrap = wrap

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        _call(self._wrap, module)
