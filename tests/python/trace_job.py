"""One rank of a small DDP job on CPU (gloo) under torch.profiler, without steptrace: each rank
writes its own trace, as users profile a job. Run by tests/python/traces/test_trace_jobs.py as plain
processes with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set.

    python trace_job.py SLOW_RANK DELAY_MS OUT_DIR

SLOW_RANK (-1: every rank, an even job) sleeps DELAY_MS in its dataset's __getitem__ for every batch, so its
DataLoader fetch (`enumerate(DataLoader)#...__next__`) is slow and the other ranks wait for it in
gloo's all-reduce. The profiler records 5 steps (schedule wait=1, warmup=1, active=5) and writes
OUT_DIR/traces/rank-RANK.pt.trace.json; the sleep each step took is written to OUT_DIR/truth-RANK.json.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule

slow_rank, delay, out_dir = int(sys.argv[1]), float(sys.argv[2]) / 1000, sys.argv[3]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(1)
torch.manual_seed(0)
slept = []


class Batches(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if rank == slow_rank or slow_rank == -1:
            start = time.perf_counter()
            time.sleep(delay)
            slept.append(1000 * (time.perf_counter() - start))
        return torch.randn(32, 128), torch.randn(32, 10)


loader = torch.utils.data.DataLoader(Batches(), batch_size=None, num_workers=0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
path = os.path.join(out_dir, "traces", f"rank-{rank}.pt.trace.json")
with profile(
    activities=[ProfilerActivity.CPU],
    schedule=schedule(wait=1, warmup=1, active=5, repeat=1),
    on_trace_ready=lambda p: p.export_chrome_trace(path),
) as prof:
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        prof.step()
with open(os.path.join(out_dir, f"truth-{rank}.json"), "w") as f:
    json.dump(slept, f)
dist.destroy_process_group()
