"""A program that names its own warm-up (`record_function("warmup")`, as benchmark harnesses do)
says which of its work is start-up: steps those ranges cover are warm-up steps, and a window of a
trace without steps begins after them. Each program here stamps its own truth beside the trace
with perf_counter: how long each measured iteration took, and how long the warm-up ran."""

import time
from pathlib import Path

import pytest

import steptrace

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

START_UP_S = 0.2  # the warm-up's one-time cost
WORK_S = 0.01  # a measured iteration's own work


def _work(model, x):
    model(x).sum().backward()
    time.sleep(WORK_S)


def test_steps_the_program_names_warm_up_are_warm_up_steps(tmp_path: Path):
    model, x = torch.nn.Linear(64, 64), torch.randn(8, 64)
    lengths = []
    # the profiler's own warm-up takes iteration 0; the program's covers 1 and 2 (1 holds the start-up)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=7)) as prof:
        for i in range(7):
            began = time.perf_counter()
            with record_function("warmup" if i < 3 else "train"):
                if i == 1:
                    time.sleep(START_UP_S)
                _work(model, x)
            prof.step()
            lengths.append(1000 * (time.perf_counter() - began))
    trace = tmp_path / "steps.json"
    prof.export_chrome_trace(str(trace))
    d = steptrace.load(trace).to_dict()
    # The trace holds ProfilerStep#1-6 (the cycle of 7 is not over: the exit closes it).
    assert d["warmup_steps"] == 2
    assert d["steps"] in (4, 5)
    assert "the first 2 steps are left out as warm-up by the program's own words" in d["backend"]["reason"]
    measured = lengths[3:]
    # the steps counted are the measured iterations, none the one that held the start-up (stamped)
    assert min(measured) * 0.5 <= d["step_ms"]["p50"] <= max(measured) * 1.5
    assert d["step_ms"]["max"] < lengths[1]


def test_a_benchmark_block_reads_after_its_named_warm_up(tmp_path: Path):
    model, x = torch.nn.Linear(64, 64), torch.randn(8, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        warm_began = time.perf_counter()
        with record_function("[bench|warmup]"):
            time.sleep(START_UP_S)
            _work(model, x)
        measured_began = time.perf_counter()
        for _ in range(3):
            with record_function("[bench|measure]"):
                _work(model, x)
        measured_ms = 1000 * (time.perf_counter() - measured_began)
    warm_ms = 1000 * (measured_began - warm_began)
    trace = tmp_path / "block.json"
    prof.export_chrome_trace(str(trace))
    d = steptrace.load(trace).to_dict()
    assert d["windows"] and d["steps"] == 1
    assert (
        "the window begins where the program's own warm-up ends: 1 range named warm-up (`[bench|warmup]`)"
        in d["backend"]["reason"]
    )
    # the window holds the measured part (and the block's closing), not the 200 ms warm-up
    assert 0.9 * measured_ms <= d["step_ms"]["mean"] < measured_ms + 0.5 * warm_ms
    assert "[bench|warmup]" not in d["phases"]
