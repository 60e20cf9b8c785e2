"""Hugging Face Trainer: steps and phases with no other code change.

    from steptrace.transformers import StepTraceCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[StepTraceCallback()])

Each optimizer step is one step: the time between two steps is `input` (the Trainer fetches
the next batch there), the step itself is `compute`. Evaluation is cut out of the gap; logging
and checkpoint saving, which the Trainer gives no start hook for, stay in it.
"""

from __future__ import annotations

from typing import Any, Optional

from transformers import TrainerCallback

from ._api import Tracer
from ._hooks import LoopMarks


class StepTraceCallback(TrainerCallback):
    def __init__(self, tracer: Optional[Tracer] = None) -> None:
        self._marks = LoopMarks(tracer)

    @property
    def tracer(self) -> Tracer:
        return self._marks.tracer

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.fetch_begins()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.step_begins()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.step_ends()
        self._marks.fetch_begins()

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.fetch_ends()  # evaluation is under way

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.fetch_begins()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._marks.interrupted()
