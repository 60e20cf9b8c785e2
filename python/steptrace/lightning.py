"""PyTorch Lightning: steps and phases with no other code change.

    import lightning as L
    from steptrace.lightning import StepTraceCallback

    trainer = L.Trainer(callbacks=[StepTraceCallback()])

Each training batch is one step, from the start of its training step to the start of the
next: the training step (forward, backward, optimizer) is `compute`, the batch fetch itself
(the DataLoader's ``next()``) is `input`, and the rest of the loop between two steps (other
callbacks, moving the batch, scheduler updates) is `other`. Set aside, and reported apart under
their names: validation (`validation`), checkpoint saving (`checkpoint`, every call of
``trainer.save_checkpoint``, so ModelCheckpoint too) and logger writes (`logging`).

Each live window's figures (every ``live`` seconds, or every 10 s) go to the trainer's loggers
(TensorBoard, W&B, MLflow, CSV: whichever it has) under ``steptrace/``, at the trainer's global
step, from rank zero; ``log_windows=False`` keeps them out.
"""

from __future__ import annotations

from typing import Any, Optional

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone package
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]

from ._tracer.api import Tracer
from ._frameworks.hooks import LoopMarks
from ._tracer.loader_facts import tell_settings
from ._live.windows import Latest, numbers


class StepTraceCallback(Callback):
    def __init__(self, tracer: Optional[Tracer] = None, log_windows: bool = True) -> None:
        super().__init__()
        self._marks = LoopMarks(tracer)
        self._log_windows = log_windows
        self._windows: Optional[Latest] = None  # on rank zero while fitting

    @property
    def tracer(self) -> Tracer:
        return self._marks.tracer

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._marks.runs_in("lightning")
        self._marks.set_aside_calls(trainer, "save_checkpoint", "checkpoint")
        for logger in getattr(trainer, "loggers", None) or []:
            self._marks.set_aside_calls(logger, "log_metrics", "logging")
            self._marks.set_aside_calls(logger, "save", "logging")
        self._marks.time_fetches()
        if self._log_windows and getattr(trainer, "is_global_zero", True) and getattr(trainer, "loggers", None):
            self._windows = Latest(self.tracer._core)

    def _log_window(self, trainer: Any) -> None:
        """The latest live window, if one came since the last, to each of the trainer's loggers
        (their writes are set aside as `logging`)."""
        window = self._windows.take() if self._windows is not None else None
        if window is None:
            return
        values = numbers(window)
        for logger in trainer.loggers:
            logger.log_metrics(values, step=trainer.global_step)

    def _stop_windows(self) -> None:
        if self._windows is not None:
            self._windows.close()
            self._windows = None

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._marks.loop_ends()
        self._log_window(trainer)
        self._stop_windows()
        self._marks.restore()

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._marks.epoch_begins()
        loader = getattr(trainer, "train_dataloader", None)  # one loader, or a dict or list of them
        if isinstance(loader, dict):
            loader = next(iter(loader.values()), None)
        elif isinstance(loader, (list, tuple)):
            loader = loader[0] if loader else None
        if loader is not None:
            tell_settings(self._marks.tracer, loader)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._marks.compute_begins()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._marks.compute_ends()
        self._log_window(trainer)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._marks.set_aside_begins("validation")

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._marks.set_aside_ends()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._marks.loop_ends()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._marks.interrupted()
        self._stop_windows()
        self._marks.restore()
