# How rank0/rank1.pt.trace.json.gz here were recorded (torch 2.13.0 CPU, 2-core VM, 2026-11-27):
#   python job.py <folder>; then gzip -9 each rank's trace.
# 2 ranks, gloo on CPU, DDP; rank 1 sleeps 30 ms in its `data` range each step. The truth: rank 0
# waits ~30 ms a step in the all-reduce for rank 1, whose `data` is the cause; there is no GPU.
import os, sys, time
import torch, torch.distributed as dist
from torch.profiler import profile, schedule, ProfilerActivity

def main(rank, world, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    truth = []
    def handler(p):
        p.export_chrome_trace(f"{out}/rank{rank}.pt.trace.json")
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=6), on_trace_ready=handler) as prof:
        for step in range(8):
            t0 = time.perf_counter()
            with torch.profiler.record_function("data"):
                if rank == 1:
                    time.sleep(0.030)
                x = torch.randn(64, 512)
            loss = model(x).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            prof.step()
    dist.destroy_process_group()

if __name__ == "__main__":
    import torch.multiprocessing as mp
    out = sys.argv[1]
    mp.spawn(main, args=(2, out), nprocs=2)
