"""The steps() loop: each item one step, getting it its `input`, nothing left open on any exit."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional, TypeVar

from . import _annotate, _core

T = TypeVar("T")


def steps(core: Any, iterable: Iterable[T], handle: Optional[int]) -> Iterator[T]:
    # An instrumented loader times its own fetches; timing them here too would count twice.
    time_input = not getattr(iterable, "_steptrace_times_input", False)
    it = iter(iterable)
    # The guard keeps what this loop has open (the fetch or the step), each move one C call, and
    # closes it as failed if this generator goes without its `finally` having run to the end
    # (an interrupt can cut it short on Python 3.9 and 3.10). See docs/architecture.md.
    guard = _core.LoopGuard(core, handle, time_input)
    failed = False
    annotated = False  # a torch.profiler session records: steps and fetches are ranges in its trace
    in_step = False  # a step opened on the slow path is open
    try:
        while True:
            if not _annotate.watched:  # read once a step: no profiler session, no capture armed
                guard.fetch_begins()
                try:
                    item = next(it)
                except StopIteration:
                    return
                guard.step_begins()  # StepError if a step is open: then this loop has nothing open
                yield item
                guard.step_ends()
                continue
            hook = _annotate.hook  # a capture armed: told when this step begins and ends
            if hook is not None:
                hook("begin")
            annotated = _annotate.active
            guard.fetch_begins()
            if annotated and time_input:
                _annotate.begin(it, "input")
            try:
                item = next(it)
            except StopIteration:
                return
            if annotated and time_input:
                _annotate.end(it)
            guard.step_begins()
            in_step = True
            if annotated:
                _annotate.begin(core, "step")
            yield item
            if annotated:
                _annotate.end(core)
            guard.step_ends()
            in_step = False
            if hook is not None:
                hook("end")
    except GeneratorExit:
        raise  # the loop was left: its open step ends as completed
    except BaseException:
        failed = True  # a failed fetch, an interrupt inside steptrace: that step counts as failed
        raise
    finally:
        if annotated:  # end() closes only a range its owner has innermost: safe whatever is open
            _annotate.end(core)
            _annotate.end(it)
        guard.close(failed)
        hook = _annotate.hook
        if hook is not None:  # the loop ended or was left: a capture in flight ends with the steps it has
            hook("left" if in_step else "stop")  # the step open when it was left has ended too
