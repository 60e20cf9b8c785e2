"""One rank of a gloo job profiled by torch.profiler, for tests/python/test_job_timeline.py.

    python profiled_job.py OUT_DIR

Ten steps a rank: 4 ms of compute (a matmul loop), then an all-reduce. Rank 2's step 6 computes
300 ms more, so every rank's step 6 is slow, and the others wait for rank 2 at its all-reduce.
Each rank writes OUT_DIR/rank<R>.pt.trace.json, and OUT_DIR/truth-<R>.json: the profiler's clock
(µs) at each step's all-reduce end, read right after it returns.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

out_dir = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
x, grad = torch.randn(64, 64), torch.zeros(4096)


def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        x @ x


ends = []
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=10, repeat=1)) as prof:
    for step in range(11):
        spin(0.004 + (0.3 if rank == 2 and step == 7 else 0.0))
        dist.all_reduce(grad)
        ends.append(time.time_ns() / 1e3)
        prof.step()
prof.export_chrome_trace(os.path.join(out_dir, f"rank{rank}.pt.trace.json"))
with open(os.path.join(out_dir, f"truth-{rank}.json"), "w") as f:
    json.dump(ends[1:], f)  # the active steps' all-reduce ends: ProfilerStep#1 .. #10
dist.destroy_process_group()
