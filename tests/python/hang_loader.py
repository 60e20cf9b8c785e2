"""A single process whose DataLoader worker deadlocks at item 12 (tests/python/tracer/test_hang.py):
the loop's fetch waits for it forever. hang_after 1.5 s, live windows of 1 s; each window's hang
figures are appended to OUT_DIR/windows.jsonl by an on_window listener.

    python hang_loader.py OUT_DIR
"""

import json
import os
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

import steptrace

out_dir = sys.argv[1]


class Stuck(Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, i):
        if i == 12:
            threading.Event().wait()  # a worker that deadlocks
        return torch.ones(4)


@steptrace.on_window
def keep(window):
    with open(os.path.join(out_dir, "windows.jsonl"), "a") as f:
        f.write(json.dumps({k: window.get(k) for k in ("steps", "hang_s", "hang_phase", "hang_report")}) + "\n")


steptrace.configure(warmup_steps=0, live=1, hang_after=1.5, capture_dir=os.path.join(out_dir, "caps"))
loader = DataLoader(Stuck(), batch_size=1, num_workers=1)
for batch in steptrace.steps(loader):
    with steptrace.phase("compute"):
        time.sleep(0.01)
