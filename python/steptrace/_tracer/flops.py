"""FLOPs counted once (the ``flops="count"`` option): torch's FlopCounterMode around the next step
that opens, then ``flops_per_step`` set to its count and the fact ``flops.from`` told, so that a
live run gets model FLOP/s and MFU (docs/diagnosis.md, "The ceiling"). Never on the hot path: one
step, through the step hook (``_profiler.annotate``), which is given back after it."""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Optional

from .._common import log as _log
from .._profiler import annotate as _annotate


MAX_FLOPS = 1e21  # the most flops_per_step takes (core/config.cpp): no device does more in a step


class _Count:
    """Counts the FLOPs of the next step of ``tracer`` (a ``Tracer``), once: the first of its
    steps to open, on the thread it opens on. Another tracer's step, or a step on another thread
    while that one runs, is not counted; the mode is left on the thread that entered it."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.mode: Any = None
        self.thread: Optional[int] = None  # the thread whose step is counted
        self.previous: Optional[Callable[..., None]] = _annotate.hook  # an armed capture's, kept

    def on_step(self, event: str, owner: Any = None) -> None:
        mine = owner is None or owner is self.tracer._core
        if event == "begin":
            if self.previous is not None:
                self.previous(event, owner)
            if mine and self.mode is None and self.thread is None:
                self.begin()
            return
        if mine and self.mode is not None and threading.get_ident() == self.thread:
            self.end(whole=event == "end")
        if self.previous is not None:
            self.previous(event, owner)

    def begin(self) -> None:
        torch = sys.modules.get("torch")
        if torch is None:
            self.give_back()
            _log.say("flops=count counts with torch's FlopCounterMode, and torch is not imported: no FLOPs counted")
            return
        try:
            from torch.utils.flop_counter import FlopCounterMode

            mode = FlopCounterMode(display=False)
            mode.__enter__()
        except Exception as e:  # counting must never break the traced program
            self.give_back()
            _log.say(f"flops=count: FlopCounterMode could not start ({type(e).__name__}: {e}); no FLOPs counted")
            return
        self.mode, self.thread = mode, threading.get_ident()

    def end(self, whole: bool = True) -> None:
        mode, self.mode = self.mode, None
        self.give_back()
        try:
            mode.__exit__(None, None, None)
            total = int(mode.get_total_flops())
        except Exception as e:
            _log.say(f"flops=count: FlopCounterMode failed ({type(e).__name__}: {e}); no FLOPs counted")
            return
        if not whole:
            _log.say("flops=count: the step counted did not end (its loop was left inside it): no FLOPs told")
            return
        if total <= 0:
            _log.say(
                "flops=count: the step counted ran no op FlopCounterMode counts (matmuls, convolutions, "
                "attention): no FLOPs told"
            )
            return
        if total > MAX_FLOPS:  # shapes no device runs in a step: told, it would be an impossible MFU
            _log.say(
                f"flops=count: FlopCounterMode counted {total:.3g} FLOPs in one step, more than the {MAX_FLOPS:.0e} "
                "any device runs in a step (shapes crafted or overflowed?): no FLOPs told"
            )
            return
        try:
            note_gpu_name(self.tracer)
            self.tracer.set_fact("flops.from", "FlopCounterMode")
            self.tracer.configure(flops_per_step=total)
        except Exception as e:  # never out of the program's own step
            _log.say(f"flops=count: the count could not be told ({type(e).__name__}: {e})")

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
