"""One rank of a 3-rank gloo job for tests/python/capture/test_capture.py: every step a small `input`,
`compute` (30 ms on the slowed rank, 2 ms elsewhere) and an all-reduce in `wait`; capture on the
straggler trigger. Writes OUT_DIR/captures-RANK.json.

    python capture_job.py SLOWED_RANK STEPS OUT_DIR
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

import steptrace

slowed, steps, out_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
steptrace.configure(warmup_steps=0, live=1, capture="straggler", capture_steps=5, print_at_exit=False,
                    capture_dir=os.path.join(out_dir, "caps"))
x = torch.ones(16)
for i in steptrace.steps(range(steps)):
    time.sleep(0.001)
    with steptrace.phase("compute"):
        time.sleep(0.030 if rank == slowed else 0.002)
    with steptrace.phase("wait"):
        dist.all_reduce(x)
with open(os.path.join(out_dir, f"captures-{rank}.json"), "w") as f:
    json.dump(steptrace.summary().to_dict().get("captures", []), f)
dist.barrier()
dist.destroy_process_group()
