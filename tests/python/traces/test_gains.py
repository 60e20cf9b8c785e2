"""The gain of each fix, checked against real fixes: the TensorBoard plugin's ResNet-50 samples
before and after num_workers=4 (two recordings of the same program, read independently with
tests/python/trace_truth.py), and CPU programs fixed three ways, each timed by hand beside
steptrace (medians of several runs): a loader-bound loop given workers, a slow per-step log line
removed, a validation pass run less often. Sleeps stand for the slow parts, so the bounds
separate the right answer from the wrong one whatever else the machine runs."""

import statistics
import subprocess
import sys
import time

import pytest

import steptrace
import trace_truth
from conftest import TRACES  # noqa: E402

DATA = TRACES
# (before, after, whether the after trace's first step ran work from before the trace: read by
# hand, num_workers=4's step 5 has its first copy launched at +8.556 ms start at +44.992 ms with no
# traced device work between)
VINTAGES = [
    ("resnet50_num_workers_0.pt.trace.json.gz", "resnet50_num_workers_4.pt.trace.json.gz", True),
    ("resnet50_2021_num_workers_0.pt.trace.json.gz", "resnet50_2021_num_workers_4.pt.trace.json.gz", False),
]


@pytest.mark.parametrize("before,after,warmup", VINTAGES)
def test_the_input_bound_holds_on_both_recordings_of_the_fix(before, after, warmup):
    truth_before = trace_truth.read(DATA / before)
    truth_after = trace_truth.read(DATA / after, skip_first=warmup)
    bound = truth_before["idle_in_dataloader"]  # GPU idle while the host fetched, of step time
    realised = 1 - truth_after["window_ms"] / truth_before["window_ms"]
    assert realised <= bound <= truth_before["dataloader"]  # a true bound, below the host's share
    assert 0.6 <= realised / bound <= 1.0

    a, b = steptrace.load(DATA / before).to_dict(), steptrace.load(DATA / after).to_dict()
    assert a["diagnosis"]["label"] == "INPUT-BOUND"  # both vintages now: the label follows the gains
    assert a["diagnosis"]["gains"]["input"] == pytest.approx(bound, abs=0.002)
    assert list(a["diagnosis"]["gains"])[0] == "input"
    assert "input" not in b["diagnosis"]["gains"]  # num_workers=4 names no input gain
    # One-time work set aside from the fixed run (a first call per shape: cuDNN's first batch norm
    # at a shape, 10x its later calls), held to the events read plainly; the steps are the rest.
    aside = (b["set_aside"].get("initialisation") or {}).get("total_ms", 0.0)
    if aside:
        name = b["facts"]["trace.one_time_calls"].rsplit(" ", 1)[0]
        calls = sorted(
            (float(e["ts"]), float(e["dur"]) / 1000)
            for e in trace_truth.events_of(DATA / after)
            if e.get("ph") == "X" and e.get("name") == name
        )
        per_step = len(calls) // b["steps"]  # the op runs as often in each step (one call per layer)
        first_step, later = [d for _, d in calls[:per_step]], sorted(d for _, d in calls[per_step:])
        assert max(first_step) == pytest.approx(aside, abs=0.001)  # one call of the first step, and only it
        assert max(first_step) >= 10 * later[len(later) // 2]
    assert b["step_ms"]["mean"] == pytest.approx(truth_after["window_ms"] - aside / b["steps"], abs=0.001)
    assert f"(up to {100 * bound:.0f}% shorter steps)" in a["diagnosis"]["advice"][0]
    # compare says what the fix realised, of the bound
    out = subprocess.run(
        [sys.executable, "-m", "steptrace", "compare", DATA / before, DATA / after],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.strip().startswith("input: up to"))
    # compare weighs the steps' mean: the fixed run's one-time work is in no step
    stepped = 1 - (truth_after["window_ms"] - aside / b["steps"]) / truth_before["window_ms"]
    assert line.strip() == (
        f"input: up to {100 * bound:.0f}% of step time; realised {100 * stepped:.0f}%, "
        f"{100 * stepped / bound:.0f}% of it"
    )


def _run(step_ms: float, gains: dict, steps: int = 50, spread: float = 0.01) -> dict:
    return {
        "steps": steps,
        "run_ms": step_ms * steps,
        "set_aside": {},
        "step_ms": {
            "mean": step_ms,
            "p50": step_ms,
            "p95": step_ms * (1 + spread),
            "p99": step_ms * (1 + spread),
            "max": step_ms * (1 + spread),
        },
        "phases": {},
        "diagnosis": {"label": "INPUT-BOUND", "gains": gains},
    }


def test_compare_flags_a_saving_beyond_its_bound():
    """A fix that saved more than its cause's bound, beyond the noise, changed something else too."""
    from steptrace._cli import compare as _compare

    before = [_run(100, {"input": 0.30}), _run(101, {"input": 0.31}), _run(99, {"input": 0.29})]
    within = _compare.compare(before, [_run(75, {}), _run(76, {}), _run(74, {})], None)
    assert [(r.cause, round(r.bound, 2), round(r.saved, 2), r.beyond) for r in within.realised] == [
        ("input", 0.3, 0.25, False)
    ]
    assert "input: up to 30% of step time; realised 25%, 83% of it" in _compare.render(within, "a", "b")
    beyond = _compare.compare(before, [_run(50, {}), _run(51, {}), _run(49, {})], None)
    assert beyond.realised[0].beyond
    assert "something else changed too" in _compare.render(beyond, "a", "b")


torch = pytest.importorskip("torch")


class _Sleepy(torch.utils.data.Dataset):
    """Each batch takes 12 ms to load (a sleep: storage, decoding)."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        time.sleep(0.012)
        return torch.ones(8)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _loader_program(workers: int) -> tuple:
    """A loop that waits for its loader: 12 ms a batch on the training thread, or in workers."""
    t = steptrace.Tracer(warmup_steps=3, print_at_exit=False)
    loader = torch.utils.data.DataLoader(
        _Sleepy(), batch_size=None, num_workers=workers, prefetch_factor=4 if workers else None
    )
    stamps = []
    for _ in t.steps(loader):
        with t.phase("compute"):
            _spin(0.004)
        stamps.append(time.perf_counter())
    return t.summary().to_dict(), statistics.median(b - a for a, b in zip(stamps[3:], stamps[4:]))


def _logging_program(log: bool) -> tuple:
    """A loop with a slow per-step log line (a 5 ms write, outside every phase)."""
    t = steptrace.Tracer(warmup_steps=3, print_at_exit=False)
    stamps = []
    for i in t.steps(range(40)):
        with t.phase("compute"):
            _spin(0.006)
        if log:
            time.sleep(0.005)  # printing the loss to a slow terminal, every step
        stamps.append(time.perf_counter())
    return t.summary().to_dict(), statistics.median(b - a for a, b in zip(stamps[3:], stamps[4:]))


def _validation_program(every: int) -> tuple:
    """A loop that validates every `every` steps (30 ms, set aside): run time per step."""
    t = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
    start = time.perf_counter()
    for i in t.steps(range(40)):
        with t.phase("compute"):
            _spin(0.006)
        if i % every == every - 1:
            with t.exclude("validation"):
                time.sleep(0.030)
    return t.summary().to_dict(), (time.perf_counter() - start) / 40


def _fix(program, before, after, runs=3):
    """The bound the before side names (median of runs), what the fix realised by hand timing
    (medians of runs), and the spread of that between runs."""
    a = [program(before) for _ in range(runs)]
    b = [program(after) for _ in range(runs)]
    realised = [1 - y[1] / x[1] for x, y in zip(a, b)]
    return [x[0] for x in a], statistics.median(realised), max(realised) - min(realised)


def test_real_fixes_realise_at_most_their_bound_and_the_largest_bound_is_the_largest_gain():
    results = {}
    for name, program, before, after, cause in (
        ("workers", _loader_program, 0, 2, "input"),
        ("log line", _logging_program, True, False, "other"),
        ("validation", _validation_program, 5, 20, "validation"),
    ):
        summaries, realised, spread = _fix(program, before, after)
        bound = statistics.median(s["diagnosis"]["gains"][cause] for s in summaries)
        assert realised <= bound + spread + 0.03, (name, bound, realised, spread)  # a true bound
        assert realised >= 0.5 * bound, (name, bound, realised)  # and a close one: these fixes remove the cause
        results[name] = (bound, realised)
    # the workers fix names the largest bound, and realised the most
    assert max(results, key=lambda n: results[n][0]) == max(results, key=lambda n: results[n][1]) == "workers"


def test_compare_says_a_small_phase_change_in_ms_not_percent():
    """A phase under 1% of the step on both sides: +0.012 ms, never +1229%; a large one stays in %."""
    from steptrace._cli import compare as _compare

    a, b = _run(100, {}), _run(100, {})
    a["phases"] = {"wait": {"mean_ms": 0.001}, "compute": {"mean_ms": 50.0}}
    b["phases"] = {"wait": {"mean_ms": 0.0133}, "compute": {"mean_ms": 60.0}}
    rows = {what: change for what, _, _, change in _compare.compare(a, b, None).rows}
    assert rows["wait (mean)"] == "+0.012 ms (under 1% of a step)"
    assert rows["compute (mean)"] == "+20.0%"
    b["phases"]["wait"]["mean_ms"] = 2.0  # 2% of the step on one side: a real change, in %
    assert _compare.compare(a, b, None).rows[-3][3].endswith("%")
