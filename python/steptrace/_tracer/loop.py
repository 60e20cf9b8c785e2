"""The steps() loop: each item one step, getting it its `input`, nothing left open on any exit.
The loop itself is C (`_core.StepLoop`, bindings/step_loop.cpp): see bindings/README.md, "Python loops"."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional, TypeVar

from .. import _core
from .._profiler import annotate as _annotate

T = TypeVar("T")


def steps(core: Any, iterable: Iterable[T], handle: Optional[int]) -> Iterator[T]:
    # An instrumented loader times its own fetches; timing them here too would count twice.
    time_input = not getattr(iterable, "_steptrace_times_input", False)
    return _core.StepLoop(core, iterable, handle, time_input, _annotate)  # type: ignore[no-any-return]
