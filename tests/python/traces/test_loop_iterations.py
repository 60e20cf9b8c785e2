"""A plain `with torch.profiler.profile():` block around a training loop has no ProfilerStep
ranges: its iterations, found by the loop's DataLoader fetches or optimizer steps, are the steps,
and the first is warm-up when it lasted at least twice the others' median (the program's start-up
ran in it). Each loop here stamps its own truth beside the trace with perf_counter: when each
iteration began, how long each fetch took."""

import time
from pathlib import Path

import pytest

import steptrace

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

SAMPLE_S = 0.004  # a sample's load: a batch of 4 takes ~16 ms on the training thread
START_UP_S = 0.15  # the first iteration's one-time cost (lazy loads, algorithm search)


class Samples(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(SAMPLE_S)
        return torch.randn(64), torch.randn(1)


def _model():
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _train(model, opt, x, y, backward_only=False):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    if not backward_only:
        opt.step()
        opt.zero_grad()


def _loop(
    trace: Path, batches: int, start_up: bool, warm_before: int = 0, accumulate: int = 1, loader=True, prof_step=False
):
    """Trains under a plain profile block; returns the truth: each iteration's start (s, from just
    before its fetch) and each fetch's length (ms)."""
    model, opt = _model()
    data = torch.utils.data.DataLoader(Samples(4 * (batches + warm_before)), batch_size=4)
    it = iter(data)
    for _ in range(warm_before):  # the job ran before the profiler started: no start-up in the trace
        _train(model, opt, *next(it))
    starts, fetches = [], []
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        i = 0
        while True:
            began = time.perf_counter()
            if loader:
                try:
                    x, y = next(it)  # exhausted: the loop's closing fetch, as `for` makes it
                except StopIteration:
                    break
                fetches.append(1000 * (time.perf_counter() - began))
            elif i == batches:
                break
            else:
                x, y = torch.randn(4, 64), torch.randn(4, 1)
            if i % accumulate == 0:
                starts.append(began)
            if i == 0 and start_up:
                time.sleep(START_UP_S)
            _train(model, opt, x, y, backward_only=(i + 1) % accumulate != 0)
            if prof_step:
                prof.step()
            i += 1
    starts.append(time.perf_counter())
    prof.export_chrome_trace(str(trace))
    return [1000 * (b - a) for a, b in zip(starts, starts[1:])], fetches


def _warm_up_by_truth(iterations):
    """1 or 0 when the stamped iterations put the first clearly above or below twice the others'
    upper median (10% apart from it: the stamps and the trace's marks differ by microseconds), else
    None. On an idle machine the start-up makes it 1; a machine busy enough stretches the others
    until the 150 ms start-up no longer stands out, and the reading must follow the truth."""
    others = sorted(iterations[1:])
    ratio = iterations[0] / others[len(others) // 2]
    return 1 if ratio >= 2.2 else 0 if ratio <= 1.8 else None


def _check_warm_up(d, iterations, total):
    """Steps and warm-up as the truth says: every iteration counted or the first one warm-up."""
    expected = _warm_up_by_truth(iterations)
    assert d["steps"] + d["warmup_steps"] == total and d["warmup_steps"] in (0, 1)
    if expected is not None:
        assert d["warmup_steps"] == expected, (iterations, d["backend"]["reason"])
    return d["warmup_steps"]


def test_a_loops_fetches_mark_its_iterations_and_its_start_up_is_warm_up(tmp_path):
    path = tmp_path / "loop.json"
    iterations, fetches = _loop(path, batches=8, start_up=True)
    s = steptrace.load(path)
    d = s.to_dict()
    warm = _check_warm_up(d, iterations, 8)  # the closing fetch starts none
    assert d["windows"] is False
    assert d["facts"]["trace.steps_from"] == "training loop"
    reason = d["backend"]["reason"]
    assert "each an iteration of the training loop from one DataLoader fetch to the next" in reason
    assert ("the first iteration is left out as warm-up" in reason) == bool(warm)
    # an iteration runs from one fetch's start to the next's: the truth's iterations, less the
    # few microseconds between the stamp and the profiler's op
    counted = iterations[warm:]
    assert min(counted) - 1 <= d["step_ms"]["p50"] <= max(counted) + 1
    assert d["phases"]["input"]["calls"] == 8 - warm
    assert min(fetches[warm:]) - 0.5 <= d["phases"]["input"]["p50_ms"] <= max(fetches[warm:]) + 1
    if warm:
        assert d["step_ms"]["max"] < iterations[0]  # the start-up is in no counted step
    assert d["diagnosis"]["label"] == "INPUT-BOUND"
    assert f"{8 - warm} steps ({warm} warm-up" in str(s)


def test_prof_step_without_a_schedule_writes_no_step_ranges_so_the_loop_marks_them(tmp_path):
    """The usual `prof.step()` at the end of each iteration, with no schedule: torch records no
    ProfilerStep ranges then, and the loop's own marks still give its steps and its start-up."""
    path = tmp_path / "stepped.json"
    iterations, _ = _loop(path, batches=6, start_up=True, prof_step=True)
    d = steptrace.load(path).to_dict()
    assert d["facts"]["trace.steps_from"] == "training loop"
    _check_warm_up(d, iterations, 6)


def test_a_loop_profiled_mid_run_counts_every_iteration_unless_the_first_was_slow(tmp_path):
    path = tmp_path / "mid.json"
    iterations, _ = _loop(path, batches=6, start_up=False, warm_before=2)
    d = steptrace.load(path).to_dict()
    _check_warm_up(d, iterations, 6)  # every one counts, unless this machine stalled the first
    assert d["facts"]["trace.steps_from"] == "training loop"


def test_gradient_accumulation_makes_an_iteration_of_each_optimizer_step(tmp_path):
    path = tmp_path / "accumulate.json"
    iterations, fetches = _loop(path, batches=8, start_up=True, accumulate=2)
    d = steptrace.load(path).to_dict()
    assert len(iterations) == 4 and len(fetches) == 8
    warm = _check_warm_up(d, iterations, 4)
    assert "ending with its optimizer step" in d["backend"]["reason"]
    assert d["phases"]["input"]["calls"] == 2 * (4 - warm)  # two fetches in each counted iteration
    # each from one optimizer step's end to the next's: the truth's, less the first fetch and
    # the last optimizer step, which lie on either side of the stamps
    assert 0.9 * min(iterations[warm:]) - 1 <= d["step_ms"]["p50"] <= max(iterations[warm:]) + 1


def test_a_loop_without_a_loader_is_marked_by_its_optimizer_steps(tmp_path):
    path = tmp_path / "synthetic.json"
    iterations, _ = _loop(path, batches=6, start_up=True, loader=False)
    d = steptrace.load(path).to_dict()
    warm = _check_warm_up(d, iterations, 6)
    assert d["facts"]["trace.steps_from"] == "training loop"
    assert "ending with its optimizer step" in d["backend"]["reason"]
    if warm:
        assert d["step_ms"]["max"] < iterations[0]


def test_two_iterations_stay_one_window(tmp_path):
    """Fewer than 3 fetches and 3 optimizer steps: too few to tell a loop, the whole trace is one window."""
    path = tmp_path / "two.json"
    _loop(path, batches=2, start_up=False)
    d = steptrace.load(path).to_dict()
    assert d["windows"] is True and d["steps"] == 1
    assert d["facts"]["trace.steps_from"] == "window"


def test_a_named_range_still_wins(tmp_path):
    path = tmp_path / "named.json"
    _loop(path, batches=4, start_up=False)
    d = steptrace.load(path, step="Optimizer.step#SGD.step").to_dict()
    assert d["facts"]["trace.steps_from"] == "named range" and d["steps"] == 4
