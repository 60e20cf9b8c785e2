"""Captures on a GPU (docs/python.md, "Capture on trouble"), run by checks.py: three forward captures
in one process, each read back with the kernels a step the live run counted; the retroactive
capture's kept steps with their kernels, each inside its step; and a torch.profiler session after
steptrace's last hand-back still recording GPU events. Each hand-over registers steptrace's clock
again: records CUPTI stamps on another clock are counted (cupti.records_bad_clock) and kept out."""

from __future__ import annotations

import json
import tempfile
import time
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

import steptrace

KERNELS = 5  # a step's: 4 GEMMs and a sum


def _loop(tracer: steptrace.Tracer, n: int, at: dict) -> None:
    a = torch.randn(2048, 2048, device="cuda")
    for i in tracer.steps(range(n)):
        if i in at:
            at[i] = tracer.capture()
        with tracer.phase("compute"):
            for _ in range(4):
                b = torch.mm(a, a)
            b.sum().item()
    torch.cuda.synchronize()


def _captures(tracer: steptrace.Tracer, n_back: int, n_forward: int) -> tuple:
    for _ in range(400):  # the core writes the kept steps once their device records are in
        caps = tracer.summary().to_dict().get("captures") or []
        back = [c for c in caps if c.get("retroactive")]
        forward = [c for c in caps if not c.get("retroactive")]
        if len(back) >= n_back and len(forward) >= n_forward:
            break
        time.sleep(0.025)
    return forward, back


def run(check: Callable[[str, bool, str], None]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tracer = steptrace.Tracer(
            warmup_steps=0, print_at_exit="never", capture_dir=folder, capture_steps=3, capture_max=3
        )
        at = {10: None, 25: None, 40: None}
        _loop(tracer, 60, at)
        forward, back = _captures(tracer, 3, 3)
        d = tracer.summary().to_dict()
        live = (d.get("gpu") or {}).get("kernels_per_step", 0)
        read = [(steptrace.load(c["path"]).to_dict().get("gpu") or {}).get("kernels_per_step", 0) for c in forward]
        ok = (
            list(at.values()) == [True] * 3
            and len(forward) == 3
            and round(live) == KERNELS
            and all(round(k) == KERNELS for k in read)
        )
        check(
            "three forward captures read back with the live kernels a step",
            ok,
            f"asked {list(at.values())}; live {live:.2f} a step; read back {[round(k, 2) for k in read]} "
            f"({KERNELS} expected); cupti.records_bad_clock {(d.get('facts') or {}).get('cupti.records_bad_clock', 0)}",
        )
        inside, kernels = True, 0
        for c in back:
            with open(c["path"]) as f:
                events = json.load(f)["traceEvents"]
            steps = [e for e in events if e.get("cat") == "step"]
            device = [e for e in events if e.get("cat") == "device" and not e["name"].startswith(("copy", "memset"))]
            kernels += len(device)
            inside = inside and all(any(s["ts"] <= k["ts"] <= s["ts"] + s["dur"] for s in steps) for k in device)
        ok = (
            len(back) == 3
            and kernels >= 3 * 8 * KERNELS * 0.9
            and inside
            and all(b["tool"] == "steptrace" for b in back)
        )
        check(
            "the retroactive captures hold the kept steps' kernels, each inside its step",
            ok,
            f"{len(back)} retroactive, {kernels} kernels (about {3 * 8 * KERNELS} expected), all inside a step: "
            f"{inside}; kept {[b['indices'] for b in back]}",
        )
    a = torch.randn(2048, 2048, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            torch.mm(a, a).sum().item()
    n = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    check(
        "a torch.profiler session after steptrace's last hand-back records GPU events",
        n >= 6,
        f"{n} CUDA events (at least 6: 3 GEMMs and 3 sums)",
    )
