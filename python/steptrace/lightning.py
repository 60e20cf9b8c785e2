"""PyTorch Lightning: steps and phases with no other code change.

    import lightning as L
    from steptrace.lightning import StepTraceCallback

    trainer = L.Trainer(callbacks=[StepTraceCallback()])

Each training batch is one step: waiting for the batch is `input`, the training step
(forward, backward, optimizer) is `compute`. Set aside, and reported apart under their names:
validation (`validation`), checkpoint saving (`checkpoint`, every call of
``trainer.save_checkpoint``, so ModelCheckpoint too) and logger writes (`logging`).
"""

from __future__ import annotations

from typing import Any, Optional

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone package
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]

from ._api import Tracer
from ._hooks import LoopMarks


class StepTraceCallback(Callback):
    def __init__(self, tracer: Optional[Tracer] = None) -> None:
        super().__init__()
        self._marks = LoopMarks(tracer)

    @property
    def tracer(self) -> Tracer:
        return self._marks.tracer

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._marks.set_aside_calls(trainer, "save_checkpoint", "checkpoint")
        for logger in getattr(trainer, "loggers", None) or []:
            self._marks.set_aside_calls(logger, "log_metrics", "logging")
            self._marks.set_aside_calls(logger, "save", "logging")

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._marks.restore()

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._marks.fetch_begins()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._marks.step_begins()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._marks.step_ends()
        self._marks.fetch_begins()

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._marks.set_aside_begins("validation")

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._marks.set_aside_ends()
        if not trainer.sanity_checking:
            self._marks.fetch_begins()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._marks.fetch_ends()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._marks.interrupted()
        self._marks.restore()
