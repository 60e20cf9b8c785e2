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
from conftest import TRACES  # noqa: E402

DATA = TRACES
TRACES = [
    "resnet50_num_workers_4.pt.trace.json.gz",
    "hta_trace_diff_test.json.gz",
    "tracelens_h100_qwen1.5-0.5b.json.gz",
    "tracelens_mi300_resnet_act_checkpoint.json.gz",
]
DEVICE = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")


def independent(path: Path, warmup: int):
    """{kernel: (calls, ms)} and {op: ms} over the counted steps, read from the JSON alone."""
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    kernels = [e for e in events if e.get("cat") in ("kernel", "Kernel")]
    device = collections.Counter(e["pid"] for e in kernels).most_common(1)[0][0]
    steps = sorted(
        (
            e
            for e in events
            if e["name"].startswith("ProfilerStep#")  # not the GPU's copies of them
            and e.get("cat") in ("cpu_op", "user_annotation", "Operator")
        ),
        key=lambda e: e["ts"],
    )
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

    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e["pid"] == host_pid
        and e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")
        and e.get("args", {}).get("correlation")
    }
    ops = collections.defaultdict(list)  # by thread: (begin, -dur, end, name), sorted
    for e in events:
        if (
            e["pid"] == host_pid
            and e.get("cat") in ("cpu_op", "user_annotation", "Operator")
            and not e["name"].startswith("ProfilerStep#")
            and not str(e["tid"]).startswith("-")
        ):
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
    short = collections.Counter()  # kernels of at most 20 us, by op
    for e in kernels:
        if e["pid"] != device or not counted(e["ts"]):
            continue
        by_kernel[e["name"]][0] += 1
        by_kernel[e["name"]][1] += e["dur"] / 1e3
        launch = launches.get(e.get("args", {}).get("correlation"))
        op = op_of(launch) if launch else "(no op)"
        by_op[op] += e["dur"] / 1e3
        short[op] += e["dur"] <= 20
    n = len(windows)
    independent.short = {k: c / n for k, c in short.items()}
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
    for row in k["ops"]:  # short kernels by op (those LAUNCH-BOUND names)
        if not row["name"].startswith("(other"):
            assert row["short_kernels_per_step"] == pytest.approx(independent.short.get(row["name"], 0))


def test_launch_bound_names_the_ops_launching_most_short_kernels():
    """An H100 image classifier, eager: its short kernels' sources, counted independently."""
    path = DATA / "tracelens_h100_falconsai.json.gz"
    d = steptrace.load(path).to_dict()
    assert d["diagnosis"]["label"] == "LAUNCH-BOUND"
    ops = independent(path, d["warmup_steps"])[1]
    # most short kernels first; a tie goes to the op with more device time
    top = sorted(
        ((n, c) for n, c in independent.short.items() if not n.startswith("(")), key=lambda kv: (-kv[1], -ops[kv[0]])
    )[:3]
    named = ", ".join(f"`{n}` ({c:.0f}{' a step' if i == 0 else ''})" for i, (n, c) in enumerate(top))
    assert f"the most kernels of at most 20 us: {named}." in d["diagnosis"]["evidence"]
    assert f"starting where the short ones come from ({named})" in d["diagnosis"]["advice"][1]


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


def test_compare_of_the_two_resnet_recordings_moves_input_and_no_kernel():
    """Same model, num_workers 0 then 4: `input` moves, no kernel beyond the noise."""
    from steptrace._cli import compare as _compare

    a = steptrace.load(DATA / "resnet50_num_workers_0.pt.trace.json.gz").to_dict()
    b = steptrace.load(DATA / "resnet50_num_workers_4.pt.trace.json.gz").to_dict()
    c = _compare.compare(a, b, None)
    assert c.moved and not any(m.beyond for m in c.moved if m.what == "kernel")
    rows = {what: change for what, _, _, change in c.rows}
    assert rows["input (mean)"].startswith("-")
    assert "what moved on the device" in _compare.render(c, "nw0", "nw4")


def test_compare_of_a_changed_model_names_the_ops_that_moved():
    """HTA's trace_diff pair: the test run dropped `aten::bmm` and cut `aten::mm`; compare names
    both with the figures an independent reading gives."""
    from steptrace._cli import compare as _compare

    paths = [DATA / "hta_trace_diff_control.json.gz", DATA / "hta_trace_diff_test.json.gz"]
    a, b = (steptrace.load(p).to_dict() for p in paths)
    ops_a, ops_b = (independent(p, d["warmup_steps"])[1] for p, d in zip(paths, (a, b)))
    assert "aten::bmm" in ops_a and "aten::bmm" not in ops_b
    moved = {(m.what, m.name): m for m in _compare.compare(a, b, None).moved}
    bmm, mm = moved[("op", "aten::bmm")], moved[("op", "aten::mm")]
    assert bmm.b_ms is None and bmm.a_ms == pytest.approx(ops_a["aten::bmm"], abs=1e-3)
    assert (mm.a_ms, mm.b_ms) == (
        pytest.approx(ops_a["aten::mm"], abs=1e-3),
        pytest.approx(ops_b["aten::mm"], abs=1e-3),
    )
    assert mm.b_ms < mm.a_ms / 2


def test_the_html_report_draws_the_kernels_sorted():
    import re

    s = steptrace.load(DATA / "resnet50_num_workers_4.pt.trace.json.gz")
    page = s.to_html()
    k = s.to_dict()["gpu"]["kernels"]
    assert "What the GPU spent its time on" in page
    section = page[page.index("<h3>By kernel</h3>") : page.index("<h3>By the op that launched them</h3>")]
    widths = [float(w) for w in re.findall(r'class="kbar" style="width:([0-9.]+)px', section)]
    assert len(widths) == 10 and widths == sorted(widths, reverse=True) and widths[0] == 300.0
    import html as html_lib

    first = re.search(r'<td class="kname">(.*?)</td>', section).group(1)
    assert html_lib.unescape(first) == steptrace._core.short_kernel_name(k["kernels"][0]["name"])


def test_compare_names_the_kernel_a_model_change_replaced(tmp_path):
    """Hand-made device views: a step whose GEMM became a tensor-core GEMM shows both moving."""
    from steptrace._cli import compare as _compare

    def run(kernels):
        rows = [
            {
                "name": n,
                "kind": "gemm",
                "calls_per_step": 1,
                "ms_per_step": ms,
                "busy_share": 0.5,
                "median_us": ms * 1e3,
                "tensor_core": "h884" in n,
            }
            for n, ms in kernels
        ]
        step = {"mean": 10.0, "p50": 10.0, "p95": 10.1, "p99": 10.1, "max": 10.2}
        return {
            "steps": 200,
            "step_ms": step,
            "phases": {},
            "diagnosis": {"label": "COMPUTE-BOUND", "gains": {}},
            "gpu": {
                "kernels": {
                    "kernels": rows,
                    "ops": [
                        {
                            "name": "aten::mm",
                            "kernels_per_step": 1,
                            "ms_per_step": sum(ms for _, ms in kernels),
                            "busy_share": 1.0,
                        }
                    ],
                }
            },
        }

    before = run([("volta_sgemm_128x64_nn", 6.0), ("elementwise_kernel", 1.0)])
    after = run([("volta_h884gemm_128x128_nn", 2.0), ("elementwise_kernel", 1.0)])
    c = _compare.compare(before, after, None)
    moved = {(m.what, m.name): m for m in c.moved}
    assert moved[("kernel", "volta_sgemm_128x64_nn")].b_ms is None  # gone
    assert moved[("kernel", "volta_h884gemm_128x128_nn")].a_ms is None  # new
    assert moved[("op", "aten::mm")].beyond and moved[("op", "aten::mm")].b_ms == 3.0
    assert not moved[("kernel", "elementwise_kernel")].beyond
    text = _compare.render(c, "fp32", "fp16")
    assert "gone" in text and "new" in text and "-4.000 ms (-57.1%)" in text
