"""Capture on trouble armed and never firing, against capture off, side by side in one run:
the same CPU loop (about 1 ms a step of matmuls), live windows every second in both, rounds
interleaved; prints each round's median step and the medians of the rounds. Usage:
python benchmarks/bench_capture.py [rounds]"""

import statistics
import sys
import time

import torch

import steptrace

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
STEPS = 3000
x = torch.randn(96, 96)


def run(**options):
    t = steptrace.Tracer(warmup_steps=0, print_at_exit="never", live=1, **options)
    times = []
    y = x
    last = time.perf_counter_ns()
    for _ in t.steps(range(STEPS)):  # a step: from one item to the next, the loop's own cost included
        with t.phase("compute"):
            for _ in range(6):
                y = (y @ x).tanh_()
        now = time.perf_counter_ns()
        times.append(now - last)
        last = now
    t.configure(live=0)
    assert "captures" not in t.summary().to_dict()  # armed, never fired
    return statistics.median(times) / 1e3


armed, off = [], []
for r in range(ROUNDS):
    off.append(run())
    armed.append(run(capture="slow,label,file=/nonexistent/steptrace-capture-flag", capture_dir="/tmp/unused"))
    print(f"round {r}: off {off[-1]:.1f} us, armed {armed[-1]:.1f} us a step (median)", flush=True)
print(
    f"median of rounds: off {statistics.median(off):.1f} us, armed {statistics.median(armed):.1f} us: "
    f"{statistics.median(armed) / statistics.median(off):.3f}x"
)
