"""The ceiling (FLOPs, MFU): FLOPs read from real traces' recorded shapes equal the textbook
formulas written here, op by op; on a CPU loop they equal torch's own count (with_flops); live,
flops="count" equals FlopCounterMode's count of the step."""

from math import prod
from pathlib import Path

import pytest

import steptrace
from trace_truth import events_of, main_and_windows

DATA = Path(__file__).resolve().parent.parent.parent / "data" / "profiler_traces"

# The textbook count of each matrix op, written apart from steptrace's (cpp/src/profiler/op_cost.cpp):
# FLOPs of one call from its recorded "Input Dims" and "Concrete Inputs".
MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear", "aten::_scaled_mm"}
ATTENTION_BHSD = {
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
}
CONVS = {
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::convolution",
    "aten::_convolution",
    "aten::convolution_backward",
    "aten::cudnn_convolution_backward",
}
MATRIX = MATMULS | ATTENTION_BHSD | CONVS | {"aten::_flash_attention_forward"}
DTYPES = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16", "double": "fp64"}


def ints(text):
    return [int(x) for x in text.strip("[]").split(",") if x.strip()]


def textbook_flops(name, dims, concrete):
    if name in ("aten::addmm", "aten::baddbmm"):
        dims = dims[1:]
    if name in MATMULS:
        a, b = dims[0], dims[1]
        if name == "aten::linear":  # x [..., in] @ w[out, in]^T
            return 2 * prod(a[:-1]) * a[-1] * b[0]
        m = a[-2] if len(a) > 1 else 1
        n = b[-1] if len(b) > 1 else 1
        ba, bb = a[:-2], b[:-2]
        width = max(len(ba), len(bb))
        ba, bb = [1] * (width - len(ba)) + ba, [1] * (width - len(bb)) + bb
        return 2 * prod(max(x, y) for x, y in zip(ba, bb)) * m * a[-1] * n
    if name in ATTENTION_BHSD:
        q, k, v = dims[:3]
        return 2 * prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])
    if name == "aten::_flash_attention_forward":  # [B, S, H, D]
        q, k, v = dims[:3]
        return 2 * q[0] * q[2] * q[1] * k[1] * (q[-1] + v[-1])
    if name in ("aten::convolution_backward", "aten::cudnn_convolution_backward"):
        grad_out, x, w = dims[:3] if name == "aten::convolution_backward" else (dims[1], dims[0], dims[2])
        mask = concrete[10] if len(concrete) > 10 and concrete[10] else "[True, True]"
        grads = sum(1 for word in mask.strip("[]").split(",")[:2] if word.strip() == "True")
        return grads * 2 * x[0] * prod(w) * prod(grad_out[2:])
    # A forward convolution: stride, padding, dilation at 3, 4, 5; not transposed here.
    x, w = dims[0], dims[1]
    stride, dilation = ints(concrete[3]), ints(concrete[5])
    if concrete[4] in ("same", "valid"):
        out = x[2:] if concrete[4] == "same" else [i - (k - 1) for i, k in zip(x[2:], w[2:])]
    else:
        pad = ints(concrete[4])
        out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, s, p, d in zip(x[2:], w[2:], stride, pad, dilation)]
    return 2 * x[0] * prod(w) * prod(out)


def matrix_flops_by_op(path, warmup):
    """(op, dtype) -> FLOPs over the counted windows: each matrix op outermost among them, on any
    thread of the main process, that launched a kernel of the trace."""
    events = events_of(path)
    (pid, _tid), windows = main_and_windows(events, skip_first=warmup > 0)
    kernels = {e["args"].get("correlation") for e in events if e.get("cat") in ("kernel", "Kernel")}
    launches = {}
    for e in events:
        if (
            e.get("pid") == pid
            and e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")
            and e["args"].get("correlation") in kernels
        ):
            launches.setdefault(e["tid"], []).append(float(e["ts"]))

    def costed(e):  # a forward convolution traced before torch 2.0 records no strides: no count
        return not (e["name"] in CONVS and "backward" not in e["name"] and not e["args"].get("Concrete Inputs"))

    ops = sorted(
        (
            e
            for e in events
            if e.get("pid") == pid and e.get("cat") in ("cpu_op", "Operator") and e["name"] in MATRIX and costed(e)
        ),
        key=lambda e: (e["tid"], float(e["ts"]), -float(e["dur"])),
    )
    out, open_until = {}, {}
    for e in ops:
        ts, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        if ts < open_until.get(e["tid"], -1):
            continue  # inside an outer matrix op: counted there
        open_until[e["tid"]] = end
        if not any(a <= ts < b for a, b in windows):
            continue
        if not any(ts <= t < end for t in launches.get(e["tid"], [])):
            continue
        args = e["args"]
        key = (
            e["name"],
            DTYPES.get(args["Input type"][1 if e["name"] in ("aten::addmm", "aten::baddbmm") else 0], "?"),
        )
        out[key] = out.get(key, 0) + textbook_flops(e["name"], args["Input Dims"], args.get("Concrete Inputs", []))
    return out


@pytest.mark.parametrize(
    "name",
    [
        "tracelens_h100_qwen1.5-0.5b.json.gz",
        "tracelens_mi300_xdit_sd3.5.json.gz",
        "tracelens_mi300_resnet_act_checkpoint.json.gz",
        "tracelens_h100_timesformer.json.gz",
        "tracelens_sglang_qwen3_prefilldecode.json.gz",
        "tracelens_torch_compile_triton.json.gz",
        "hta_trace_diff_control.json.gz",
        "resnet50_num_workers_4.pt.trace.json.gz",
    ],
)
def test_flops_from_real_traces_shapes_are_the_textbooks(name):
    s = steptrace.load(DATA / name).to_dict()
    ceiling = s["ceiling"]
    truth = matrix_flops_by_op(DATA / name, s["warmup_steps"])
    compared = 0
    for row in ceiling["ops"]:
        if row["kind"] not in ("gemm", "convolution", "attention"):
            continue
        key = (row["op"], row["dtype"])
        assert key in truth, key
        assert row["gflop_per_step"] * 1e9 * s["steps"] == pytest.approx(truth[key], rel=1e-9), key
        compared += 1
    assert compared >= 2
    # Matrix ops make nearly all of a model's FLOPs: the step's total is theirs plus elementwise ops'.
    assert ceiling["gflop_per_step"] * 1e9 * s["steps"] >= sum(truth.values()) * (1 - 1e-9)


def test_device_named_by_the_trace_and_mfu_is_flops_at_peak_over_the_step():
    s = steptrace.load(DATA / "tracelens_h100_qwen1.5-0.5b.json.gz").to_dict()
    c = s["ceiling"]
    assert c["gpu"] == "NVIDIA H100 80GB HBM3" and c["device"] == "H100 SXM"
    assert c["peak_dtype"] == "bf16" and c["peak_tflops"] == 989.5
    assert c["tflops"] == pytest.approx(c["gflop_per_step"] / s["step_ms"]["mean"], rel=1e-9)
    # Nearly all its FLOPs are bf16: MFU is within a hair of the model FLOP/s over bf16's peak.
    assert c["mfu"] == pytest.approx(c["tflops"] / 989.5, rel=0.05)
    assert 0 < c["costed_share"] <= 1
    assert s["diagnosis"]["label"] == "COMPUTE-BOUND"
    assert "MFU is" in s["diagnosis"]["evidence"]


torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.linear = torch.nn.Linear(16 * 16 * 16, 256)

    def forward(self, x, a, b):
        y = self.linear(torch.flatten(self.conv(x), 1))
        return torch.mm(y, torch.bmm(a, b).sum(0)) + y.mean()


@pytest.mark.torch
def test_flops_read_from_a_cpu_trace_equal_torchs_with_flops(tmp_path):
    torch.manual_seed(0)
    model = Model().eval()
    x, a, b = torch.randn(8, 3, 32, 32), torch.randn(4, 256, 64), torch.randn(4, 64, 256)
    steps = 6
    # No schedule: Kineto's CPU-only cycle end crashed under pytest here (torch 2.13, transferCpuTrace).
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        for _ in range(steps):
            model(x, a, b)
            prof.step()
    path = tmp_path / "flops.pt.trace.json"
    prof.export_chrome_trace(str(path))
    counted = {}
    for e in prof.events():
        if e.flops:
            counted[e.name] = counted.get(e.name, 0) + e.flops
    assert {"aten::addmm", "aten::conv2d", "aten::bmm", "aten::mm"} <= set(counted), counted
    s = steptrace.load(path).to_dict()
    c, n = s["ceiling"], s["steps"]  # torch 2.13 writes no ProfilerStep without a schedule: one window
    assert c["gflop_per_step"] * 1e9 * n == pytest.approx(sum(counted.values()), rel=1e-9)
    rows = {r["op"]: r for r in c["ops"]}
    assert rows["aten::conv2d"]["gflop_per_step"] * 1e9 * n == pytest.approx(counted["aten::conv2d"], rel=1e-9)
    assert rows["aten::bmm"]["gflop_per_step"] * 1e9 * n == pytest.approx(counted["aten::bmm"], rel=1e-9)
    # torch counts the addmm inside aten::linear; steptrace the linear around it, once.
    assert rows["aten::linear"]["gflop_per_step"] * 1e9 * n == pytest.approx(counted["aten::addmm"], rel=1e-9)
    assert rows["aten::linear"]["calls_per_step"] * n == steps
    assert c["device"] == "" and c["mfu"] == 0  # a CPU: no peak, achieved figures only


@pytest.mark.torch
def test_flops_count_counts_one_step_with_flop_counter_mode():
    a, b = torch.randn(256, 512), torch.randn(512, 128)
    with FlopCounterMode(display=False) as fc:
        torch.mm(a, b)
    assert fc.get_total_flops() == 2 * 256 * 512 * 128  # the textbook's
    t = steptrace.Tracer(warmup_steps=1, flops="count")
    for _ in range(8):
        with t.step():
            torch.mm(a, b)
    s = t.summary().to_dict()
    c = s["ceiling"]
    assert c["flops_from"] == "FlopCounterMode"
    assert c["gflop_per_step"] * 1e9 == fc.get_total_flops()
    assert c["tflops"] == pytest.approx(c["gflop_per_step"] / s["step_ms"]["mean"], rel=1e-9)
    assert t.options()["flops_per_step"] == fc.get_total_flops()
    assert "FlopCounterMode" in str(t.summary())
    # The steps() loop's steps are counted the same way.
    loop = steptrace.Tracer(warmup_steps=1, flops="count")
    for _ in loop.steps(range(8)):
        torch.mm(a, b)
    assert loop.summary().to_dict()["ceiling"]["gflop_per_step"] * 1e9 == fc.get_total_flops()


def test_flops_per_step_told_gives_model_flops_and_mfu_on_a_named_device():
    t = steptrace.Tracer(
        warmup_steps=0, flops_per_step=2e6, flops_dtype="bf16"
    )  # steps of microseconds: 2e12 would be impossible
    t.set_fact("gpu.name", "NVIDIA H100 80GB HBM3")
    for _ in range(5):
        with t.step():
            pass
    s = t.summary().to_dict()
    c = s["ceiling"]
    assert c["flops_from"] == "flops_per_step" and c["device"] == "H100 SXM"
    assert c["tflops"] == pytest.approx(2e6 / 1e12 / (s["step_ms"]["mean"] / 1e3), rel=1e-9)
    assert c["mfu"] == pytest.approx(c["tflops"] / 989.5, rel=1e-9)
    metrics = t.metrics().prometheus()
    assert "steptrace_mfu " in metrics and "steptrace_model_flops_per_second " in metrics
    with pytest.raises(ValueError, match="flops_per_step"):
        t.configure(flops_per_step=-1)
    with pytest.raises(ValueError, match="flops_dtype"):
        t.configure(flops_dtype="int4")


def test_the_html_report_draws_each_costed_op_under_the_roofs():
    import re

    s = steptrace.load(DATA / "tracelens_h100_qwen1.5-0.5b.json.gz")
    c = s.to_dict()["ceiling"]
    page = s.to_html()
    assert "<h2>The ceiling</h2>" in page and "MFU 12.9% on the H100 SXM" in page
    section = page[page.index("<h2>The ceiling</h2>") :]
    section = section[: section.index("</svg>")]
    plotted = [r for r in c["ops"][:12] if r["gflop_per_step"] > 0 and r["mb_per_step"] > 0 and r["tflops"] > 0]
    assert len(re.findall(r"<circle ", section)) == len(plotted) >= 3
    assert "<polyline " in section  # the roofs, from the rows' own shares
    # A point's height is its achieved rate on the log scale: the fastest op is the highest.
    ys = {t: float(y) for y, t in re.findall(r'cy="([0-9.]+)"[^>]*><title>(\S+) \(', section)}
    fastest = max(plotted, key=lambda r: r["tflops"])["op"]
    assert ys[fastest] == min(ys.values())


@pytest.mark.torch
def test_flops_count_counts_its_own_tracers_step_on_the_thread_it_opens_on():
    """Another tracer's step, or a step opening on another thread while the count runs, is not
    counted; the mode is never left on a thread (a FlopCounterMode left on doubles step times)."""
    import threading
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    other = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
    t = steptrace.Tracer(warmup_steps=0, print_at_exit=False, flops="count")
    with other.step():  # another tracer's step opens first: not the count's
        torch.mm(a, a)
    entered, release = threading.Event(), threading.Event()

    def side():  # a step of the counted tracer opening on another thread while the count runs
        entered.wait()
        with t.step():
            torch.mm(torch.randn(512, 512), torch.randn(512, 512))
        release.set()

    worker = threading.Thread(target=side)
    worker.start()
    with t.step():  # the count's step, on this thread
        entered.set()
        release.wait(30)
        torch.mm(a, b)
    worker.join()
    assert t.options()["flops_per_step"] == 2 * 64 * 64 * 64
    assert not _get_current_dispatch_mode_stack()  # nothing left on this thread
    with t.step():
        torch.mm(a, b)
    assert t.options()["flops_per_step"] == 2 * 64 * 64 * 64  # counted once


@pytest.mark.torch
def test_flops_count_past_what_a_device_runs_is_said_and_never_raises_out_of_the_step(capsys):
    big = steptrace.Tracer(warmup_steps=0, print_at_exit=False, flops="count")
    from torch.utils.flop_counter import FlopCounterMode

    real = FlopCounterMode.get_total_flops
    FlopCounterMode.get_total_flops = lambda self: 10**22  # crafted shapes: more than any device runs in a step
    try:
        with big.step():
            torch.mm(torch.randn(4, 4), torch.randn(4, 4))
    finally:
        FlopCounterMode.get_total_flops = real
    assert big.options()["flops_per_step"] == 0
    assert "more than the 1e+21 any device runs in a step" in capsys.readouterr().err
