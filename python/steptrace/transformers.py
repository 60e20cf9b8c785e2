"""Hugging Face Trainer: steps and phases with no other code change.

    from steptrace.transformers import StepTraceCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[StepTraceCallback()])

Each optimizer step is one step, from its start to the start of the next: the step itself
(forward and backward of every accumulated micro-batch, the optimizer) is `compute`, the batch
fetches (the DataLoader's ``next()``) are `input`, and the rest of the loop between two steps
(other callbacks, moving batches) is `other`. What the Trainer does after a step when its
flags say so is set aside and reported apart: logging (`logging`), evaluation (`evaluation`)
and checkpoint saving (`checkpoint`).
"""

from __future__ import annotations

from typing import Any, List, Optional

from transformers import TrainerCallback

from ._api import Tracer
from ._hooks import LoopMarks
from ._loader_facts import tell_settings

# In the order the Trainer runs them after a step: (its control flag, the name set aside under).
_AFTER_STEP = (("should_log", "logging"), ("should_evaluate", "evaluation"), ("should_save", "checkpoint"))


class StepTraceCallback(TrainerCallback):
    def __init__(self, tracer: Optional[Tracer] = None) -> None:
        self._marks = LoopMarks(tracer)
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
        self._marks.loop_ends()
        self._marks.restore()
