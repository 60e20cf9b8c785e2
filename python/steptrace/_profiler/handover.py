"""torch.profiler and steptrace in one process: CUPTI has one set of activity callbacks, so while
a profiler session that records CUDA activity runs, steptrace hands CUPTI to it and takes it back
when the session stops (steps in between are counted apart in the device figures). While any
session runs, steps and phases are also annotated in its trace (``_annotate``). Installed once,
at ``import steptrace``: on torch's profiler module if torch is already imported, else when torch
imports it. Costs nothing per step, and touches nothing else."""

from __future__ import annotations

from typing import Any

from .. import _core
from . import annotate as _annotate
from .._common.when_imported import when_imported

_PROFILER_MODULE = "torch.autograd.profiler"


def install() -> None:
    """Wraps torch's profiler session start and stop now, or as soon as torch imports them."""
    when_imported(_PROFILER_MODULE, wrap)


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
            result = prepare(config, activities, *args, **kwargs)
        except BaseException:
            if handed:
                _core.reclaim_cupti()
            raise
        _annotate.start()
        return result

    def _disable_profiler(*args: Any, **kwargs: Any) -> Any:
        _annotate.stop()
        try:
            return disable(*args, **kwargs)
        finally:
            _core.reclaim_cupti()

    _prepare_profiler._steptrace = True  # type: ignore[attr-defined]
    module._prepare_profiler = _prepare_profiler
    module._disable_profiler = _disable_profiler
