"""The ceiling on a GPU (docs/diagnosis.md, "The ceiling"), run by checks.py: a bf16 GEMM loop's MFU
(flops_per_step) within 5% of its FLOPs over its CUDA-event time against the peaks table; an fp32
loop's trace (record_shapes) predicting a `ceiling` gain that the same loop in bf16 realises at
least half of."""

from __future__ import annotations

from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

import steptrace


def gemm_steps(tracer: steptrace.Tracer, a: torch.Tensor, b: torch.Tensor, n: int, prof=None) -> float:
    """n steps of 8 matmuls each, synchronised; the device's time a step by CUDA events (ms)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    total = 0.0
    for _ in range(n):
        with tracer.step():
            start.record()
            for _ in range(8):
                torch.mm(a, b)
            end.record()
            end.synchronize()
        total += start.elapsed_time(end)
        if prof is not None:
            prof.step()
    return total / n


def run(check: Callable[[str, bool, str], None], quiet: Callable[[], steptrace.Tracer]) -> None:
    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    flops = 8 * 2.0 * m**3
    t = steptrace.Tracer(warmup_steps=2, print_at_exit="never", flops_per_step=flops, flops_dtype="bf16")
    t.set_fact("gpu.name", torch.cuda.get_device_name())
    device_ms = gemm_steps(t, a, a, 12)
    c = t.summary().to_dict().get("ceiling") or {}
    peak = c.get("peak_tflops", 0)
    truth = flops / (device_ms / 1e3) / (peak * 1e12) if peak else 0
    check(
        "ceiling mfu of a bf16 GEMM loop",
        peak > 0 and abs(c["mfu"] - truth) <= 0.05 * truth,
        f"{c.get('device')}: MFU {c.get('mfu', 0):.3f}, its FLOPs over CUDA-event time {truth:.3f}",
    )
    # The same loop's trace, shapes recorded, and an fp32 one: the fix's predicted gain realised.
    paths = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        x = torch.randn(4096, 4096, device="cuda", dtype=dtype)
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            record_shapes=True,
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=4),
        ) as prof:
            gemm_steps(quiet(), x, x, 5, prof)
        paths[name] = f"/tmp/steptrace-ceiling-{name}.json"
        prof.export_chrome_trace(paths[name])
    before = steptrace.load(paths["fp32"]).to_dict()
    after = steptrace.load(paths["bf16"]).to_dict()
    row = next((r for r in before["ceiling"]["ops"] if r["op"] == "aten::mm"), None)
    predicted = before["diagnosis"]["gains"].get("ceiling", 0)
    realised = 1 - after["step_ms"]["mean"] / before["step_ms"]["mean"]
    check(
        "ceiling fp32 to bf16 realises half its gain",
        row is not None and predicted > 0 and realised >= predicted / 2,
        f"mm fp32 {row and row['tflops']:.1f} TFLOP/s; predicted {predicted:.2f}, realised {realised:.2f}",
    )
