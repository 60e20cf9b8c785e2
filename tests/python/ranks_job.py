"""One rank of a small DDP job on CPU (gloo), run by tests/python/ranks/test_ranks.py under torchrun or
as plain processes with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set.

    python ranks_job.py SCENARIO STEPS DELAY_MS OUT_DIR

Scenarios: balanced (every rank waits DELAY_MS for each batch: the same step everywhere, long
enough that a busy machine's uneven CPU share is well inside the straggler rule's margin); slow_input (rank 1 waits DELAY_MS for each batch); slow_backward (the last
rank, or SLOW_RANK, spends DELAY_MS more in backward, each sleep's length written to
OUT_DIR/slept-RANK.json; NAMED_BACKWARD=1 puts backward in a phase of its own); turns (rank step % world is slow in input: every rank
waits in most steps); crash (the last rank dies with os._exit at step 8, rank 1 raises at
step 8: the others' next all-reduce fails); idle_last / idle_first (the last rank / rank 0
records no step); disabled_last (the last rank runs with STEPTRACE_DISABLE=1). Ground truth, written to OUT_DIR/truth-RANK.json: per
step, from the last gradient accumulated (a hook on every parameter) to loss.backward()
returning, stamped with time.perf_counter beside steptrace's own records.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

scenario, steps, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000
out_dir = sys.argv[4]
if scenario == "disabled_last" and int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1:
    os.environ["STEPTRACE_DISABLE"] = "1"  # as a user turns it off on one rank

import steptrace  # noqa: E402
from slow_backward import slow_backward  # noqa: E402

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(1)
torch.manual_seed(0)
slept = []  # ms, each SlowBackward delay
# slow_backward: the rank SLOW_RANK names (default the last); NAMED_BACKWARD=1 puts loss.backward()
# in a phase `backward` of its own.
slow_rank = int(os.environ.get("SLOW_RANK", world - 1))
named_backward = os.environ.get("NAMED_BACKWARD") == "1"


# Extra time inside backward on one rank (the model's slow_backward), each sleep's length kept.
SlowBackward = slow_backward(lambda: delay, slept)


class Net(torch.nn.Module):
    def __init__(self, slow_backward: bool) -> None:
        super().__init__()
        self.first = torch.nn.Linear(128, 256)
        self.second = torch.nn.Linear(256, 10)
        self.slow_backward = slow_backward

    def forward(self, x):
        h = torch.relu(self.first(x))
        if self.slow_backward:
            h = SlowBackward.apply(h)  # its backward runs before `first`'s: the last bucket waits
        return self.second(h)


model = DDP(Net(scenario == "slow_backward" and rank == slow_rank))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
last_grad = [0.0]
for p in model.parameters():
    p.register_post_accumulate_grad_hook(lambda p: last_grad.__setitem__(0, max(last_grad[0], time.perf_counter())))


def batches():
    for i in range(steps):
        slow = (
            scenario == "balanced"
            or (scenario == "slow_input" and rank == 1)
            or (scenario == "turns" and i % world == rank)
        )
        if slow:
            time.sleep(delay)
        yield torch.randn(32, 128)


# idle_last / idle_first: that rank trains without recording a step (it still all-reduces).
untraced = (scenario == "idle_last" and rank == world - 1) or (scenario == "idle_first" and rank == 0)
truth = []
for i, x in enumerate(batches() if untraced else steptrace.steps(batches())):
    if scenario == "crash" and i == 8:
        if rank == world - 1:
            os._exit(3)  # dies without a word, as a killed or crashed process does
        if rank == 1:
            raise ValueError("rank 1 gives up")
    with steptrace.phase("compute"):
        loss = model(x).square().mean()
        last_grad[0] = 0.0
        if named_backward:
            with steptrace.phase("backward"):
                loss.backward()
        else:
            loss.backward()
        truth.append(time.perf_counter() - last_grad[0])
        opt.step()
        opt.zero_grad()

with open(os.path.join(out_dir, f"truth-{rank}.json"), "w") as f:
    json.dump([1000 * t for t in truth], f)
if slept:
    with open(os.path.join(out_dir, f"slept-{rank}.json"), "w") as f:
        json.dump(slept, f)
dist.destroy_process_group()  # as scripts do: the gather at exit still works
