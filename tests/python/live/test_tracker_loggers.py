"""The live windows in the run's own logger: Lightning's TensorBoardLogger and the Hugging Face
Trainer's report_to="tensorboard", read back with TensorBoard's EventAccumulator and held to the
windows' JSONL."""

import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")
from torch.utils.data import Dataset  # noqa: E402

import steptrace  # noqa: E402
from steptrace.demo import _busy  # noqa: E402
from test_integrations import RegressionModel  # noqa: E402  (its forward pass spins 10 ms)
from tracker_files import KEYS, holding, jsonl_windows, tensorboard_scalars, truth  # noqa: E402

pytestmark = pytest.mark.torch

STEP_S, SAMPLES = 0.004, 700  # ~3.5 s of training: three windows at live=1


class Samples(Dataset):
    def __init__(self, n=SAMPLES):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        _busy(0.0005)
        return {"x": torch.full((4,), float(i)), "labels": torch.zeros(1)}


@pytest.fixture
def live_tracer(tmp_path):
    """A tracer with a window every second, quiet again once the test is done."""
    tracer = steptrace.Tracer(live=1, jsonl_path=str(tmp_path / "live.jsonl"), print_at_exit=False)
    yield tracer
    tracer.configure(live=0, jsonl_path="")


def check_logged(scalars, lines, steps_seen, prefix=""):
    """Each window the logger holds is the JSONL's window of the same rank, at a step the trainer
    reached; windows superseded before the trainer logged are not there, the last may be late."""
    assert len(lines) >= 2
    points = scalars[prefix + "steptrace/steps"]
    assert len(lines) - 1 <= len(points) <= len(lines), (len(points), len(lines))
    for key in KEYS:
        for (step, value), line in zip(scalars[prefix + key], holding(lines, key)):
            assert value == pytest.approx(truth(line)[key], rel=1e-6), key
            assert step in steps_seen
    steps = [step for step, _ in points]
    assert steps == sorted(steps)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_lightning_logs_each_window_through_the_trainers_logger(tmp_path, live_tracer):
    L = pytest.importorskip("lightning")
    from lightning.pytorch.loggers import TensorBoardLogger

    from steptrace.lightning import StepTraceCallback

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.steps_seen = set()

        def training_step(self, batch, batch_idx):
            _busy(STEP_S)
            self.steps_seen.add(self.trainer.global_step)
            return self.layer(batch["x"]).pow(2).mean()

        def on_train_batch_end(self, outputs, batch, batch_idx):
            self.steps_seen.add(self.trainer.global_step)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    model, logger = Model(), TensorBoardLogger(str(tmp_path), name="tb")
    trainer = L.Trainer(
        max_epochs=1,
        callbacks=[StepTraceCallback(live_tracer)],
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        default_root_dir=tmp_path,
        log_every_n_steps=50,
    )
    trainer.fit(model, torch.utils.data.DataLoader(Samples(), batch_size=1))
    logger.experiment.flush()
    check_logged(tensorboard_scalars(tmp_path / "tb"), jsonl_windows(tmp_path / "live.jsonl"), model.steps_seen)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_transformers_trainer_logs_each_window_to_its_trackers(tmp_path, live_tracer):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from steptrace.transformers import StepTraceCallback

    class Steps(transformers.TrainerCallback):
        seen = set()

        def on_log(self, args, state, control, **kwargs):
            self.seen.add(state.global_step)

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=1,
        num_train_epochs=1,
        report_to=["tensorboard"],
        logging_strategy="steps",
        logging_steps=5,
        save_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    callback = StepTraceCallback(live_tracer)
    started = time.perf_counter()
    transformers.Trainer(
        model=RegressionModel(), args=args, train_dataset=Samples(SAMPLES // 2), callbacks=[Steps(), callback]
    ).train()
    assert time.perf_counter() - started > 2.5  # enough for the windows below
    scalars = tensorboard_scalars(tmp_path)
    # The Trainer's TensorBoard callback files every training log under train/, its loss beside ours.
    check_logged(scalars, jsonl_windows(tmp_path / "live.jsonl"), Steps.seen, prefix="train/")
    assert "train/loss" in scalars
