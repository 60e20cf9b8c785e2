"""device_sample on real CUPTI (docs/gpu.md, "Sampled device records"), run by checks.py: 1 s
windows, one in 2 recorded, over 6 s of steps of a known kernel count. Truth: the same loop's
kernels a step under a tracer that records every window. The windows left out are counted apart; every step viewed has exactly its
kernels (none lost at a switch, none from a step left out); CUPTI's kinds come back without a
record on another clock; and a torch.profiler session afterwards still records GPU events."""

from __future__ import annotations

import time
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

import steptrace


def _steps(tracer: steptrace.Tracer, a: torch.Tensor, n: int) -> None:
    for _ in tracer.steps(range(n)):
        with tracer.phase("compute"):
            x = a
            for _ in range(4):  # 4 GEMMs, 4 tanh_ and a sum: the same kernels every step
                x = torch.mm(x, a).tanh_()
            x.sum().item()


def run(check: Callable[[str, bool, str], None]) -> None:
    a = torch.randn(1024, 1024, device="cuda")
    full = steptrace.Tracer(warmup_steps=3, print_at_exit="never")
    _steps(full, a, 40)
    truth = (full.summary().to_dict().get("gpu") or {}).get("kernels_per_step", 0)
    tracer = steptrace.Tracer(warmup_steps=3, print_at_exit="never", device_sample=2, live=1)
    began = time.perf_counter()
    while time.perf_counter() - began < 6.0:
        _steps(tracer, a, 50)
    tracer.configure(live=0, device_sample=1)
    d = tracer.summary().to_dict()
    gpu = d.get("gpu") or {}
    viewed, out = gpu.get("steps_viewed", 0), gpu.get("steps_sampled_out", 0)
    per_step = gpu.get("kernels_per_step", 0)
    bad = dict(d.get("facts") or {}).get("cupti.records_bad_clock", "0")
    ok = (
        gpu.get("sample_every") == 2
        and viewed > 0
        and out > 0
        and viewed + out == d["steps"]
        and truth >= 9
        and abs(per_step - truth) < 1e-6
        and bad == "0"
    )
    check(
        "device_sample=2 on real CUPTI: windows left out counted apart, every viewed step whole",
        ok,
        f"{viewed} steps viewed and {out} left out of {d['steps']}; kernels a viewed step {per_step:.4f} "
        f"(truth, every window recorded: {truth:.4f}); records on another clock {bad}; evidence ends "
        f"'{d['diagnosis']['evidence'][-90:]}'",
    )
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.mm(a, a).sum().item()
    gpu_events = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    check(
        "torch.profiler after device_sample's switches records GPU events", gpu_events >= 2, f"{gpu_events} GPU events"
    )
