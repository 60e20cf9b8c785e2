"""One rank of a 4-rank gloo job for tests/python/ranks/test_hangs.py, with live windows of 1 s and
hang_after 4 s.

    torchrun --nproc-per-node 4 hang_job.py MODE OUT_DIR

MODE input: rank 2 blocks forever in `input` (a fetch that never returns) at step 10, and the
others wait for it in all_reduce. mismatch: rank 3 calls broadcast at step 10 where the others
call all_reduce (gloo waits forever). killed: rank 3 is SIGKILLed at step 150; gloo notices a dead
peer at once and raises, NCCL does not and its ranks wait, so here the others wait as NCCL's would
(in `wait`, the host blocked on a device that waits for the dead peer). slow: every rank's steps
take 20x longer from step 10 to 30 and recover, under ten CPU burners; the run ends at step 120.
The rank that stalls writes the wall time it did (the test's truth) to OUT_DIR/stall-RANK.txt.
"""

import itertools
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import steptrace

mode, out_dir = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
steptrace.configure(
    warmup_steps=0,
    live=1,
    hang_after=4,
    capture_dir=os.path.join(out_dir, "caps"),
    jsonl_path=os.path.join(out_dir, f"live-{rank}.jsonl"),
    gather_timeout_s=2,
)
STALL = 150 if mode == "killed" else 10  # killed: rank 3 has written rows by then (windows of 1 s)


def note_stall():
    with open(os.path.join(out_dir, f"stall-{rank}.txt"), "w") as f:
        f.write(repr(time.time()))


def items():
    for i in itertools.count():
        if mode == "input" and rank == 2 and i == STALL:
            note_stall()
            threading.Event().wait()  # the fetch that never returns
        yield i


t = torch.ones(8)
for i in steptrace.steps(items()):
    if mode == "slow" and i == 120:
        break
    with steptrace.phase("compute"):
        time.sleep(0.2 if mode == "slow" and STALL <= i < 30 else 0.01)
        if i == STALL and rank == 3 and mode == "killed":
            note_stall()
            os.kill(os.getpid(), signal.SIGKILL)
        if i == STALL and rank == 3 and mode == "mismatch":
            note_stall()
            dist.broadcast(t, 0)
        elif mode == "killed" and i == STALL:
            with steptrace.phase("wait"):
                time.sleep(3600)  # as a NCCL rank waits for a dead peer's collective
        else:
            dist.all_reduce(t)
