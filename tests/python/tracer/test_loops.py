"""Realistic training loops (CPU, real PyTorch, small): the label and the advice must match
what the loop's ground truth calls for."""

import os
import time

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset  # noqa: E402

import steptrace.torch as st  # noqa: E402
from steptrace.demo import _busy  # noqa: E402

pytestmark = pytest.mark.torch


class Samples(Dataset):
    """Each sample costs `cpu_s` of CPU (decoding) or `sleep_s` of waiting (slow storage)."""

    def __init__(self, n, cpu_s=0.0, sleep_s=0.0):
        self.n, self.cpu_s, self.sleep_s = n, cpu_s, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.cpu_s:
            _busy(self.cpu_s)
        return torch.zeros(4)


def own_advice(d):
    """The label's own advice: without the oversubscribed-host line a busy test machine may put
    first (it is measured, and true there)."""
    return [a for a in d["diagnosis"]["advice"] if not a.startswith("free the cores first")]


def train(tracer, loader, steps=40, compute_s=0.001):
    for i, _ in enumerate(tracer.steps(st.instrument(loader, tracer))):
        with tracer.phase("compute"):
            _busy(compute_s)
        if i + 1 >= steps:
            break
    return tracer.summary()


def test_a_saturated_cpu_is_named_instead_of_more_workers(tracer):
    # Two workers decoding on the CPU of a machine whose cores they already fill.
    workers = len(os.sched_getaffinity(0))
    tracer.configure(warmup_steps=3)
    loader = DataLoader(Samples(16 * 60, cpu_s=0.001), batch_size=16, num_workers=workers, persistent_workers=True)
    s = train(tracer, loader)
    assert s.label == "INPUT-BOUND"
    advice = s.to_dict()["diagnosis"]["advice"]
    assert "the CPU is saturated" in advice[0], advice
    assert not any("num_workers=" in a and "try" in a for a in advice)


def test_a_loader_waiting_on_storage_is_not_saturated(tracer):
    tracer.configure(warmup_steps=3)
    loader = DataLoader(Samples(16 * 60, sleep_s=0.001), batch_size=16, num_workers=1)
    s = train(tracer, loader)
    assert s.label == "INPUT-BOUND"
    advice = s.to_dict()["diagnosis"]["advice"]
    assert not any("saturated" in a for a in advice), advice
    facts = s.to_dict()["facts"]
    assert float(facts["cpu.workers_cores_busy"]) < 0.5  # the worker mostly slept


def test_the_advice_describes_the_loader_that_feeds_the_steps(tracer):
    tracer.configure(warmup_steps=2)
    train_loader = st.instrument(DataLoader(Samples(8 * 40, sleep_s=0.0015), batch_size=8, num_workers=0), tracer)
    val_loader = st.instrument(DataLoader(Samples(8 * 4), batch_size=8, num_workers=1), tracer)
    for i, _ in enumerate(tracer.steps(train_loader)):
        with tracer.phase("compute"):
            _busy(0.001)
        if i % 10 == 9:
            with tracer.exclude("validation"):
                for _ in val_loader:
                    pass
        if i == 29:
            break
    d = tracer.summary().to_dict()
    assert d["diagnosis"]["label"] == "INPUT-BOUND"
    assert d["facts"]["dataloader.num_workers"] == "0"
    # The training loader's advice, wherever it stands: on a busy machine the validation loader's
    # worker start-up can make the set-aside time's finding, in run terms, the larger and first.
    assert any("DataLoader(num_workers=0)" in a for a in own_advice(d)), own_advice(d)
    assert d["set_aside"]["validation"]["calls"] == 3


def test_a_decode_phase_inside_the_fetch_keeps_the_label(tracer):
    # The detail sits inside `input` (num_workers=0: __getitem__ runs in the fetch), so the
    # loop stays INPUT-BOUND however little is left in `input` itself.
    class Decoding(Samples):
        def __getitem__(self, i):
            with tracer.phase("decode"):
                _busy(0.0008)
            return torch.zeros(4)

    tracer.configure(warmup_steps=2)
    s = train(tracer, DataLoader(Decoding(8 * 40), batch_size=8), steps=30, compute_s=0.002)
    d = s.to_dict()
    assert d["phases"]["decode"]["parent"] == "input"
    assert d["phases"]["decode"]["share"] > d["phases"]["input"]["share"]  # most of input is decode
    assert s.label == "INPUT-BOUND"
    assert "`input` with the phases inside it" in d["diagnosis"]["evidence"]
    assert d["phases"]["input"]["inclusive_ms"]["total"] >= d["phases"]["decode"]["total_ms"]


def test_everything_at_once_is_labelled_by_its_real_bottleneck(tracer):
    from steptrace import demo

    tracer.configure(warmup_steps=3)
    torch.set_num_threads(1)
    demo.everything_at_once(tracer, steps=100)
    d = tracer.summary().to_dict()
    assert d["diagnosis"]["label"] == "INPUT-BOUND"
    aside = d["set_aside"]
    assert (aside["logging"]["calls"], aside["validation"]["calls"], aside["checkpoint"]["calls"]) == (10, 5, 2)
    assert aside["checkpoint"]["mean_ms"] >= 50
    assert d["steps"] == 97
