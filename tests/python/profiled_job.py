"""One rank of a gloo job profiled by torch.profiler, for tests/python/traces/test_job_timeline.py.

    python profiled_job.py OUT_DIR

Eleven loop steps a rank, the first the profiler's warm-up, so the trace holds ProfilerStep#1-#10
(steptrace's steps 0-9): 4 ms of compute (a matmul loop), then an all-reduce. Rank 2 sleeps 300 ms
more before its all-reduce in loop step 7 (the trace's step 6), so every rank's step 6 is slow: the
others wait for rank 2 at the all-reduce. Each rank writes OUT_DIR/rank<R>.pt.trace.json and
OUT_DIR/truth-<R>.json: how long each traced step waited in its all-reduce, by perf_counter.
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


waits = []
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=10, repeat=1)) as prof:
    for step in range(11):
        spin(0.004)
        if rank == 2 and step == 7:
            time.sleep(0.3)
        t = time.perf_counter()
        dist.all_reduce(grad)
        waits.append((time.perf_counter() - t) * 1e3)
        prof.step()
prof.export_chrome_trace(os.path.join(out_dir, f"rank{rank}.pt.trace.json"))
with open(os.path.join(out_dir, f"truth-{rank}.json"), "w") as f:
    json.dump(waits[1:], f)  # the traced steps' all-reduce waits, ms: ProfilerStep#1 .. #10
dist.destroy_process_group()
