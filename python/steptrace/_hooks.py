"""Marks steps from a training framework's hooks (Lightning, Hugging Face Trainer).

Frameworks fetch the next batch between two of their hooks, so the time from the end of one
step to the start of the next is the `input` phase (the step that follows claims it), and the
time between the step's hooks is `compute`. Checkpoint saving, validation or evaluation and
logging also run between steps: they are set aside (``Tracer.exclude``) under their own names,
so they are reported apart and never counted as `input`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional

from ._api import Tracer, default_tracer


class LoopMarks:
    def __init__(self, tracer: Optional[Tracer] = None) -> None:
        self._tracer = tracer or default_tracer()
        self._input = self._tracer.phase("input")
        self._compute = self._tracer.phase("compute")
        self._step = self._tracer.step()
        self._fetching = False
        self._stepping = False
        self._aside: Optional[Any] = None  # the open set-aside scope
        self.aside_name: Optional[str] = None
        self._restore: List[Callable[[], None]] = []

    @property
    def tracer(self) -> Tracer:
        return self._tracer

    def fetch_begins(self) -> None:
        if not self._fetching and not self._stepping:
            self._input.__enter__()
            self._fetching = True

    def fetch_ends(self) -> None:
        if self._fetching:
            self._input.__exit__(None, None, None)
            self._fetching = False

    def step_begins(self) -> None:
        self.set_aside_ends()
        self.fetch_ends()
        if self._stepping:  # the framework skipped our end hook (an exception it swallowed)
            self.step_ends(failed=True)
        self._step.__enter__()
        self._stepping = True
        self._compute.__enter__()

    def step_ends(self, failed: bool = False) -> None:
        if not self._stepping:
            return
        self._compute.__exit__(None, None, None)
        error = RuntimeError if failed else None
        self._step.__exit__(error, None, None)
        self._stepping = False

    def set_aside_begins(self, name: str) -> None:
        """From now until set_aside_ends(), time is set aside under ``name``. A fetch already
        open stays open: the span is taken out of it, and the step that claims it."""
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
        """Undoes set_aside_calls: the framework's objects are as they were."""
        while self._restore:
            self._restore.pop()()

    def interrupted(self) -> None:
        self.step_ends(failed=True)
        self.set_aside_ends()
        self.fetch_ends()
