"""Marks steps from a training framework's hooks (Lightning, Hugging Face Trainer).

A step runs from the start of one training step (its `compute`) to the start of the next, so
everything the framework does between two steps is in a step: the batch fetch itself (a torch
DataLoader iterator's ``__next__`` on the training thread, which this module times while a
loop is running) is `input`; the other callbacks, moving the batch, scheduler updates are
`other`. Validation or evaluation, checkpoint saving and logging run between steps too: they
are set aside (``Tracer.exclude``) under their own names, so they are reported apart. At the
start of an epoch, everything until the first step (creating the loader's iterator, starting
its workers, the first fetches) is `input`, claimed by that first step.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Dict, List, Optional

from .._tracer.api import Tracer, default_tracer


class LoopMarks:
    def __init__(self, tracer: Optional[Tracer] = None) -> None:
        self._tracer = tracer or default_tracer()
        self._input = self._tracer.phase("input")
        self._compute = self._tracer.phase("compute")
        self._step = self._tracer.step()
        self._fetching = False  # the held `input` of an epoch's start
        self._stepping = False  # a step is open
        self._computing = False  # ... and its compute phase
        self._in_fetch = False  # inside a timed DataLoader fetch
        self._aside: Optional[Any] = None  # the open set-aside scope
        self.aside_name: Optional[str] = None
        self._restore: List[Callable[[], None]] = []

    @property
    def tracer(self) -> Tracer:
        return self._tracer

    def runs_in(self, framework: str) -> None:
        """Tells the diagnosis which framework runs the loop, so its advice names that framework's
        knobs (TrainingArguments(dataloader_num_workers=...), Lightning's callbacks)."""
        self._tracer.set_fact("framework", framework)

    # The loop: an epoch, its steps, its end.

    def epoch_begins(self) -> None:
        """Until the first step, time is `input` (the iterator, its workers, the first batch)."""
        self.step_ends()
        if not self._fetching:
            self._input.__enter__()
            self._fetching = True

    def _fetch_ends(self) -> None:
        if self._fetching:
            self._input.__exit__(None, None, None)
            self._fetching = False

    def compute_begins(self) -> None:
        """The framework's training step starts: the step before ends here, a new one begins."""
        self.set_aside_ends()
        self._fetch_ends()
        # Compute still open: the framework skipped our end hook (an exception it swallowed).
        self.step_ends(failed=self._computing)
        self._step.__enter__()
        self._stepping = True
        self._compute.__enter__()
        self._computing = True

    def compute_ends(self) -> None:
        """The training step is done; the step stays open for what the framework does next."""
        if self._computing:
            self._compute.__exit__(None, None, None)
            self._computing = False

    def step_ends(self, failed: bool = False) -> None:
        self.compute_ends()
        if self._stepping:
            self._step.__exit__(RuntimeError if failed else None, None, None)
            self._stepping = False

    def loop_ends(self) -> None:
        """The end of training, or of an epoch: a step open after its compute is complete."""
        self.step_ends(failed=self._computing)
        self.set_aside_ends()
        self._fetch_ends()

    def interrupted(self) -> None:
        """An exception ended the loop: the open step failed."""
        self.step_ends(failed=True)
        self.loop_ends()

    # Set-aside spans.

    def set_aside_begins(self, name: str) -> None:
        """From now until set_aside_ends(), time is set aside under ``name``. An open step or
        fetch stays open: the span is taken out of it."""
        self.set_aside_ends()
        self._aside = self._tracer.exclude(name)
        self._aside.__enter__()
        self.aside_name = name

    def set_aside_ends(self) -> None:
        if self._aside is not None:
            self._aside.__exit__(None, None, None)
            self._aside = None
            self.aside_name = None

    def set_aside_calls(self, obj: Any, method: str, name: str) -> None:
        """Every call of ``obj.method`` runs set aside under ``name``, until restore()."""
        original = getattr(obj, method, None)
        if original is None or getattr(original, "_steptrace_set_aside", False):
            return
        scope = self._tracer.exclude(name)

        @functools.wraps(original)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with scope:
                return original(*args, **kwargs)

        wrapped._steptrace_set_aside = True  # type: ignore[attr-defined]
        try:
            setattr(obj, method, wrapped)
        except (AttributeError, TypeError):  # slots, a read-only attribute: not set aside, not broken
            return
        self._restore.append(lambda: obj.__dict__.pop(method, None) if hasattr(obj, "__dict__") else None)

    def restore(self) -> None:
        """Undoes set_aside_calls and stops timing fetches: the framework is as it was."""
        while self._restore:
            self._restore.pop()()
        _fetches.stop(self)

    # The batch fetch.

    def time_fetches(self) -> None:
        """From now until restore(), a DataLoader fetch on this thread is timed as `input`."""
        _fetches.start(self)

    def _fetch(self, fetch: Callable[[Any], Any], iterator: Any) -> Any:
        if self._aside is not None or self._fetching or self._in_fetch:
            return fetch(iterator)  # set aside, already in `input`, or a fetch inside a fetch
        self._in_fetch = True
        try:
            with self._input:
                return fetch(iterator)
        finally:
            self._in_fetch = False


class _FetchWatch:
    """Wraps torch's DataLoader iterator ``__next__`` while any loop runs: a fetch on the thread
    of a running loop goes through its LoopMarks; any other call is the original, unchanged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._marks: Dict[int, LoopMarks] = {}
        self._original: Optional[Callable[[Any], Any]] = None

    def start(self, marks: LoopMarks) -> None:
        try:
            from torch.utils.data.dataloader import _BaseDataLoaderIter
        except ImportError:  # no torch, or a version without it: fetches are `other`
            return
        with self._lock:
            self._marks[threading.get_ident()] = marks
            if self._original is None:
                original = _BaseDataLoaderIter.__next__
                watched = self._marks

                @functools.wraps(original)
                def timed_next(iterator: Any) -> Any:
                    marks = watched.get(threading.get_ident())
                    return original(iterator) if marks is None else marks._fetch(original, iterator)

                self._original = original
                _BaseDataLoaderIter.__next__ = timed_next  # type: ignore[method-assign]

    def stop(self, marks: LoopMarks) -> None:
        with self._lock:
            for thread, held in list(self._marks.items()):
                if held is marks:
                    del self._marks[thread]
            if not self._marks and self._original is not None:
                from torch.utils.data.dataloader import _BaseDataLoaderIter

                _BaseDataLoaderIter.__next__ = self._original  # type: ignore[method-assign]
                self._original = None


_fetches = _FetchWatch()
