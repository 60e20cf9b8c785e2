"""The right cause, third pass, on real traces: graph replays are not launches, claims about work
before the trace hold against the correlation ids, close calls say so, and a JIT's first calls
are start-up. Each figure is held to an independent reading of the plain JSON (no steptrace
code), as test_right_cause.py does.

Where each file comes from: tests/data/profiler_traces/README.md."""

import pytest

import steptrace
from trace_truth import events_of, main_and_windows, read, read_causes
from conftest import TRACES

REPLAYS = [
    "tracelens_vllm_decode_full_graphs.json.gz",
    "tracelens_vllm_piecewise_graphs.json.gz",
    "hta_negative_queue_rank0.json.gz",
    "hta_trace_diff_test.json.gz",
]


def launches_truth(name, skip_first):
    """Per window, read the plain way: the main process's kernel and graph launch calls made in it
    (copies and memsets left out), a graph launch counted once; and, as the device view counts a
    step's kernels, those starting in it that a graph launch ran, and the replays they belong to
    (distinct correlation ids in each window)."""
    events = events_of(TRACES / name)
    main, windows = main_and_windows(events, skip_first)
    calls = [
        e
        for e in events
        if e["pid"] == main[0]
        and e.get("cat") in ("cuda_runtime", "cuda_driver")
        and "Launch" in str(e["name"])
        and any(a <= float(e["ts"]) < b for a, b in windows)
    ]
    graphs = {e["args"]["correlation"] for e in events if e["pid"] == main[0] and "GraphLaunch" in str(e["name"])}
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in graphs]
    graph_kernels, replays = 0, 0
    for a, b in windows:
        running = [e for e in kernels if a <= float(e["ts"]) < b]  # a kernel is its start's step's
        graph_kernels += len(running)
        replays += len({e["args"]["correlation"] for e in running})
    n = len(windows)
    return len(calls) / n, replays / n, graph_kernels / n


@pytest.mark.parametrize("name", REPLAYS)
def test_a_graph_replay_counts_as_one_launch(name):
    d = steptrace.load(TRACES / name).to_dict()
    launches, replays, graph_kernels = launches_truth(name, d["warmup_steps"] > 0)
    facts = d["facts"]
    assert replays > 0
    assert float(facts["trace.launches_per_step"]) == pytest.approx(launches, abs=0.05)
    assert d["gpu"]["graph_replays_per_step"] == pytest.approx(replays, abs=0.05)
    assert d["gpu"]["graph_kernels_per_step"] == pytest.approx(graph_kernels, abs=0.05)
    # each replay is one launch of the host's however many kernels it runs
    assert launches < d["gpu"]["kernels_per_step"] or graph_kernels <= replays
    advice = " ".join(d["diagnosis"]["advice"])
    assert "replay a step's" not in advice and 'mode="reduce-overhead")' not in advice


def test_work_before_the_trace_is_claimed_only_with_evidence():
    # vLLM's decode step: its device work starts 7.8 ms after the launches, yet every kernel's
    # launch is in the trace and no step ran before it: the wait is counted busy (the host did
    # not cause it) but not called work launched before the trace.
    name = "tracelens_vllm_decode_full_graphs.json.gz"
    events = events_of(TRACES / name)
    launched = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert all(e["args"]["correlation"] in launched for e in device)
    assert not any(str(e["name"]).startswith("ProfilerStep#") for e in events)
    first_launch = min(
        float(e["ts"])
        for e in events
        if e.get("cat") == "cuda_runtime"
        and "correlation" in e["args"]
        and e["args"]["correlation"] in {x["args"]["correlation"] for x in device}
    )
    late_ms = (min(float(e["ts"]) for e in device) - first_launch) / 1000
    assert late_ms > 5
    reason = steptrace.load(TRACES / name).to_dict()["backend"]["reason"]
    assert "launched before the trace" not in reason
    assert "every kernel's launch is in the trace and no step ran before it" in reason
    # ResNet-50's scheduled profile starts at ProfilerStep#5: steps ran before it, so its first
    # step's wait is work launched before the trace, as before
    assert (
        "its device ran work launched before the trace"
        in steptrace.load(TRACES / "resnet50_num_workers_4.pt.trace.json.gz").to_dict()["backend"]["reason"]
    )


def test_a_close_call_names_the_runner_up_with_its_gain():
    # A tiny BERT on an H100: the GPU idles 49% while the host runs Python outside every op
    # (HOST-BOUND) and 44% while it is in ops launching short kernels (LAUNCH-BOUND): 5 points.
    name = "tracelens_h100_bert-small.json.gz"
    s = steptrace.load(TRACES / name)
    d = s.to_dict()
    causes, plain = read_causes(TRACES / name), read(TRACES / name)
    in_ops = causes["idle"] - causes["outside_ops"] - plain["idle_in_sync"] - plain["idle_in_dataloader"]
    assert d["diagnosis"]["label"] == "HOST-BOUND"
    assert causes["outside_ops"] - in_ops < 0.10
    assert d["diagnosis"]["runner_up"] == "LAUNCH-BOUND"
    assert d["diagnosis"]["gains"]["compute"] == pytest.approx(in_ops, abs=0.01)
    also = [a for a in d["diagnosis"]["advice"] if a.startswith("also: a close call, LAUNCH-BOUND")]
    assert len(also) == 1 and f"(up to {100 * d['diagnosis']['gains']['compute']:.0f}% shorter steps)" in also[0]
    assert "A close call: LAUNCH-BOUND is" in d["diagnosis"]["evidence"]
    assert "HOST-BOUND (a close call: LAUNCH-BOUND next)" in str(s)
    # the first fix is still the label's
    assert d["diagnosis"]["advice"][0].startswith("cut per-op Python overhead")
    # a clear lead is no close call: ResNet-50's loader at 34% of the step, nothing else near
    clear = steptrace.load(TRACES / "resnet50_num_workers_0.pt.trace.json.gz").to_dict()["diagnosis"]
    assert clear["label"] == "INPUT-BOUND" and clear["runner_up"] is None
    assert not any("close call" in a for a in clear["advice"])
