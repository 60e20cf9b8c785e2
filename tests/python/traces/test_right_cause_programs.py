"""The right cause, third pass, on traces of programs recorded here (CPU, real PyTorch): a JIT's
first calls are start-up, and a loader already in worker processes is not told to start them.
Each figure is held to an independent reading of the plain JSON (trace_truth.py)."""

import time

import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

import steptrace  # noqa: E402
from trace_truth import events_of, first_calls, main_and_windows, set_aside_truth  # noqa: E402

pytestmark = pytest.mark.torch


class Layers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(256, 256)

    def forward(self, x):
        for _ in range(4):
            x = torch.relu(self.linear(x))
        return x


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_torchscript_models_profiling_run_is_start_up(tmp_path):
    # TorchScript's profiling executor compiles on the first calls: the first forward takes tens
    # of ms, the later ones about one. Read as steady state, that compile was the step.
    torch.manual_seed(0)
    model, x = torch.jit.script(Layers()), torch.randn(64, 256)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(8):
            with record_function("## forward ##"):
                model(x)
    path = tmp_path / "torchscript.json"
    prof.export_chrome_trace(str(path))
    firsts = first_calls(path)
    assert [name for name, *_ in firsts] == ["## forward ##"]  # the outermost: its ops inside it
    aside_ms, _ = set_aside_truth(path)
    d = steptrace.load(path).to_dict()
    aside = d["set_aside"]["initialisation"]
    assert aside["total_ms"] == pytest.approx(aside_ms, rel=1e-6)
    assert "## forward ##" in d["facts"]["trace.one_time_calls"]
    assert "a JIT's or compiler's first run" in d["diagnosis"]["evidence"]
    # what is left is the seven steady calls: no gain is read from the compile
    _, windows = main_and_windows(events_of(path))
    assert len(windows) == 1 and d["steps"] == 1
    window_ms = (windows[0][1] - windows[0][0]) / 1000
    assert d["step_ms"]["mean"] == pytest.approx(window_ms - aside_ms, rel=1e-3)
    if aside["run_share"] >= 0.5:  # mostly start-up: the advice says to trace the steady state
        assert any(
            a.startswith(f"{100 * aside['run_share']:.0f}% of this trace is start-up") for a in d["diagnosis"]["advice"]
        )


class Slow(Dataset):
    """Each sample waits `sleep_s` (slow storage): workers that cannot keep up."""

    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return torch.zeros(8)


def test_a_loader_already_in_workers_is_told_what_fits_it(tmp_path):
    # Two workers, each batch 4 samples of 10 ms: 20 ms a batch against a 2 ms step. The trace
    # names the iterator, `_MultiProcessingDataLoaderIter`; "start num_workers near 4" would be
    # advice for a loader on the training thread.
    loader = DataLoader(Slow(4 * 12, 0.01), batch_size=4, num_workers=2)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in loader:
            with record_function("compute"):
                (batch @ batch.T).sum()
                time.sleep(0.002)
    path = tmp_path / "loader.json"
    prof.export_chrome_trace(str(path))
    text = path.read_text()
    assert "_MultiProcessingDataLoaderIter" in text and "_SingleProcessDataLoaderIter" not in text
    d = steptrace.load(path).to_dict()
    assert d["diagnosis"]["label"] == "INPUT-BOUND"
    first = d["diagnosis"]["advice"][0]
    assert first.startswith("the DataLoader already loads in worker processes (`_MultiProcessingDataLoaderIter`)")
    advice = " ".join(d["diagnosis"]["advice"])
    assert "near 4" not in advice and "num_workers=0" not in advice
