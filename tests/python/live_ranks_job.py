"""One rank of a 4-rank gloo job for tests/python/ranks/test_live_ranks.py, with live windows of 1 s.

    python live_ranks_job.py MODE OUT_DIR

MODE chronic: rank 2's `input` takes 25 ms more a step from 3 s on; ddp: a DDP model whose
backward (a phase `backward` of its own) takes 25 ms more on rank 2 from 3 s on, each sleep's length
appended to OUT_DIR/slept-2.json; withstep: the same in a
`with steptrace.step():` loop, ended at 6 s (configure() after the init starts the verdicts). oneoff: rank 1's `input`
stalls 2.5 s once, at 3.5 s, and the run ends at 10.5 s (judged windows after it). killed: no collectives, and rank 3 leaves at 2.5 s. healthy: no rank delayed. Rank 0 ends the
run at 9 s (8 s when killed), telling the others through the all-reduce every step already does.
Each rank appends its live windows to OUT_DIR/live-RANK.jsonl and writes the wall-clock time its
run began to OUT_DIR/start-RANK.txt; rank 0 prints the exit table.
"""

import itertools
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import steptrace
from slow_backward import slow_backward

mode, out_dir = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
steptrace.configure(warmup_steps=0, live=1, gather_timeout_s=3, jsonl_path=os.path.join(out_dir, f"live-{rank}.jsonl"))
start = time.monotonic()
with open(os.path.join(out_dir, f"start-{rank}.txt"), "w") as f:  # the test's truth: when this rank's clock began
    f.write(repr(time.time()))
stop = torch.zeros(1)
stalled = False


def steps():
    if mode != "withstep":
        yield from steptrace.steps(itertools.count())
        return
    for i in itertools.count():
        with steptrace.step():
            yield i


slept = []


# ddp: backward's first node sleeps 25 ms on rank 2 from 3 s on
SlowBackward = slow_backward(lambda: 0.025 if rank == 2 and time.monotonic() - start > 3 else 0.0, slept)


if mode == "ddp":
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
# DDP's set-up took 1.6 s a rank alone and over 5 s with four ranks on a busy 2-core machine: the
# run goes on at least 6 s past it, so the windows after the slowdown are enough to judge
end_s = max(9.0, time.monotonic() - start + 6) if mode == "ddp" else 9.0

for i in steps():
    now = time.monotonic() - start
    if mode == "ddp":
        with steptrace.phase("input"):
            x = torch.randn(16, 64)
        with steptrace.phase("compute"):
            # the sleep is backward's first node: every gradient bucket's all-reduce waits for it
            loss = SlowBackward.apply(model(x)).square().mean()
            with steptrace.phase("backward"):
                loss.backward()
            opt.step()
            opt.zero_grad()
        stop[0] = 1.0 if rank == 0 and now > end_s else 0.0
        dist.all_reduce(stop)
        if stop[0] > 0:
            break
        continue
    with steptrace.phase("input"):
        time.sleep(0.001)
        if mode in ("chronic", "withstep") and rank == 2 and now > 3:
            with steptrace.phase("decode"):  # named inside `input`: the live windows' `within`
                time.sleep(0.025)
        if mode == "oneoff" and rank == 1 and now > 3.5 and not stalled:
            stalled = True
            time.sleep(2.5)
    with steptrace.phase("compute"):
        time.sleep(0.003)
    if mode == "killed":
        if rank == 3 and now > 2.5:
            os._exit(0)  # as a crash: no exit report, no gather
        if now > 8:
            break
        continue
    with steptrace.phase("wait"):
        stop[0] = 1.0 if rank == 0 and now > {"withstep": 6, "oneoff": 10.5}.get(mode, 9) else 0.0
        dist.all_reduce(stop)
    if stop[0] > 0:
        break
if slept:
    with open(os.path.join(out_dir, f"slept-{rank}.json"), "w") as f:
        json.dump(slept, f)
