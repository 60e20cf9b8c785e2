"""The device's time by kernel and by op on real public traces (V100, H100, MI300), held to an
independent reading written here: kernel durations summed straight from the trace's JSON, and
each kernel's op found through its launch's correlation."""

import bisect
import collections
import gzip
import json
from pathlib import Path

import pytest

import steptrace
from conftest import cli

DATA = Path(__file__).resolve().parent.parent / "data" / "profiler_traces"
TRACES = ["resnet50_num_workers_4.pt.trace.json.gz", "hta_trace_diff_test.json.gz",
          "tracelens_h100_qwen1.5-0.5b.json.gz", "tracelens_mi300_resnet_act_checkpoint.json.gz"]
DEVICE = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")


def independent(path: Path, warmup: int):
    """{kernel: (calls, ms)} and {op: ms} over the counted steps, read from the JSON alone."""
    events = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    kernels = [e for e in events if e.get("cat") in ("kernel", "Kernel")]
    device = collections.Counter(e["pid"] for e in kernels).most_common(1)[0][0]
    steps = sorted((e for e in events if e["name"].startswith("ProfilerStep#")  # not the GPU's copies of them
                    and e.get("cat") in ("cpu_op", "user_annotation", "Operator")), key=lambda e: e["ts"])
    host_pid = steps[0]["pid"]
    windows = []
    for s in steps:  # the profiler's closing stub holds nothing: no step
        if any(s["ts"] <= e["ts"] < s["ts"] + s["dur"] and e is not s for e in events):
            windows.append((s["ts"], s["ts"] + s["dur"]))
    windows = windows[warmup:]
    starts = [w[0] for w in windows]

    def counted(ts):
        i = bisect.bisect_right(starts, ts) - 1
        return i >= 0 and ts < windows[i][1]

    launches = {e["args"]["correlation"]: e for e in events if e["pid"] == host_pid
                and e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime") and e.get("args", {}).get("correlation")}
    ops = collections.defaultdict(list)  # by thread: (begin, -dur, end, name), sorted
    for e in events:
        if e["pid"] == host_pid and e.get("cat") in ("cpu_op", "user_annotation", "Operator") \
                and not e["name"].startswith("ProfilerStep#") and not str(e["tid"]).startswith("-"):
            ops[e["tid"]].append((e["ts"], -e["dur"], e["ts"] + e["dur"], e["name"]))
    for v in ops.values():
        v.sort()

    def op_of(launch):
        around = ops.get(launch["tid"], [])
        i = bisect.bisect_right(around, (launch["ts"], float("inf")))
        while i > 0:  # the latest-starting op still open at the launch is the innermost
            i -= 1
            if around[i][2] > launch["ts"]:
                return around[i][3]
        return "(no op)"

    by_kernel = collections.defaultdict(lambda: [0, 0.0])
    by_op = collections.Counter()
    for e in kernels:
        if e["pid"] != device or not counted(e["ts"]):
            continue
        by_kernel[e["name"]][0] += 1
        by_kernel[e["name"]][1] += e["dur"] / 1e3
        launch = launches.get(e.get("args", {}).get("correlation"))
        by_op[op_of(launch) if launch else "(no op)"] += e["dur"] / 1e3
    n = len(windows)
    return ({k: (c / n, ms / n) for k, (c, ms) in by_kernel.items()}, {k: ms / n for k, ms in by_op.items()})


@pytest.mark.parametrize("name", TRACES)
def test_kernels_and_ops_equal_an_independent_reading(name):
    d = steptrace.load(DATA / name).to_dict()
    k = d["gpu"]["kernels"]
    kernels, ops = independent(DATA / name, d["warmup_steps"])
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:5]
    for row, (kernel, (calls, ms)) in zip(k["kernels"], top):
        assert row["name"] == kernel
        assert row["ms_per_step"] == pytest.approx(ms, abs=1e-6)
        assert row["calls_per_step"] == pytest.approx(calls)
    top_ops = sorted(ops.items(), key=lambda kv: -kv[1])[:5]
    for row, (op, ms) in zip(k["ops"], top_ops):
        assert (row["name"], row["ms_per_step"]) == (op, pytest.approx(ms, abs=1e-6))


def test_a_v100_fp32_resnet_names_its_convolutions_and_fp16_for_the_tensor_cores():
    s = steptrace.load(DATA / "resnet50_num_workers_4.pt.trace.json.gz")
    d = s.to_dict()
    assert d["diagnosis"]["label"] == "COMPUTE-BOUND"
    first = d["diagnosis"]["advice"][0]
    assert "start with `aten::cudnn_convolution_backward_weight`" in first and "convolution kernels take 43%" in first
    assert "fp16 autocast" in first and "TF32" not in first  # a V100 has no TF32 or bf16 tensor cores
    assert d["gpu"]["kernels"]["gemm_tensor_core_share"] == 0
    full = cli("show", "--kernels", DATA / "resnet50_num_workers_4.pt.trace.json.gz")
    assert full.returncode == 0 and "op (innermost around the launch)" in full.stdout
    assert "implicit_convolve_sgemm" in full.stdout


def test_an_h100_trace_on_tensor_cores_gets_no_precision_advice():
    d = steptrace.load(DATA / "tracelens_h100_qwen1.5-0.5b.json.gz").to_dict()
    assert d["gpu"]["kernels"]["gemm_tensor_core_share"] > 0.99  # its sm90 GEMMs' names say so
    assert not any("tensor cores" in a for a in d["diagnosis"]["advice"])
