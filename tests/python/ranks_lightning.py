"""A Lightning DDP run on CPU, 2 processes (Lightning starts the second itself), with
StepTraceCallback and nothing else of steptrace: rank 1's dataset is DELAY_MS slower per batch.
Run by tests/python/ranks/test_ranks.py:  python ranks_lightning.py DELAY_MS"""

import os
import sys
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from steptrace.lightning import StepTraceCallback

DELAY = float(sys.argv[1]) / 1000


class Data(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        if os.environ.get("LOCAL_RANK", "0") == "1":  # set by Lightning in the process it starts
            time.sleep(DELAY)
        return torch.randn(32)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).square().mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    torch.set_num_threads(1)
    trainer = L.Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
        callbacks=[StepTraceCallback()],
    )
    trainer.fit(Model(), DataLoader(Data(), batch_size=1))
