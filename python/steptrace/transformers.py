"""Hugging Face Trainer: steps and phases with no other code change.

    from steptrace.transformers import StepTraceCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[StepTraceCallback()])

Each optimizer step is one step, from its start to the start of the next: the step itself
(forward and backward of every accumulated micro-batch, the optimizer) is `compute`, the batch
fetches (the DataLoader's ``next()``) are `input`, and the rest of the loop between two steps
(other callbacks, moving batches) is `other`. What the Trainer does after a step when its
flags say so is set aside and reported apart: logging (`logging`), evaluation (`evaluation`)
and checkpoint saving (`checkpoint`).

Each live window's figures (every ``live`` seconds, or every 10 s) join the ``logs`` of the
Trainer's next log (``logging_steps``) under ``steptrace/``, so every tracker in ``report_to``
gets them at the Trainer's global step; ``log_windows=False`` keeps them out.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional

from transformers import TrainerCallback

from ._tracer.api import Tracer
from ._frameworks.hooks import LoopMarks
from ._tracer.loader_facts import tell_settings
from ._common.log import say
from ._live.windows import Latest, numbers

# In the order the Trainer runs them after a step: (its control flag, the name set aside under).
_AFTER_STEP = (("should_log", "logging"), ("should_evaluate", "evaluation"), ("should_save", "checkpoint"))


def _handler_of(callback: Any) -> Any:
    """The Trainer's CallbackHandler that holds `callback`: it calls every event, a few frames up."""
    frame = sys._getframe(1)
    for _ in range(8):
        if frame is None:
            break
        handler = frame.f_locals.get("self")
        held = getattr(handler, "callbacks", None)
        if isinstance(held, list) and any(c is callback for c in held):
            return handler
        frame = frame.f_back
    return None


class _WindowLogs:
    """Puts the latest live window into the ``logs`` of the Trainer's next log before any
    callback sees them: the trackers' callbacks come first in the Trainer's list, so the
    handler's ``on_log`` is wrapped rather than a callback added."""

    def __init__(self, handler: Any, windows: Latest) -> None:
        self.handler, self.windows = handler, windows
        original = handler.on_log

        def on_log(args: Any, state: Any, control: Any, logs: Dict[str, Any], *more: Any, **kwargs: Any) -> Any:
            window = self.windows.take()
            if window is not None and isinstance(logs, dict) and getattr(state, "is_world_process_zero", True):
                logs.update(numbers(window))
            return original(args, state, control, logs, *more, **kwargs)

        handler.on_log = on_log  # the instance's own: del restores the class's

    def close(self) -> None:
        self.windows.close()
        self.handler.__dict__.pop("on_log", None)


class StepTraceCallback(TrainerCallback):
    def __init__(self, tracer: Optional[Tracer] = None, log_windows: bool = True) -> None:
        self._marks = LoopMarks(tracer)
        self._log_windows = log_windows
        self._window_logs: Optional[_WindowLogs] = None
        self._pending: List[str] = []
        self._running = False  # between on_train_begin and on_train_end

    @property
    def tracer(self) -> Tracer:
        return self._marks.tracer

    def _after(self, control: Any) -> None:
        """What the Trainer will do now, from its flags; the first of it begins set aside."""
        self._pending = [name for flag, name in _AFTER_STEP if getattr(control, flag, False)]
        self._next()

    def _next(self) -> None:
        if self._pending:
            self._marks.set_aside_begins(self._pending.pop(0))
        else:
            self._marks.set_aside_ends()

    def _done(self, name: str, control: Any) -> None:
        if self._marks.aside_name == name:
            if name == "evaluation" and getattr(control, "should_save", False) and "checkpoint" not in self._pending:
                self._pending.append("checkpoint")  # a new best metric asks for a save
            self._next()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._running = True
        self._marks.runs_in("transformers")
        if self._log_windows and getattr(state, "is_world_process_zero", True):
            handler = _handler_of(self)
            if handler is None:
                say("the Trainer's callback handler was not found: live windows are not logged")
            else:
                self._window_logs = _WindowLogs(handler, Latest(self.tracer._core))
        self._marks.time_fetches()
        loader = kwargs.get("train_dataloader")
        if loader is not None:
            tell_settings(self._marks.tracer, loader)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.epoch_begins()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._pending = []
        self._marks.compute_begins()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.compute_ends()
        self._after(control)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.loop_ends()
        self._after(control)

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._done("logging", control)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._done("evaluation", control)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._done("checkpoint", control)

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # An evaluation the flags did not announce (called from the user's own callback): set
        # aside from its first batch on, until the next step or on_evaluate.
        if self._running and self._marks.aside_name is None:
            self._marks.set_aside_begins("evaluation")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._running = False
        if self._window_logs is not None:
            self._window_logs.close()
            self._window_logs = None
        self._marks.loop_ends()
        self._marks.restore()
