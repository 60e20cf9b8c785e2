"""Marks steps from a training framework's hooks (Lightning, Hugging Face Trainer).

Frameworks fetch the next batch between two of their hooks, so the time from the end of one
step to the start of the next is the `input` phase (the step that follows claims it), and the
time between the step's hooks is `compute`. Evaluation runs between steps too; it is cut out.
"""

from __future__ import annotations

from typing import Optional

from ._api import Tracer, default_tracer


class LoopMarks:
    def __init__(self, tracer: Optional[Tracer] = None) -> None:
        self._tracer = tracer or default_tracer()
        self._input = self._tracer.phase("input")
        self._compute = self._tracer.phase("compute")
        self._step = self._tracer.step()
        self._fetching = False
        self._stepping = False

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

    def interrupted(self) -> None:
        self.step_ends(failed=True)
        self.fetch_ends()
