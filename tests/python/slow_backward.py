"""A delay inside backward for the rank jobs (ranks_job.py, live_ranks_job.py): an autograd
function whose forward is the identity and whose backward sleeps when told to, each sleep's length
kept as the process's own clock measured it (the test's truth)."""

import time
from typing import Callable, List

import torch


def slow_backward(delay_s: Callable[[], float], slept: List[float]) -> type:
    """The function class: its backward sleeps delay_s() seconds (0: not at all), appending each
    sleep's length in ms to `slept`."""

    class SlowBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            seconds = delay_s()
            if seconds > 0:
                t0 = time.perf_counter()
                time.sleep(seconds)
                slept.append(1000 * (time.perf_counter() - t0))
            return grad

    return SlowBackward
