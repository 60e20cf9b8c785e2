"""A Hugging Face Trainer run under torchrun on CPU (2 processes, DDP through accelerate), with
StepTraceCallback and nothing else of steptrace: rank 1's dataset is DELAY_MS slower per batch.
Run by tests/python/ranks/test_ranks.py:  torchrun --nproc_per_node=2 ranks_transformers.py DELAY_MS OUT"""

import os
import sys
import time

import torch
import transformers
from torch.utils.data import Dataset

from steptrace.transformers import StepTraceCallback

DELAY = float(sys.argv[1]) / 1000


class Data(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        if os.environ["RANK"] == "1":
            time.sleep(DELAY)
        return {"x": torch.randn(32), "labels": torch.zeros(1)}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, 1)

    def forward(self, x, labels):
        return {"loss": (self.layer(x) - labels).square().mean()}


torch.set_num_threads(1)
args = transformers.TrainingArguments(
    output_dir=sys.argv[2],
    per_device_train_batch_size=1,
    num_train_epochs=1,
    use_cpu=True,
    report_to=[],
    save_strategy="no",
    logging_strategy="no",
    disable_tqdm=True,
    ddp_backend="gloo",
)
transformers.Trainer(model=Model(), args=args, train_dataset=Data(), callbacks=[StepTraceCallback()]).train()
