"""Lightning and Hugging Face Trainer callbacks against hand-timed ground truth on the same loop.

The dataset times its own loading (the `input` truth) and stamps when each batch starts
loading; the training step spins a known time. These bound steptrace's figures from both sides,
so the checks hold on a busy machine."""

import time

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import Dataset  # noqa: E402

import steptrace  # noqa: E402
from steptrace.demo import _busy  # noqa: E402

pytestmark = pytest.mark.torch

BATCH, BATCHES, SAMPLE_S, STEP_S = 4, 30, 0.006, 0.010


class TimedDataset(Dataset):
    """Each sample takes ~6 ms to load; the dataset records how long each really took."""

    def __init__(self, as_dict=False):
        self.load_s = []
        self.started = []
        self.as_dict = as_dict

    def __len__(self):
        return BATCH * BATCHES

    def __getitem__(self, i):
        start = time.perf_counter()
        self.started.append(start)
        _busy(SAMPLE_S)
        x = torch.full((4,), float(i))
        self.load_s.append(time.perf_counter() - start)
        return {"x": x, "labels": torch.zeros(1)} if self.as_dict else x


class RegressionModel(torch.nn.Module):
    """The Hugging Face Trainer's model: the forward pass spins the training step's known time."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def forward(self, x, labels):
        _busy(STEP_S)
        return {"loss": (self.layer(x) - labels).pow(2).mean()}


def lightning_model(L, save_s=0.0):
    """The Lightning module: the training step spins its known time, validation 2 ms a batch,
    a checkpoint save `save_s`."""

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            _busy(STEP_S)
            loss = self.layer(batch).pow(2).mean()
            self.log("loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            _busy(0.002)

        def on_save_checkpoint(self, checkpoint):
            _busy(save_s)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Model()


def check_against_hand_timing(summary, dataset, trained_until):
    """Truth on both sides, which no preemption can move past the records: inside each counted
    step lie its batch's loads (in `input`) and the training step's spin (in `compute`); all
    counted steps lie between the first counted batch's first load and the end of training."""
    d = summary.to_dict()
    counted = BATCHES - d["warmup_steps"]
    assert d["steps"] == counted
    per_batch_load = [sum(dataset.load_s[i : i + BATCH]) for i in range(0, len(dataset.load_s), BATCH)]
    # The loads inside the counted steps: a step runs from its compute to the next one's, and
    # Lightning and Accelerate (HF) load one batch ahead, so the first counted step fetches the
    # batch two ahead and the last fetches nothing; counted - 2 batches' loads are inside.
    hand_input = sum(per_batch_load[-(counted - 2) :]) / counted * 1000
    first_start = dataset.started[::BATCH][-counted]
    # `input` holds the loads and `compute` the spin: charging either to the other breaks one.
    assert d["phases"]["input"]["mean_ms"] >= hand_input * 0.99
    assert d["phases"]["compute"]["mean_ms"] >= STEP_S * 1000 * 0.99
    assert d["step_ms"]["p50"] >= (sorted(per_batch_load[-counted:])[0] + STEP_S) * 1000 * 0.99
    # Nothing counted twice, and no warm-up in the figures: the steps fit in the span they ran in
    # (the first counted fetch opens a hook's width before its first load: 5 ms of slack).
    span_ms = (trained_until - first_start) * 1000 + 5
    assert d["step_ms"]["total"] <= span_ms
    assert d["wall_ms"] <= span_ms


@pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's advice on workers, loggers, GPUs
@pytest.mark.filterwarnings("ignore::FutureWarning")  # deprecations inside Lightning itself
def test_lightning_callback_matches_hand_timing(tmp_path):
    L = pytest.importorskip("lightning")
    from steptrace.lightning import StepTraceCallback

    dataset, model = TimedDataset(), lightning_model(L)
    callback = StepTraceCallback(steptrace.Tracer(print_at_exit=False))
    trainer = L.Trainer(
        max_epochs=1,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, torch.utils.data.DataLoader(dataset, batch_size=BATCH))
    check_against_hand_timing(callback.tracer.summary(), dataset, time.perf_counter())


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_transformers_trainer_callback_matches_hand_timing(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from steptrace.transformers import StepTraceCallback

    dataset, model = TimedDataset(as_dict=True), RegressionModel()
    callback = StepTraceCallback(steptrace.Tracer(print_at_exit=False))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=BATCH,
        num_train_epochs=1,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    transformers.Trainer(model=model, args=args, train_dataset=dataset, callbacks=[callback]).train()
    check_against_hand_timing(callback.tracer.summary(), dataset, time.perf_counter())


SAVE_S = 0.15  # a slow checkpoint save: with it charged to `input`, the input share jumps


def input_share(summary):
    return summary.to_dict()["phases"]["input"]["share"]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_lightning_sets_checkpoints_validation_and_logging_aside(tmp_path):
    L = pytest.importorskip("lightning")
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger
    from steptrace.lightning import StepTraceCallback

    def fit(checkpoints):
        callback = StepTraceCallback(steptrace.Tracer(print_at_exit=False))
        extra = (
            dict(
                callbacks=[callback, ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=8, save_top_k=-1)],
                logger=CSVLogger(tmp_path),
                val_check_interval=10,
                log_every_n_steps=5,
            )
            if checkpoints
            else dict(callbacks=[callback], logger=False, enable_checkpointing=False)
        )
        trainer = L.Trainer(
            max_epochs=1,
            enable_progress_bar=False,
            enable_model_summary=False,
            accelerator="cpu",
            devices=1,
            default_root_dir=tmp_path,
            num_sanity_val_steps=0,
            **extra,
        )
        val = torch.utils.data.DataLoader(TimedDataset(), batch_size=BATCH) if checkpoints else None
        trainer.fit(lightning_model(L, SAVE_S), torch.utils.data.DataLoader(TimedDataset(), batch_size=BATCH), val)
        return callback.tracer.summary()

    plain, busy = fit(False), fit(True)
    aside = busy.to_dict()["set_aside"]
    assert aside["checkpoint"]["calls"] == 3  # steps 8, 16, 24
    assert aside["checkpoint"]["mean_ms"] >= SAVE_S * 1000
    assert aside["validation"]["calls"] == 3  # every 10 batches
    assert "logging" in aside
    # Set aside, the saves and validation leave `input` where it is without them; charged to it,
    # 0.45 s of saves over 30 steps would move it by about 10 points.
    assert abs(input_share(busy) - input_share(plain)) <= 0.05
    assert busy.label == plain.label == "INPUT-BOUND"
    assert busy.to_dict()["unscoped_phases"] == {}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_transformers_trainer_sets_checkpoints_and_logging_aside(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from steptrace.transformers import StepTraceCallback

    class SlowSave(transformers.TrainerCallback):  # before ours: its time is inside the save
        def on_save(self, args, state, control, **kwargs):
            _busy(SAVE_S)

    def train(checkpoints):
        callback = StepTraceCallback(steptrace.Tracer(print_at_exit=False))
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / ("busy" if checkpoints else "plain")),
            per_device_train_batch_size=BATCH,
            num_train_epochs=1,
            report_to=[],
            use_cpu=True,
            dataloader_num_workers=0,
            disable_tqdm=True,
            save_strategy="steps" if checkpoints else "no",
            save_steps=8,
            logging_strategy="steps" if checkpoints else "no",
            logging_steps=5,
        )
        callbacks = [SlowSave(), callback] if checkpoints else [callback]
        transformers.Trainer(
            model=RegressionModel(), args=args, train_dataset=TimedDataset(as_dict=True), callbacks=callbacks
        ).train()
        return callback.tracer.summary()

    plain, busy = train(False), train(True)
    aside = busy.to_dict()["set_aside"]
    assert aside["checkpoint"]["calls"] == 4  # steps 8, 16, 24, and the last one (30)
    assert aside["checkpoint"]["mean_ms"] >= SAVE_S * 1000
    assert aside["logging"]["calls"] == 6
    assert abs(input_share(busy) - input_share(plain)) <= 0.05
    assert busy.label == plain.label == "INPUT-BOUND"


SLOW_CALLBACK_S = 0.03  # a user callback's work after each step, with a loader that is fast


class SpinTimes:
    """The slow callback's own stamps: the truth for `other`."""

    def __init__(self):
        self.spun = []

    def spin(self):
        start = time.perf_counter()
        _busy(SLOW_CALLBACK_S)
        self.spun.append(time.perf_counter() - start)


def check_slow_callback(summary, spins):
    """The callback's work is `other`, the fetch alone `input`: not INPUT-BOUND. Charged to
    `input` (the whole gap between two steps), input would hold the 30 ms and `other` nothing."""
    d = summary.to_dict()
    assert summary.label != "INPUT-BOUND"
    counted_spins = spins.spun[-d["steps"] :]
    assert d["phases"]["other"]["mean_ms"] >= sum(counted_spins) / len(counted_spins) * 1000 * 0.99
    assert d["phases"]["input"]["mean_ms"] < SLOW_CALLBACK_S * 1000 / 4


class FastDataset(Dataset):
    def __len__(self):
        return BATCH * BATCHES

    def __getitem__(self, i):
        return torch.full((4,), float(i))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_lightning_slow_callback_after_ours_is_other_not_input(tmp_path):
    L = pytest.importorskip("lightning")
    from steptrace.lightning import StepTraceCallback

    spins = SpinTimes()

    class SlowAfterStep(L.Callback):  # listed after ours: it runs after our end-of-batch hook
        def on_train_batch_end(self, *args):
            spins.spin()

    callback = StepTraceCallback(steptrace.Tracer(print_at_exit=False))
    trainer = L.Trainer(
        max_epochs=1,
        callbacks=[callback, SlowAfterStep()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        default_root_dir=tmp_path,
    )
    trainer.fit(lightning_model(L), torch.utils.data.DataLoader(FastDataset(), batch_size=BATCH))
    check_slow_callback(callback.tracer.summary(), spins)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_transformers_slow_callback_after_ours_is_other_not_input(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from steptrace.transformers import StepTraceCallback

    spins = SpinTimes()

    class SlowAfterStep(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            spins.spin()

    class Dicts(FastDataset):
        def __getitem__(self, i):
            return {"x": torch.full((4,), float(i)), "labels": torch.zeros(1)}

    callback = StepTraceCallback(steptrace.Tracer(print_at_exit=False))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=BATCH,
        num_train_epochs=1,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    transformers.Trainer(
        model=RegressionModel(), args=args, train_dataset=Dicts(), callbacks=[callback, SlowAfterStep()]
    ).train()
    check_slow_callback(callback.tracer.summary(), spins)


def test_fetch_timing_is_only_the_loop_threads_outside_set_aside_and_undone_after():
    import threading

    from torch.utils.data.dataloader import _BaseDataLoaderIter

    from steptrace._frameworks.hooks import LoopMarks

    original = _BaseDataLoaderIter.__next__
    tracer = steptrace.Tracer(print_at_exit=False, warmup_steps=0)
    marks = LoopMarks(tracer)
    marks.time_fetches()
    loader = torch.utils.data.DataLoader(FastDataset(), batch_size=BATCH)
    it = iter(loader)
    for _ in range(3):
        marks.compute_begins()
        marks.compute_ends()
        next(it)  # the loop thread, between steps: `input`
        other = threading.Thread(target=lambda: next(iter(loader)))  # another thread: not timed
        other.start()
        other.join()
        marks.set_aside_begins("validation")
        next(iter(loader))  # set aside: not timed
        marks.set_aside_ends()
    marks.loop_ends()
    marks.restore()
    assert _BaseDataLoaderIter.__next__ is original
    d = tracer.summary().to_dict()
    assert d["steps"] == 3
    assert d["phases"]["input"]["calls"] == 3
    assert d["unscoped_phases"] == {}
