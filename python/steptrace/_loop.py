"""The steps() loop: each item one step, getting it its `input`, nothing left open on any exit."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional, TypeVar

from . import _annotate, _core

T = TypeVar("T")
StepError = _core.StepError

_IDLE, _FETCHING, _OPENING, _IN_STEP = range(4)  # what a steps() loop has open


def steps(core: Any, iterable: Iterable[T], handle: Optional[int]) -> Iterator[T]:
    # An instrumented loader times its own fetches; timing them here too would count twice.
    time_input = not getattr(iterable, "_steptrace_times_input", False)
    it = iter(iterable)
    # `state` is assigned right before the C call it names. CPython raises an interrupt only
    # after a call returns, at a loop's back edge or on entering a Python function, never
    # between an assignment and the C call after it, so at any exception `state` says exactly
    # what this loop has open. Nothing below calls a Python function while something is open.
    state = _IDLE
    failed = False
    annotated = False  # a torch.profiler session records: steps and fetches are ranges in its trace
    try:
        while True:
            state = _FETCHING
            annotated = _annotate.active  # read once a step
            if time_input:
                core.begin_phase(_core.INPUT)
                if annotated:
                    _annotate.begin(it, "input")
            try:
                item = next(it)
            except StopIteration:
                return
            state = _IDLE
            if time_input:
                if annotated:
                    _annotate.end(it)
                core.end_phase(_core.INPUT)
            state = _OPENING
            core.begin_step(handle)  # StepError if a step is open: then nothing was opened
            state = _IN_STEP
            if annotated:
                _annotate.begin(core, "step")
            yield item
            state = _IDLE
            if annotated:
                _annotate.end(core)
            core.end_step(False)
    except GeneratorExit:
        raise  # the loop was left: its open step ends as completed
    except StepError:
        failed = state != _OPENING  # from begin_step: nothing was opened
        raise
    except BaseException:
        failed = True
        raise
    finally:
        # Closed here, inline: a call to a Python function would be a point where an interrupt
        # can land before the close runs. Each close sits in the `finally` of the one before,
        # so an interrupt surfacing after one C call still lets the next one run.
        if annotated:  # end() closes only a range its owner has innermost: safe whatever is open
            _annotate.end(core)
            _annotate.end(it)
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
