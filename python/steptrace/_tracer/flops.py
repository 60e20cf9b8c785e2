"""FLOPs counted once (the ``flops="count"`` option): torch's FlopCounterMode around the next step
that opens, then ``flops_per_step`` set to its count and the fact ``flops.from`` told, so that a
live run gets model FLOP/s and MFU (docs/diagnosis.md, "The ceiling"). Never on the hot path: one
step, through the step hook (``_profiler.annotate``), which is given back after it."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

from .._common import log as _log
from .._profiler import annotate as _annotate


class _Count:
    """Counts the FLOPs of the next step of ``tracer`` (a ``Tracer``), once."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.mode: Any = None
        self.previous: Optional[Callable[[str], None]] = _annotate.hook  # an armed capture's, kept

    def on_step(self, event: str) -> None:
        if event == "begin":
            if self.previous is not None:
                self.previous(event)
            self.begin()
        else:
            self.end()
            if self.previous is not None:
                self.previous(event)

    def begin(self) -> None:
        torch = sys.modules.get("torch")
        if torch is None:
            self.give_back()
            _log.say("flops=count counts with torch's FlopCounterMode, and torch is not imported: no FLOPs counted")
            return
        try:
            from torch.utils.flop_counter import FlopCounterMode

            self.mode = FlopCounterMode(display=False)
            self.mode.__enter__()
        except Exception as e:  # counting must never break the traced program
            self.mode = None
            self.give_back()
            _log.say(f"flops=count: FlopCounterMode could not start ({type(e).__name__}: {e}); no FLOPs counted")

    def end(self) -> None:
        mode, self.mode = self.mode, None
        self.give_back()
        if mode is None:
            return
        try:
            mode.__exit__(None, None, None)
            total = int(mode.get_total_flops())
        except Exception as e:
            _log.say(f"flops=count: FlopCounterMode failed ({type(e).__name__}: {e}); no FLOPs counted")
            return
        if total <= 0:
            _log.say("flops=count: the step counted ran no op FlopCounterMode counts (matmuls, convolutions, "
                     "attention): no FLOPs told")
            return
        note_gpu_name(self.tracer)
        self.tracer.set_fact("flops.from", "FlopCounterMode")
        self.tracer.configure(flops_per_step=total)

    def give_back(self) -> None:
        if _annotate.hook == self.on_step:
            if self.previous is not None:
                _annotate.arm(self.previous)
            else:
                _annotate.disarm()


def arm(tracer: Any) -> None:
    """The next step of ``tracer`` runs under FlopCounterMode; its count becomes flops_per_step."""
    _annotate.arm(_Count(tracer).on_step)


def note_gpu_name(tracer: Any) -> None:
    """Tells ``tracer`` the current CUDA device's name (gpu.name), when the program initialised CUDA:
    the peaks table's key for MFU."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            tracer.set_fact("gpu.name", cuda.get_device_name(cuda.current_device()))
    except Exception:  # a broken CUDA: no name, no MFU
        pass
