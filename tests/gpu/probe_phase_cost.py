"""A GPU probe: where a phase's cost lies on a GPU-bound loop of ~1.5 ms steps (20 products of
1024^2, 40 kernels, then `.item()`). Each mode in its own process, two rounds interleaved; per
step, the medians of: the step (start to next start), entering the phase, launching the step's
kernels, waiting in `.item()`, leaving the phase. Modes: untraced; two reused torch CUDA events a
step (what an event pair costs by itself); steptrace steps only and steps with a phase, each with
CUPTI on and off (STEPTRACE_CUPTI=0). Run by `scripts/gpu probe-phase`; prints one line a mode."""

import os
import statistics
import subprocess
import sys
import time

MODES = ("untraced", "torch events", "steps, CUPTI on", "steps, CUPTI off", "phase, CUPTI on", "phase, CUPTI off")
STEPS = 400


def child(mode: str) -> None:
    import torch

    import steptrace

    steptrace.configure(print_at_exit=False, warmup_steps=0)
    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    events = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    pc = time.perf_counter
    rows = []

    def one(phase: bool, evts: bool) -> tuple:
        t0 = pc()
        ph = None
        if phase:
            ph = steptrace.phase("compute")
            ph.__enter__()
        if evts:
            events[0].record()
        t1 = pc()
        x = a
        for _ in range(20):
            x = torch.mm(x, b).tanh_()
        s = x.sum()
        if evts:
            events[1].record()
        t2 = pc()
        s.item()
        t3 = pc()
        if ph is not None:
            ph.__exit__(None, None, None)
        t4 = pc()
        return t0, t1 - t0, t2 - t1, t3 - t2, t4 - t3

    phase = mode.startswith("phase")
    evts = mode == "torch events"
    for _ in range(20):  # warm-up
        one(False, False)
    torch.cuda.synchronize()
    if mode.startswith(("steps", "phase")):
        for _ in steptrace.steps(range(STEPS)):
            rows.append(one(phase, evts))
    else:
        for _ in range(STEPS):
            rows.append(one(phase, evts))
    torch.cuda.synchronize()
    step = [rows[i + 1][0] - rows[i][0] for i in range(len(rows) - 1)]
    cols = [step] + [[r[k] for r in rows] for k in range(1, 5)]
    print(" ".join(f"{1e6 * statistics.median(c):.1f}" for c in cols))


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        child(sys.argv[2])
        return 0
    seen = {m: [] for m in MODES}
    for _ in range(2):
        for mode in MODES:
            env = dict(os.environ)
            if "CUPTI off" in mode:
                env["STEPTRACE_CUPTI"] = "0"
            done = subprocess.run([sys.executable, __file__, "child", mode], capture_output=True, text=True, env=env)
            line = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else "failed: " + done.stderr[-300:]
            seen[mode].append(line)
    print("probe phase cost: median us a step: step, enter, launch 40 kernels, .item(), exit (two rounds)")
    for mode, lines in seen.items():
        print(f"  {mode:<18} " + "  |  ".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
