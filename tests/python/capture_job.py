"""One rank of a 3-rank gloo job for tests/python/capture/test_capture.py: every step a small `input`,
`compute` and an all-reduce in `wait`; capture on the straggler trigger. Either the slowed rank's
`compute` takes 30 ms a step (2 ms elsewhere), or, given STALL_STEP, it stalls once: 400 ms in
`input` at that step, stamped by this program's own clock. Writes OUT_DIR/captures-RANK.json (and
OUT_DIR/stall-RANK.json: the stall's step and length as this program measured it).

    python capture_job.py SLOWED_RANK STEPS OUT_DIR [STALL_STEP]
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

import steptrace

slowed, steps, out_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
stall_at = int(sys.argv[4]) if len(sys.argv) > 4 else None
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
steptrace.configure(
    warmup_steps=0,
    live=1,
    capture="straggler",
    capture_steps=5,
    print_at_exit=False,
    capture_dir=os.path.join(out_dir, "caps"),
)
x = torch.ones(16)
for i in steptrace.steps(range(steps)):
    with steptrace.phase("input"):
        if rank == slowed and i == stall_at:
            began = time.perf_counter()
            time.sleep(0.4)
            with open(os.path.join(out_dir, f"stall-{rank}.json"), "w") as f:
                json.dump({"step": i, "ms": 1e3 * (time.perf_counter() - began)}, f)
        else:
            time.sleep(0.001)
    with steptrace.phase("compute"):
        time.sleep(0.030 if rank == slowed and stall_at is None else 0.002)
    with steptrace.phase("wait"):
        dist.all_reduce(x)
time.sleep(2.5)  # the windows that carry the kept steps' names between the ranks
with open(os.path.join(out_dir, f"captures-{rank}.json"), "w") as f:
    json.dump(steptrace.summary().to_dict().get("captures", []), f)
dist.barrier()
dist.destroy_process_group()
