"""GPU checks with PyTorch, run by scripts/gpu on a GPU machine: one line per check,
``check <name>: PASS|FAIL <figures>``; exits non-zero on any FAIL.

  torch.profiler beside steptrace in three orders: the profiler's trace keeps every kernel, and
  steptrace's device figures cover the steps outside the session (those inside counted apart)
  CUDA graph capture and replay with steptrace phases on the capturing stream
  torch.compile(mode="reduce-overhead") with steptrace on
  the collector's CPU under ~100k kernels/s
  a summary asked while the GPU still runs the steps' work holds their records
  a torch.profiler trace of the same loop read back by steptrace agrees with its live figures,
  gains included; a one-step profile (schedule active=1) counts its step
  a listener's live windows carry the GPU busy share the whole run has
  the live kernel table: known GEMMs and elementwise kernels by name, calls and launching phase;
  the same loop's torch.profiler trace names the same top kernel
  a rank's live windows carry its GPU's NVML readings, in the device's ranges
  the ceiling: a bf16 GEMM loop's MFU (flops_per_step) within 5% of its FLOPs over its CUDA-event
  time against the peaks table; its torch.profiler trace (record_shapes) costs each mm at its
  kernels' rate; an fp32 loop moved to bf16 realises at least half the gain its trace predicted
  device_sample=2 on real CUPTI: windows left out counted apart, every viewed step with its kernels
"""
# Over 400 lines on purpose: one script, one call on a lent GPU machine whose time is scarce.

from __future__ import annotations

import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import capture_checks
import ceiling_checks
import sample_checks
import steptrace
from trace_spans import op_spans

failures = 0


def check(name: str, ok: bool, figures: str) -> None:
    global failures
    failures += 0 if ok else 1
    print(f"check {name}: {'PASS' if ok else 'FAIL'} {figures}", flush=True)


def quiet() -> steptrace.Tracer:
    return steptrace.Tracer(warmup_steps=0, print_at_exit="never")


def steps_of_kernels(tracer: steptrace.Tracer, n: int, x: torch.Tensor) -> None:
    for _ in tracer.steps(range(n)):
        with tracer.phase("compute"):
            for _ in range(4):
                x = torch.mm(x, x).tanh_()
            torch.cuda.synchronize()


def profiler_kernels(prof) -> int:
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def profiler_orders() -> None:
    x = torch.randn(512, 512, device="cuda")
    for order in (
        "steptrace, then a profiler session",
        "steps inside a profiler session",
        "a profiler session, then steptrace",
    ):
        tracer = quiet()
        if order != "a profiler session, then steptrace":
            steps_of_kernels(tracer, 5, x)  # steptrace holds CUPTI first
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            steps_of_kernels(tracer if order == "steps inside a profiler session" else quiet(), 5, x)
        steps_of_kernels(tracer, 5, x)
        s = tracer.summary().to_dict()
        g = s.get("gpu") or {}
        inside = 5 if order == "steps inside a profiler session" else 0
        expected_viewed = s["steps"] - inside
        ok = (
            profiler_kernels(prof) >= 20
            and g.get("steps_viewed") == expected_viewed
            and g.get("steps_without_records") == inside
            and g.get("kernels_per_step", 0) >= 4
        )
        check(
            f"profiler order: {order}",
            ok,
            f"profiler kernels {profiler_kernels(prof)} (>= 20), steptrace steps viewed {g.get('steps_viewed')} "
            f"(expected {expected_viewed}), without records {g.get('steps_without_records')} (expected {inside}), "
            f"kernels per step {g.get('kernels_per_step')} (>= 4); {s['backend']['reason']}",
        )


def graph_capture() -> None:
    tracer = quiet()
    static_in = torch.randn(256, 256, device="cuda")
    stream = torch.cuda.Stream()
    try:
        with torch.cuda.stream(stream):
            for _ in tracer.steps(range(3)):  # warm-up on the side stream, traced
                with tracer.phase("compute", stream=stream):
                    static_out = torch.mm(static_in, static_in)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            with tracer.step(stream=torch.cuda.current_stream()):
                with tracer.phase("compute", stream=torch.cuda.current_stream()):
                    static_out = torch.mm(static_in, static_in)
        for _ in tracer.steps(range(10)):
            with tracer.phase("compute"):
                graph.replay()
                torch.cuda.synchronize()
        expected = torch.mm(static_in, static_in)
        check(
            "CUDA graph capture with steptrace phases on the capturing stream",
            torch.allclose(static_out, expected),
            "captured, replayed 10 times, result matches",
        )
    except Exception as e:  # a broken capture is the failure this check looks for
        check("CUDA graph capture with steptrace phases on the capturing stream", False, repr(e))


def compile_reduce_overhead() -> None:
    tracer = quiet()
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256)).cuda()
    fast = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(64, 256, device="cuda")
    try:
        for _ in tracer.steps(range(12)):
            with tracer.phase("compute", stream=torch.cuda.current_stream()):
                y = fast(x)
            torch.cuda.synchronize()
        ok = torch.allclose(y, model(x), atol=1e-4)
        check("torch.compile(mode='reduce-overhead') with steptrace on", ok, "12 steps, result matches eager")
    except Exception as e:
        check("torch.compile(mode='reduce-overhead') with steptrace on", False, repr(e))


def thread_cpu_seconds(name_part: str) -> float:
    total = 0.0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
            if name_part not in comm:
                continue
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return total


def collector_load() -> None:
    tracer = quiet()
    xs = [torch.randn(16, device="cuda") for _ in range(100)]
    with tracer.step():  # starts the collector and the backend
        xs[0].add_(1.0)
    collector_before = thread_cpu_seconds("steptrace")
    start = time.perf_counter()
    launched = 0
    while time.perf_counter() - start < 3.0:
        with tracer.step():
            with tracer.phase("compute"):
                for x in xs:
                    x.add_(1.0)
                launched += len(xs)
    torch.cuda.synchronize()
    s = tracer.summary().to_dict()
    wall = time.perf_counter() - start
    collector = thread_cpu_seconds("steptrace") - collector_before
    check(
        "collector under ~100k kernels/s",
        collector / wall <= 0.05,
        f"{launched / wall:,.0f} kernels/s; collector thread CPU {100 * collector / wall:.2f}% of one core (<= 5%); "
        f"kernels per step seen {s['gpu']['kernels_per_step'] if s.get('gpu') else None} (launched {len(xs)})",
    )


def summary_while_gpu_runs() -> None:
    """A loop that never waits for its GPU ends with the device still running its last steps: the
    summary asked right then must still hold their records (on an H200 the demo's pinned-copy loop
    read "busy 0.0%": CUPTI hands a buffer back only when all its records are done, and the summary
    did not wait for them)."""
    tracer = quiet()
    a = torch.randn(2048, 2048, device="cuda")
    with tracer.step():  # starts the backend
        a.add_(0.0)
    torch.cuda.synchronize()
    for _ in tracer.steps(range(40)):
        with tracer.phase("compute"):
            a = torch.mm(a, a).tanh_()  # ~0.3 ms of GPU a step, a few us of host: the host runs ahead
    asked = time.perf_counter()
    s = tracer.summary().to_dict()
    waited = time.perf_counter() - asked
    running = torch.cuda.current_stream().query()
    gpu = s.get("gpu") or {}
    busy = gpu.get("busy_share", 0.0)
    check(
        "a summary asked while the GPU still runs the steps holds their records",
        busy >= 0.5 and "gpu.phases_running_at_summary" not in s["facts"],
        f"busy share {busy:.3f} (>= 0.5), kernels per step {gpu.get('kernels_per_step')}, the summary took "
        f"{1000 * waited:.1f} ms, the stream idle after it: {running}",
    )


def allocator_memory() -> None:
    """The allocator's figures in the summary match torch's own, and its peaks are not reset."""
    tracer = quiet()
    x = torch.randn(1024, 1024, device="cuda")
    for _ in tracer.steps(range(8)):
        with tracer.phase("compute"):
            y = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # 256 MiB, freed at the step's end
            y.fill_(1)
            x = torch.mm(x, x).tanh_()
        del y
    torch.cuda.synchronize()
    peak_before = torch.cuda.max_memory_allocated()
    facts = tracer.summary().to_dict()["facts"]
    peak_after = torch.cuda.max_memory_allocated()
    now = torch.cuda.memory_allocated() / 1e6
    shown = float(facts.get("gpu.allocator.allocated_mb", "-1"))
    check(
        "allocator figures at the summary, peaks not reset",
        abs(shown - now) <= 0.1
        and peak_after == peak_before
        and float(facts.get("gpu.allocator.peak_allocated_mb", "-1")) >= 256 * 1.048576,
        f"allocated {shown} MB shown, {now:.1f} MB by torch; peak {facts.get('gpu.allocator.peak_allocated_mb')} MB; "
        f"max_memory_allocated before/after the summary {peak_before}/{peak_after}",
    )


def live_windows_of_kernels(tracer: steptrace.Tracer, seconds: float) -> list:
    """The live windows a listener gets from `seconds` of GEMM steps."""
    got = []
    tracer.on_window(got.append)
    x = torch.randn(2048, 2048, device="cuda")
    end = time.time() + seconds
    while time.time() < end:
        steps_of_kernels(tracer, 10, x)
    time.sleep(0.3)
    return got


def live_window_device_view() -> None:
    """A listener's live windows carry the device view: their GPU busy share is the whole run's
    for a loop that does the same work every step."""
    tracer = steptrace.Tracer(warmup_steps=0, print_at_exit="never", live=1)
    got = live_windows_of_kernels(tracer, 4.5)
    whole = tracer.summary().to_dict()["gpu"]["busy_share"]
    shares = [w["gpu_busy_share"] for w in got if "gpu_busy_share" in w]
    check(
        "live windows carry the GPU busy share",
        len(shares) >= 2 and all(abs(s - whole) <= 0.05 for s in shares),
        f"{len(got)} windows, busy shares {[round(s, 3) for s in shares]}, whole run {whole:.3f}",
    )


def node_health_on_gpu() -> None:
    """A rank's live windows carry its GPU's NVML readings, each in the device's range (an H100's
    or H200's: SM clock 200-2100 MHz, memory clock 1000-3500 MHz, power 30-800 W, 15-100 C), and
    the collective kernels it ran are not required (a lone process told it is rank 0 of 2)."""
    tracer = steptrace.Tracer(warmup_steps=0, print_at_exit="never", live=1)
    tracer._core.set_rank(0, 2, 0, "gpu-check", "")
    got = live_windows_of_kernels(tracer, 3.5)
    read = [w for w in got if "node_sm_clock_mhz" in w]
    ranges = {
        "node_sm_clock_mhz": (200, 2100),
        "node_mem_clock_mhz": (1000, 3500),
        "node_power_w": (30, 800),
        "node_temperature_c": (15, 100),
    }
    ok = bool(read) and all(lo <= w.get(k, -1) <= hi for w in read for k, (lo, hi) in ranges.items())
    last = read[-1] if read else {}
    check(
        "NVML readings in live rank windows",
        ok,
        f"{len(read)} of {len(got)} windows read; last: "
        + ", ".join(
            f"{k[5:]} {last.get(k)}" for k in list(ranges) + ["node_throttle", "node_ecc_errors", "node_xid_errors"]
        ),
    )


def trace_read_back() -> None:
    """The same loop, live (CUPTI) and under torch.profiler (read back from its trace): the
    device figures agree, and the trace's phases are steptrace's own annotations. The loop is
    GPU-bound, so the profiler's own host cost (which a separate run pays and a live run does not)
    cannot move its figures; the first GPU run used 1024x1024 products, a host-bound loop, and the
    profiled run's busy share fell from 0.63 to 0.46. The device's busy time a step is compared, not
    its share of the step: the profiled run's steps are its own, and on an H200 (11-28, run 8) its
    step boundaries were long enough to move the share from 0.972 to 0.915. Then the same steps, traced live inside the
    profiler session, against the trace's reading of them: host figures within 2%."""
    import tempfile

    x = torch.randn(4096, 4096, device="cuda")
    host = torch.randn(256, 4096)  # 4 MiB from pageable memory each step

    def loop(tracer: steptrace.Tracer, n: int, prof=None) -> None:
        nonlocal x
        for _ in tracer.steps(range(n)):
            with tracer.phase("h2d"):
                y = host.to("cuda")
            with tracer.phase("compute"):
                for _ in range(8):
                    x = torch.mm(x, x).tanh_()
            with tracer.phase("wait"):
                (x.sum() + y.sum()).item()
            if prof is not None:
                prof.step()

    live = steptrace.Tracer(warmup_steps=2, print_at_exit="never")
    loop(live, 12)
    live_s = live.summary().to_dict()
    path = os.path.join(tempfile.mkdtemp(), "trace.json.gz")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        loop(quiet(), 12, prof)
    prof.export_chrome_trace(path)
    read = steptrace.load(path).to_dict()
    lg, rg = live_s.get("gpu") or {}, read.get("gpu") or {}
    ok = (
        bool(lg)
        and bool(rg)
        and "own annotations" in read["backend"]["reason"]
        and abs(rg["busy_ms"]["mean"] - lg["busy_ms"]["mean"]) <= 0.03 * lg["busy_ms"]["mean"]
        and lg["kernels_per_step"] == rg["kernels_per_step"]
        and lg["h2d"]["bytes_per_step"] == rg["h2d"]["bytes_per_step"]
        and live_s["diagnosis"]["label"] == read["diagnosis"]["label"]
    )
    lgain, rgain = live_s["diagnosis"].get("gains") or {}, read["diagnosis"].get("gains") or {}
    check(
        "the gains of a live run and of its trace agree",
        set(lgain) == set(rgain) and all(abs(lgain[c] - rgain[c]) < 0.05 for c in lgain),
        f"live {lgain} trace {rgain}; advice: {live_s['diagnosis']['advice'][:1]}",
    )
    same = steptrace.Tracer(warmup_steps=0, print_at_exit="never")
    path = os.path.join(tempfile.mkdtemp(), "same-steps.json.gz")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        loop(same, 12, prof)
    prof.export_chrome_trace(path)
    live_same, read_same = same.summary().to_dict(), steptrace.load(path).to_dict()
    pairs = [("step", live_same["step_ms"]["mean"], read_same["step_ms"]["mean"])]
    for name in ("h2d", "compute", "wait"):
        pairs.append((name, live_same["phases"][name]["mean_ms"], read_same["phases"].get(name, {}).get("mean_ms", 0)))
    # A phase's range in the trace encloses steptrace's phase (steptrace._profiler.annotate), and the phase
    # encloses the ops run inside it. So each phase's live figure lies between the mean span of its
    # ops in the trace and the mean length of its range (within 2%): bounds the trace itself gives,
    # that the profiler's own cost of opening and closing a range (tens of microseconds, outside
    # steptrace's phase) cannot move. The step (its range opened inside it) within 2%.
    spans = op_spans(path, ("h2d", "compute", "wait"))
    within = abs(pairs[0][2] - pairs[0][1]) <= 0.02 * pairs[0][1] and all(
        0.98 * spans[n][0] <= a <= 1.02 * spans[n][1] for n, a, _ in pairs[1:]
    )
    if os.environ.get("OUT"):  # the trace and both readings come back with the run, to be read again here
        import json
        import shutil

        shutil.copy(path, os.path.join(os.environ["OUT"], "same-steps.json.gz"))
        with open(os.path.join(os.environ["OUT"], "same-steps-readings.json"), "w") as f:
            json.dump({"live": live_same, "read": read_same}, f)
    check(
        "the same steps live and read back from their trace: step within 2%, each phase between its ops' "
        "span and its range",
        within and live_same["steps"] == read_same["steps"],
        f"steps {live_same['steps']} vs {read_same['steps']}; "
        + ", ".join(f"{n} {a:.3f} vs {b:.3f} ms ({100 * (b / a - 1) if a else 0:+.2f}%)" for n, a, b in pairs)
        + "; ops' span <= live <= range: "
        + ", ".join(f"{n} {spans[n][0]:.3f} <= {a:.3f} <= {spans[n][1]:.3f}" for n, a, _ in pairs[1:]),
    )
    one = os.path.join(tempfile.mkdtemp(), "one-step.json.gz")  # schedule(active=1): one step traced
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=1),
    ) as prof:
        loop(quiet(), 4, prof)
    prof.export_chrome_trace(one)
    single = steptrace.load(one).to_dict()
    check(
        "a one-step profile counts its step",
        single["steps"] == 1 and single["warmup_steps"] == 0 and bool(single.get("gpu")),
        f"steps {single['steps']}, warm-up {single['warmup_steps']}, label "
        f"{single['diagnosis']['label']}, gains {single['diagnosis'].get('gains')}; {single['backend']['reason']}",
    )
    check(
        "a profiler trace read back agrees with the live figures",
        ok,
        f"device busy a step live {(lg.get('busy_ms') or {}).get('mean', 0):.3f} ms, trace "
        f"{(rg.get('busy_ms') or {}).get('mean', 0):.3f} ms (within 3%); busy share live {lg.get('busy_share', 0):.3f} of "
        f"{live_s['step_ms']['mean']:.3f} ms steps, trace {rg.get('busy_share', 0):.3f} of {read['step_ms']['mean']:.3f} ms "
        f"(the profiled run's own steps); kernels/step "
        f"{lg.get('kernels_per_step')} vs {rg.get('kernels_per_step')}; h2d bytes/step "
        f"{(lg.get('h2d') or {}).get('bytes_per_step')} vs {(rg.get('h2d') or {}).get('bytes_per_step')}; "
        f"label {live_s['diagnosis']['label']} vs {read['diagnosis']['label']}; {read['backend']['reason']}",
    )


def live_kernel_table() -> None:
    """Known work per step: 4 GEMMs launched in `forward`, 32 tiny adds in `optimizer`, with no
    sync, so the GPU runs steps behind the host. The live kernel table names them, counts their
    calls and gives each its launching phase. (What the launch records cost is measured apart,
    one process per mode: benchmarks/bench_gpu_overhead.py. Timed here, in one process, the "off"
    side still paid for CUPTI, which stays on once a tracer started it.)"""

    a = torch.randn(2048, 2048, device="cuda")
    ps = [torch.randn(1024, device="cuda") for _ in range(32)]
    tracer = quiet()
    for _ in tracer.steps(range(30)):
        with tracer.phase("forward"):
            for _ in range(4):
                b = torch.mm(a, a)
        with tracer.phase("optimizer"):
            for p in ps:
                p.add_(b[0, :1024])
    torch.cuda.synchronize()
    whole = tracer.summary().to_dict()
    k = (whole.get("gpu") or {}).get("kernels") or {}
    facts = whole.get("facts") or {}
    rows = k.get("kernels", [])
    ops = {o["name"]: o for o in k.get("ops", [])}
    top = rows[0] if rows else {}
    ok = (
        top.get("kind") == "gemm"
        and abs(top.get("calls_per_step", 0) - 4) < 0.01
        and abs(ops.get("forward", {}).get("kernels_per_step", 0) - 4) < 0.01
        and ops.get("optimizer", {}).get("short_kernels_per_step", 0) >= 31
    )
    check(
        "live kernel table: names, calls and launching phase",
        ok,
        f"top {top.get('name', '')[:60]!r} {top.get('kind')} {top.get('calls_per_step')} calls/step; ops "
        f"{ {n: (round(o['kernels_per_step'], 2), round(o.get('short_kernels_per_step', 0), 2)) for n, o in ops.items()} }; "
        f"launch-call records {facts.get('cupti.launch_records')}, kernels without one "
        f"{facts.get('cupti.kernels_without_launch')}",
    )


def capture_on_gpu() -> None:
    import tempfile

    a = torch.randn(2048, 2048, device="cuda")
    with tempfile.TemporaryDirectory() as folder:
        tracer = steptrace.Tracer(warmup_steps=0, print_at_exit="never", capture_dir=folder, capture_steps=3)
        for i in tracer.steps(range(20)):
            if i == 5:
                tracer.capture()
            with tracer.phase("compute"):
                for _ in range(4):
                    b = torch.mm(a, a)
                b.sum().item()
        torch.cuda.synchronize()
        d = tracer.summary().to_dict()
        caps = [c for c in d.get("captures") or [] if not c.get("retroactive")]  # the kept steps' apart
        read = steptrace.load(caps[0]["path"]).to_dict() if caps else {}
        rg, g = read.get("gpu") or {}, d.get("gpu") or {}
        ok = (
            len(caps) == 1
            and caps[0]["first_step"] == 6
            and rg.get("kernels_per_step", 0) >= 4
            and g.get("steps_without_records") == 3
        )
        check(
            "a capture on CUDA work is read back with device records",
            ok,
            f"captures {[(c['first_step'], c['label']) for c in caps]}; read back: kernels/step "
            f"{rg.get('kernels_per_step')}, busy {rg.get('busy_share')}; live: steps without records "
            f"{g.get('steps_without_records')} (3 expected)",
        )


def own_capture_on_gpu() -> None:
    """The core's own capture (a program without torch.profiler takes it): the steps' kernels are
    in its Chrome trace, each inside its step's window, and their count is the known 4 a step."""
    import json
    import tempfile

    a = torch.randn(2048, 2048, device="cuda")
    with tempfile.TemporaryDirectory() as folder:
        tracer = steptrace.Tracer(warmup_steps=0, print_at_exit="never", capture_dir=folder, capture_steps=3)
        for i in tracer.steps(range(20)):
            if i == 5:
                tracer._core.capture(3, "gpu check")
            with tracer.phase("compute"):
                for _ in range(4):
                    b = torch.mm(a, a)
                b.sum().item()
        torch.cuda.synchronize()
        caps = []
        for _ in range(400):  # written once the device records of its steps have come (a few seconds)
            caps = [c for c in tracer.summary().to_dict().get("captures") or [] if not c.get("retroactive")]
            if caps:
                break
            time.sleep(0.025)
        events = json.load(open(caps[0]["path"]))["traceEvents"] if caps else []
        steps = [e for e in events if e.get("cat") == "step"]
        gemms = [e for e in events if e.get("cat") == "device" and not e["name"].startswith(("copy", "memset"))]
        inside = all(any(s["ts"] <= k["ts"] <= s["ts"] + s["dur"] for s in steps) for k in gemms)
        ok = len(caps) == 1 and caps[0]["tool"] == "steptrace" and len(steps) == 3 and len(gemms) >= 12 and inside
        check(
            "the core's own capture on CUDA work holds the steps' kernels",
            ok,
            f"captures {[(c['first_step'], c['label'], c['tool']) for c in caps]}; steps {len(steps)}, "
            f"kernels {len(gemms)} (at least 12: 4 GEMMs and a sum a step), all inside a step: {inside}",
        )


def ceiling_on_gpu() -> None:
    ceiling_checks.run(check, quiet)


def captures_on_gpu() -> None:
    capture_checks.run(check)


def device_sample_on_gpu() -> None:
    sample_checks.run(check)


def main() -> int:
    if not torch.cuda.is_available():
        print("check cuda available: FAIL torch.cuda.is_available() is False")
        return 1
    torch.cuda.init()
    for run in (
        profiler_orders,
        graph_capture,
        compile_reduce_overhead,
        collector_load,
        summary_while_gpu_runs,
        allocator_memory,
        live_window_device_view,
        node_health_on_gpu,
        trace_read_back,
        live_kernel_table,
        capture_on_gpu,
        own_capture_on_gpu,
        ceiling_on_gpu,
        captures_on_gpu,
        device_sample_on_gpu,
    ):
        try:
            run()
        except Exception as e:
            check(run.__name__, False, f"raised {e!r}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
