"""steptrace.torch on a real PyTorch (CPU) loop, and the demo's CPU scenarios."""

import dataclasses
import gc
import time
from collections import namedtuple

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset  # noqa: E402

import steptrace  # noqa: E402
import steptrace.torch as st  # noqa: E402
from steptrace import demo  # noqa: E402

pytestmark = pytest.mark.torch


class SleepyDataset(Dataset):
    def __init__(self, n, sleep_s, fail_at=None):
        self.n, self.sleep_s, self.fail_at = n, sleep_s, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise OSError(f"cannot read sample {i}")
        time.sleep(self.sleep_s)
        return torch.full((4,), float(i))


def test_input_is_the_time_the_training_thread_blocks_in_next(tracer):
    loader = st.instrument(DataLoader(SleepyDataset(64, 0.001), batch_size=8), tracer)
    blocked = 0.0
    it = iter(loader)
    for _ in range(8):
        start = time.perf_counter()
        next(it)  # hand-written timing of the same wait, around steptrace's
        blocked += time.perf_counter() - start
        with tracer.step():
            pass
    d = tracer.summary().to_dict()
    assert d["steps"] == 8
    # Inside the hand timing (which also holds steptrace's own calls and any preemption around
    # them), and at least the dataset's sleeps, which no scheduler shortens: 8 batches of 8 x 1 ms.
    assert 64.0 <= d["phases"]["input"]["total_ms"] <= blocked * 1000
    assert d["facts"]["dataloader.num_workers"] == "0"
    assert d["facts"]["dataloader.batch_size"] == "8"


def test_a_loader_with_workers_is_charged_only_the_wait(tracer):
    # The truth is the time the loop was blocked getting each batch, stamped around next(). The
    # wrong answer, the workers' own load time, is 8 ms a batch whatever the loop waited.
    loader = st.instrument(DataLoader(SleepyDataset(96, 0.002), batch_size=4, num_workers=2, prefetch_factor=4), tracer)
    blocked = []
    it = iter(tracer.steps(loader))
    while True:
        start = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        blocked.append(time.perf_counter() - start)
        demo._busy(0.012)  # slower than the workers' 8 ms per batch: they keep ahead
    d = tracer.summary().to_dict()
    assert d["steps"] == 24
    counted = sorted(blocked[-24:])
    assert d["phases"]["input"]["p50_ms"] <= counted[len(counted) // 2] * 1000 * 1.05 + 0.05


def test_steps_over_an_instrumented_loader_counts_each_fetch_once(tracer):
    loader = st.instrument(st.instrument(DataLoader(SleepyDataset(20, 0), batch_size=2), tracer), tracer)
    assert isinstance(loader.loader, DataLoader)  # instrumenting twice wraps once
    assert len(loader) == 10 and loader.batch_size == 2  # the rest passes through
    for _ in tracer.steps(loader):
        pass
    d = tracer.summary().to_dict()
    assert d["steps"] == 10
    assert d["phases"]["input"]["calls"] == 10


def test_a_validation_loader_between_steps_is_not_charged_to_training_steps(tracer):
    train = st.instrument(DataLoader(SleepyDataset(40, 0.0005), batch_size=4), tracer)
    val = st.instrument(DataLoader(SleepyDataset(8, 0.01), batch_size=4), tracer, phase="val_input")
    val_ms = []
    for _epoch in range(2):
        for _ in tracer.steps(train):
            pass
        start = time.perf_counter()
        for _ in val:  # 2 batches of 4 x 10 ms, outside any step
            pass
        val_ms.append((time.perf_counter() - start) * 1000)
    d = tracer.summary().to_dict()
    assert d["steps"] == 20
    # A training step takes about 2 ms; one that absorbed a validation batch would take at least
    # half a validation pass, however long a busy machine made that pass.
    assert d["step_ms"]["max"] < min(val_ms) / 2
    assert d["unscoped_phases"]["val_input"]["calls"] >= 4


def test_a_crashing_loader_propagates_counts_a_failed_step(tracer):
    loader = st.instrument(DataLoader(SleepyDataset(16, 0, fail_at=9), batch_size=2, num_workers=1), tracer)
    with pytest.raises(OSError, match="cannot read sample 9"):
        for _ in tracer.steps(loader):
            pass
    d = tracer.summary().to_dict()
    assert (d["steps"], d["failed_steps"]) == (4, 1)
    with tracer.step():  # nothing left open
        pass


def test_an_iterator_abandoned_early_leaves_nothing_open(tracer):
    loader = st.instrument(DataLoader(SleepyDataset(16, 0), batch_size=2), tracer)
    it = iter(tracer.steps(loader))
    next(it)
    del it
    with tracer.step():
        pass
    assert tracer.summary().steps == 2


def test_to_device_moves_nested_batches_inside_an_h2d_phase(tracer):
    Pair = namedtuple("Pair", "a b")

    @dataclasses.dataclass
    class Batch:
        x: torch.Tensor
        meta: dict

    batch = {
        "pair": Pair(torch.ones(2), [torch.zeros(3), "label"]),
        "obj": Batch(torch.ones(1), {"k": torch.ones(1)}),
        "n": 3,
    }
    with tracer.step():
        moved = st.to_device(batch, "meta", tracer=tracer)
    assert isinstance(moved["pair"], Pair)
    assert moved["pair"].a.device.type == "meta"
    assert moved["pair"].b[0].device.type == "meta" and moved["pair"].b[1] == "label"
    assert isinstance(moved["obj"], Batch) and moved["obj"].x.device.type == "meta"
    assert moved["obj"].meta["k"].device.type == "meta"
    assert moved["n"] == 3
    assert tracer.summary().to_dict()["phases"]["h2d"]["calls"] == 1


def test_to_device_keeps_every_kind_of_mapping(tracer):
    import types
    from collections import OrderedDict, UserDict, defaultdict

    counts = defaultdict(list, {"x": torch.ones(1)})
    ordered = OrderedDict([("b", torch.ones(1)), ("a", torch.zeros(1))])
    with tracer.step():
        moved = st.to_device(
            {
                "d": counts,
                "o": ordered,
                "u": UserDict(y=torch.ones(1)),
                "p": types.MappingProxyType({"z": torch.ones(1)}),
            },
            "meta",
            tracer=tracer,
        )
    assert isinstance(moved["d"], defaultdict) and moved["d"]["x"].device.type == "meta"
    assert moved["d"]["new"] == []  # its factory kept
    assert isinstance(moved["o"], OrderedDict) and list(moved["o"]) == ["b", "a"]
    assert isinstance(moved["u"], UserDict) and moved["u"]["y"].device.type == "meta"
    assert moved["p"]["z"].device.type == "meta"  # a read-only view comes back as a dict
    assert counts["x"].device.type == "cpu"  # the caller's batch is untouched


def test_an_instrumented_loader_copies_deepcopies_and_pickles(tracer):
    import copy
    import pickle

    loader = st.instrument(DataLoader(list(range(6)), batch_size=2), tracer=tracer)
    for made in (copy.copy(loader), copy.deepcopy(loader)):
        assert isinstance(made, st.InstrumentedLoader) and made._tracer is tracer
        assert made.batch_size == 2 and len(made) == 3
        for _ in tracer.steps(made):
            pass
    back = pickle.loads(pickle.dumps(loader))  # the tracer is process-local: the default one
    assert back._tracer is steptrace.default_tracer() and back.batch_size == 2
    assert [b.tolist() for b in back] == [[0, 1], [2, 3], [4, 5]]
    assert tracer.summary().to_dict()["phases"]["input"]["calls"] == 6


def test_importing_steptrace_does_not_import_torch(run_python):
    run_python("import sys, steptrace, steptrace.torch\nassert 'torch' not in sys.modules, 'torch was imported'\n")


@pytest.fixture(scope="module")
def scenarios():
    # By now this process holds Lightning and transformers: a full collection of that heap
    # during a fetch would land in `input`. The demo itself runs with a small heap.
    torch.set_num_threads(1)
    gc.collect()
    gc.disable()
    try:
        results = []
        for before, after, run_before, run_after in demo.cpu_pairs(steps=150):
            results.append((demo.run(before, run_before), demo.run(after, run_after)))
    finally:
        gc.enable()
    return results


def test_slow_input_is_input_bound_and_workers_cut_the_input_share(scenarios):
    # How much workers help depends on how busy the machine is; what steptrace must get right
    # is the direction. Charging the workers' own fetch time to `input` (the wrong answer)
    # would leave the share where it was; only the training thread's wait is `input`.
    slow, workers = scenarios[0]
    assert slow.summary.label == "INPUT-BOUND"
    assert workers.share("input") < slow.share("input") * 0.9
    assert workers.step_ms() < slow.step_ms()
    advice = slow.summary.to_dict()["diagnosis"]["advice"]
    # On a busy machine the oversubscribed-host finding may come first (it is measured): the
    # loader advice follows it.
    first = 1 if advice[0].startswith("free the cores first") else 0
    assert advice[first].startswith("DataLoader(num_workers=0) loads every batch on the training thread")


def test_logging_every_step_is_wait_heavy_and_every_50_steps_is_not(scenarios):
    every, sparse = scenarios[1]
    assert every.summary.label == "WAIT-HEAVY"
    assert sparse.summary.label != "WAIT-HEAVY"
    assert sparse.share("other") <= every.share("other") / 2


def test_the_demo_writes_the_files_it_is_asked_for(tmp_path, monkeypatch):
    t = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
    for _ in t.steps(range(8)):
        pass
    steptrace.configure(json_path=str(tmp_path / "demo.json"), html_path=str(tmp_path / "demo.html"))
    try:
        demo.write_asked_files(t.summary())
    finally:
        steptrace.configure(json_path=None, html_path=None)
    assert steptrace.load(tmp_path / "demo.json").steps == 8
    assert "<html" in (tmp_path / "demo.html").read_text()
