"""torch.profiler and steptrace in one process: CUPTI has one set of activity callbacks, so while
a profiler session that records CUDA activity runs, steptrace hands CUPTI to it and takes it back
when the session stops (steps in between are counted apart in the device figures). Installed once,
at ``import steptrace``: on torch's profiler module if torch is already imported, else when torch
imports it. Costs nothing per step, and touches nothing else."""

from __future__ import annotations

import sys
from typing import Any, Optional

from . import _core

_PROFILER_MODULE = "torch.autograd.profiler"
_installed = False


def install() -> None:
    """Wraps torch's profiler session start and stop now, or as soon as torch imports them."""
    global _installed
    if _installed:
        return
    _installed = True
    module = sys.modules.get(_PROFILER_MODULE)
    if module is not None:
        wrap(module)
    else:
        sys.meta_path.insert(0, _WrapWhenImported())


class _WrapWhenImported:
    """An import hook for one module: finds it with the other finders, and wraps it once loaded."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Optional[Any]:
        if name != _PROFILER_MODULE:
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
            spec.loader = _WrappingLoader(spec.loader)
        return spec


class _WrappingLoader:
    """Loads the module as its own loader would, then wraps it; everything else is the original's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        try:
            wrap(module)
        except Exception:  # never break torch's import
            pass


def _records_cuda(activities: Any) -> bool:
    try:
        from torch.profiler import ProfilerActivity

        return ProfilerActivity.CUDA in activities
    except Exception:  # an unknown torch: assume it does, handing CUPTI over is always safe
        return True


def wrap(module: Any) -> None:
    """Hands CUPTI over around ``module._prepare_profiler`` ... ``module._disable_profiler``."""
    prepare = getattr(module, "_prepare_profiler", None)
    disable = getattr(module, "_disable_profiler", None)
    if prepare is None or disable is None or getattr(prepare, "_steptrace", False):
        return

    def _prepare_profiler(config: Any, activities: Any, *args: Any, **kwargs: Any) -> Any:
        handed = _records_cuda(activities)
        if handed:
            _core.yield_cupti("torch.profiler")
        try:
            return prepare(config, activities, *args, **kwargs)
        except BaseException:
            if handed:
                _core.reclaim_cupti()
            raise

    def _disable_profiler(*args: Any, **kwargs: Any) -> Any:
        try:
            return disable(*args, **kwargs)
        finally:
            _core.reclaim_cupti()

    _prepare_profiler._steptrace = True  # type: ignore[attr-defined]
    module._prepare_profiler = _prepare_profiler
    module._disable_profiler = _disable_profiler
