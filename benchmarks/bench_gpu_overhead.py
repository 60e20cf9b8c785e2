"""GPU overhead, side by side in one run (needs CUDA): a loop of steps with ~200 kernels each,
untraced vs steptrace (events-free: CUPTI activity + host phases) vs torch.profiler with CUDA
activities. Two step sizes: ~10 ms and ~1.5 ms. Rounds are interleaved; each figure is the
best round's mean step time. Targets: steptrace adds <= 1% on ~10 ms steps, <= 2% on ~1.5 ms."""

import sys
import time

import torch

import steptrace

ROUNDS, STEPS = 5, 60


def make_step(size: int):
    a = torch.randn(size, size, device="cuda")
    b = torch.randn(size, size, device="cuda")

    def step():
        x = a
        for _ in range(200):  # ~200 kernels a step
            x = torch.mm(x, b).tanh_()
        return x.sum()

    return step


def run(step, mode: str) -> float:
    if mode == "torch.profiler":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            return run(step, "untraced")
    torch.cuda.synchronize()
    start = time.perf_counter()
    if mode == "steptrace":
        for _ in steptrace.steps(range(STEPS)):
            with steptrace.phase("compute"):
                step().item()
    else:
        for _ in range(STEPS):
            step().item()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / STEPS * 1000


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_gpu_overhead: no CUDA device here; nothing measured")
        return 0
    steptrace.configure(print_at_exit=False)
    name = torch.cuda.get_device_name()
    print(f"GPU overhead, {STEPS} steps a round, best of {ROUNDS} interleaved rounds, {name}, torch {torch.__version__}")
    for size, target in ((1024, 0.01), (256, 0.02)):
        step = make_step(size)
        run(step, "untraced")  # warm-up
        best = {m: float("inf") for m in ("untraced", "steptrace", "torch.profiler")}
        for _ in range(ROUNDS):
            for mode in best:
                best[mode] = min(best[mode], run(step, mode))
        base = best["untraced"]
        print(f"  matrices {size}x{size}: untraced {base:.3f} ms/step")
        for mode in ("steptrace", "torch.profiler"):
            print(f"    {mode:<16} {best[mode]:8.3f} ms/step  {100 * (best[mode] / base - 1):+6.2f}%")
        added = best["steptrace"] / base - 1
        print(f"    steptrace adds {100 * added:+.2f}% (target <= {100 * target:.0f}%): {'met' if added <= target else 'MISSED'}")
    s = steptrace.summary()
    print(f"  backend: {s.to_dict()['backend']['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
