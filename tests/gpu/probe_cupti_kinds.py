"""A GPU probe: what each CUPTI activity kind steptrace turns on costs a torch launch. Each mode in
its own process, rounds interleaved; a mode turns on a set of kinds through probe_cupti_kinds.cu
(a ctypes library, no steptrace), or runs steptrace itself. Per mode: the median ~1.5 ms step (20
products of 1024^2 and a sum, 41 kernels, then `.item()`), the host's time launching its 41
kernels, and µs a launch of a tiny in-place add (2,000 back to back, host time, the best of 5).
Usage: python3 probe_cupti_kinds.py <path of the built library>. Run by scripts/gpu probe."""

import ctypes
import os
import statistics
import subprocess
import sys
import time

MODES = {  # name -> the library's mask, or a steptrace mode
    "untraced": 0,
    "kernels": 1,
    "kernels+copies": 3,
    "kernels+sync": 5,
    "kernels+memory": 9,
    "all 5 device kinds": 15,
    "device kinds+launches": 31,
    "steptrace steps": "steps",
    "steptrace phase": "phase",
}
STEPS = 400


def child(mode: str, library: str) -> None:
    import torch

    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    tiny = torch.zeros(64, device="cuda")
    pc = time.perf_counter

    def one() -> tuple:
        t0 = pc()
        x = a
        for _ in range(20):
            x = torch.mm(x, b).tanh_()
        s = x.sum()
        t1 = pc()
        s.item()
        return t0, t1 - t0

    for _ in range(20):  # warm-up, before any tracing (as a program that starts tracing late)
        one()
    torch.cuda.synchronize()
    mask = MODES[mode]
    lib = None
    if isinstance(mask, int) and mask:
        lib = ctypes.CDLL(library)
        refused = lib.probe_start(ctypes.c_uint(mask))
        if refused:
            print(f"refused {refused}")
    rows = []
    if isinstance(mask, str):
        import steptrace

        steptrace.configure(print_at_exit=False, warmup_steps=0)
        for _ in steptrace.steps(range(STEPS)):
            if mask == "phase":
                with steptrace.phase("compute"):
                    rows.append(one())
            else:
                rows.append(one())
    else:
        for _ in range(STEPS):
            rows.append(one())
    torch.cuda.synchronize()
    launches = []
    for _ in range(5):
        t0 = pc()
        for _ in range(2000):
            tiny.add_(1.0)
        launches.append((pc() - t0) / 2000)
        torch.cuda.synchronize()
    counts = (ctypes.c_long * 3)()
    if lib is not None:
        lib.probe_stop(counts)
    step = [rows[i + 1][0] - rows[i][0] for i in range(len(rows) - 1)]
    launch = [r[1] for r in rows]
    print(
        f"{1e6 * statistics.median(step):.1f} {1e6 * statistics.median(launch):.1f} {1e6 * min(launches):.2f}"
        f" records {counts[0]}/{counts[1]}/{counts[2]}"
    )


def main() -> int:
    if len(sys.argv) > 3 and sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3])
        return 0
    library = os.path.abspath(sys.argv[1])
    seen = {m: [] for m in MODES}
    for _ in range(2):
        for mode in MODES:
            done = subprocess.run([sys.executable, __file__, "child", mode, library], capture_output=True, text=True)
            line = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else "failed: " + done.stderr[-300:]
            seen[mode].append(line)
    print(
        "probe CUPTI kinds: median us: a step, launching its 41 kernels; us a tiny launch; records"
        " kernels/other device/API (two rounds)"
    )
    for mode, lines in seen.items():
        print(f"  {mode:<22} " + "  |  ".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
