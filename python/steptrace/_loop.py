"""The steps() loop: each item one step, getting it its `input`, nothing left open on any exit."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional, TypeVar

from . import _core

T = TypeVar("T")
StepError = _core.StepError

_IDLE, _FETCHING, _OPENING, _IN_STEP = range(4)  # what a steps() loop has open


def _close_loop(core: Any, handle: Optional[int], state: int, failed: bool, time_input: bool) -> None:
    """Closes what a steps() loop left open. Each close sits in a ``finally`` of the one before,
    so an interrupt surfacing after one call still lets the next one run."""
    if state == _FETCHING:
        try:
            if time_input:
                core.end_phase(_core.INPUT)
        finally:
            if failed:  # the fetch failed: a failed step claims it
                try:
                    core.begin_step(handle)
                finally:
                    core.end_step(True)
    elif state == _IN_STEP or (state == _OPENING and failed):
        core.end_step(failed)


def steps(core: Any, iterable: Iterable[T], handle: Optional[int]) -> Iterator[T]:
    # An instrumented loader times its own fetches; timing them here too would count twice.
    time_input = not getattr(iterable, "_steptrace_times_input", False)
    it = iter(iterable)
    # `state` is assigned right before the C call it names. CPython raises an interrupt only
    # after a call returns (or at a loop's back edge), never between an assignment and the
    # call after it, so at any exception `state` says exactly what this loop has open.
    state = _IDLE
    failed = False
    try:
        while True:
            state = _FETCHING
            if time_input:
                core.begin_phase(_core.INPUT)
            try:
                item = next(it)
            except StopIteration:
                return
            state = _IDLE
            if time_input:
                core.end_phase(_core.INPUT)
            state = _OPENING
            core.begin_step(handle)  # StepError if a step is open: then nothing was opened
            state = _IN_STEP
            yield item
            state = _IDLE
            core.end_step(False)
    except GeneratorExit:
        raise  # the loop was left: its open step ends as completed
    except BaseException as e:
        failed = not (state == _OPENING and isinstance(e, StepError))
        raise
    finally:
        _close_loop(core, handle, state, failed, time_input)
