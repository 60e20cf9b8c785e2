"""steptrace: what is the GPU waiting on?

    import steptrace

    for batch in steptrace.steps(loader):        # each batch is one step; fetching it is `input`
        with steptrace.phase("compute"):
            loss = train_step(batch)

At exit steptrace prints the per-step breakdown (mean / p50 / p95 / max / share per phase), a
diagnosis such as INPUT-BOUND, and the fix to try first. ``steptrace.summary()`` returns the
same as an object (``str()`` is the table, ``to_dict()``, ``to_json(path)``, ``label``).
"""

from ._common.interpreter import refuse_sub_interpreter

refuse_sub_interpreter()  # before the C++ core loads: it would hang there

from ._tracer.api import (  # noqa: E402
    LABELS,
    OPTIONS,
    StepError,
    Summary,
    Tracer,
    capture,
    default_tracer,
    configure,
    exclude,
    log_to,
    metrics,
    on_window,
    phase,
    reset,
    step,
    steps,
    summary,
    window,
)
from ._tracer import exit_report as _exit  # noqa: E402,F401  (the report at exit)
from ._traces.load import load  # noqa: E402
from ._common.paths import cmake_dir, include_dir  # noqa: E402
from ._common.version import __version__  # noqa: E402,F401  (steptrace.__version__)


__all__ = [
    "LABELS",
    "OPTIONS",
    "StepError",
    "Summary",
    "Tracer",
    "cmake_dir",
    "default_tracer",
    "capture",
    "configure",
    "exclude",
    "include_dir",
    "load",
    "log_to",
    "metrics",
    "on_window",
    "phase",
    "reset",
    "step",
    "steps",
    "summary",
    "window",
]
