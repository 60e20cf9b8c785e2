"""``log_to(target)``: each live window into an experiment tracker, recognised by what it is
handed: a TensorBoard ``SummaryWriter``, a ``wandb`` run, or the ``mlflow`` module (or the names
"tensorboard", "wandb", "mlflow"). No tracker package is imported unless named or handed.

The numbers go under ``steptrace/`` (``_windows.numbers``) at the loop's step count; the label
goes as text where the tracker takes text (TensorBoard text, a W&B value, an MLflow tag).
"""

from __future__ import annotations

import importlib
import os
import time
import types
from typing import Any, Callable, Dict, Optional

from .._common import log as _log
from .windows import numbers

Window = Dict[str, Any]


def _tensorboard(writer: Any) -> Callable[[Window], None]:
    def log(window: Window) -> None:
        step = window["step"]
        for key, value in numbers(window).items():
            writer.add_scalar(key, value, global_step=step)
        if window.get("label"):
            writer.add_text("steptrace/label", window["label"], global_step=step)
        writer.flush()  # a window is rare: on disk at once, not at the writer's next flush

    return log


def _wandb(run: Any) -> Callable[[Window], None]:
    # Its own axis, so the run's own wandb.log(step=...) calls are never out of order with ours.
    run.define_metric("steptrace/step")
    run.define_metric("steptrace/*", step_metric="steptrace/step")

    def log(window: Window) -> None:
        values: Dict[str, Any] = {"steptrace/step": window["step"], **numbers(window)}
        if window.get("label"):
            values["steptrace/label"] = window["label"]
        run.log(values)

    return log


def _mlflow(mlflow: Any) -> Callable[[Window], None]:
    # MLflow's active run belongs to the thread that started it: the windows, logged from
    # steptrace's thread, name it.
    run = mlflow.active_run() or mlflow.start_run()
    run_id = run.info.run_id
    client = mlflow.tracking.MlflowClient()
    from mlflow.entities import Metric  # mlflow is loaded: the target was handed or named

    def log(window: Window) -> None:
        step, stamp = window["step"], int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(k, v, stamp, step) for k, v in numbers(window).items()])
        if window.get("label"):
            client.set_tag(run_id, "steptrace.label", window["label"])

    return log


# Each name log_to takes: the package it needs, how to get the target from it, and what to do
# first when there is none.
_BY_NAME = {
    "tensorboard": ("torch.utils.tensorboard", lambda m: m.SummaryWriter(), ""),
    "wandb": ("wandb", lambda m: m.run, "call wandb.init() first"),
    "mlflow": ("mlflow", lambda m: m, ""),
}


def adapter(target: Any) -> Optional[Callable[[Window], None]]:
    """The window listener for `target`; None, said in one line, when its package is missing or a
    named tracker has nothing to log to. TypeError for anything else."""
    if isinstance(target, str):
        if target not in _BY_NAME:
            raise ValueError(f"steptrace.log_to: unknown tracker {target!r}; expected one of {', '.join(_BY_NAME)}")
        name, (module_name, get, first) = target, _BY_NAME[target]
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            _log.say(f"log_to({name!r}): {module_name} is not installed ({e}); no windows go there")
            return None
        target = get(module)
        if target is None:
            _log.say(f"log_to({name!r}): no run to log to ({first}); no windows go there")
            return None
        if name == "tensorboard":  # a writer made here: where it writes, said once
            _log.say(
                f"log_to('tensorboard'): windows go to {target.get_logdir()} (tensorboard --logdir "
                f"{os.path.dirname(target.get_logdir()) or '.'})"
            )
    if isinstance(target, types.ModuleType) and target.__name__ == "mlflow":
        return _mlflow(target)
    kind = type(target)
    if hasattr(target, "add_scalar") and hasattr(target, "add_text"):
        return _tensorboard(target)
    if kind.__module__.split(".")[0] == "wandb" and hasattr(target, "log") and hasattr(target, "define_metric"):
        return _wandb(target)
    raise TypeError(
        f"steptrace.log_to: cannot log to a {kind.__module__}.{kind.__qualname__}; expected a "
        "SummaryWriter, a wandb run, the mlflow module, or one of the names 'tensorboard', 'wandb', 'mlflow'"
    )
