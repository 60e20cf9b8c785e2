"""An independent reading of a torch.profiler trace, written apart from steptrace (plain json and
interval unions, no steptrace code), to hold steptrace's figures to: per step window, the GPU's
busy share, and the host's time in blocking syncs and in DataLoader fetches, with the GPU idle
time inside each.

Windows: each ProfilerStep#N range of the thread with most of them; with none, a training loop's
iterations when the thread with the most DataLoader fetches has at least 3 (closing fetch, after
which the thread starts no op, dropped): each from one fetch's start to the next's, the last to
the last host or device event, the first left out when it lasted at least twice the others'
upper median; else one window from the first host event of the thread with the most ops (or
from the end of the last range that thread names warm-up, when it runs an op after it) to the
last host or device event."""

import collections
import gzip
import json
import re
from typing import Dict, List, Tuple

Span = Tuple[float, float]
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")
HOST = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "Operator", "Runtime")


def union(spans: List[Span]) -> List[Span]:
    out: List[List[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def length(spans: List[Span]) -> float:
    return sum(b - a for a, b in spans)


def clip(spans: List[Span], a: float, b: float) -> List[Span]:
    return [(max(x, a), min(y, b)) for x, y in spans if min(y, b) > max(x, a)]


def minus(spans: List[Span], cut: List[Span]) -> List[Span]:
    """`spans` less the union `cut` (sorted, disjoint)."""
    out = []
    for a, b in spans:
        at = a
        for x, y in cut:
            if y <= at or x >= b:
                continue
            if x > at:
                out.append((at, x))
            at = max(at, y)
        if at < b:
            out.append((at, b))
    return out


def both(spans: List[Span], cut: List[Span]) -> List[Span]:
    return minus(spans, minus(spans, cut))


OPS = ("cpu_op", "user_annotation", "Operator")
WARMUP = re.compile(r"(?<![A-Za-z])warm[ _-]?up(?![A-Za-z])", re.I)  # a range the program names warm-up


def span(e) -> Span:
    return (float(e["ts"]), float(e["ts"]) + float(e["dur"]))


def events_of(path) -> list:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and "dur" in e]


def loop_iterations(events):
    """(main, windows) of a training loop marked by its fetches, as the module's docstring says; None
    when it has fewer than 3."""
    fetch = [
        e for e in events if str(e["name"]).startswith("enumerate(DataLoader)#") and str(e["name"]).endswith("__next__")
    ]
    if not fetch:
        return None
    main = collections.Counter((e["pid"], e["tid"]) for e in fetch).most_common(1)[0][0]
    starts = sorted(span(e) for e in fetch if (e["pid"], e["tid"]) == main)
    last = max(span(e)[1] for e in events if e.get("cat") in DEVICE or (e["pid"] == main[0] and e.get("cat") in HOST))
    ops = [
        float(e["ts"])
        for e in events
        if (e["pid"], e["tid"]) == main and e.get("cat") in ("cpu_op", "user_annotation", "Operator")
    ]
    if not any(t >= starts[-1][1] for t in ops):
        last = starts.pop()[0]
    if len(starts) < 3:
        return None
    windows = [(a[0], b[0]) for a, b in zip(starts, starts[1:])] + [(starts[-1][0], last)]
    others = sorted(b - a for a, b in windows[1:])
    if windows[0][1] - windows[0][0] >= 2 * others[len(others) // 2]:
        windows = windows[1:]
    return main, windows


def main_and_windows(events, skip_first: bool = False):
    """The main (pid, tid) and the step windows, as the module's docstring says."""
    steps = [
        e
        for e in events
        if str(e["name"]).startswith("ProfilerStep#") and e.get("cat") in ("cpu_op", "user_annotation", "Operator")
    ]
    if steps:
        main = collections.Counter((e["pid"], e["tid"]) for e in steps).most_common(1)[0][0]
        windows = sorted(span(e) for e in steps if (e["pid"], e["tid"]) == main)[1 if skip_first else 0 :]
    elif (loop := loop_iterations(events)) is not None:
        main, windows = loop
    else:
        main = collections.Counter((e["pid"], e["tid"]) for e in events if e.get("cat") == "cpu_op").most_common(1)[0][
            0
        ]
        first = min(float(e["ts"]) for e in events if (e["pid"], e["tid"]) == main and e.get("cat") in HOST)
        last = max(
            span(e)[1] for e in events if e.get("cat") in DEVICE or (e["pid"] == main[0] and e.get("cat") in HOST)
        )
        warm = [
            span(e)[1]
            for e in events
            if (e["pid"], e["tid"]) == main and e.get("cat") in OPS and WARMUP.search(str(e["name"]))
        ]
        ops = [float(e["ts"]) for e in events if (e["pid"], e["tid"]) == main and e.get("cat") in OPS]
        if warm and any(t >= max(warm) for t in ops):  # the program's own warm-up: start-up, left out
            first = max(warm)
        windows = [(first, last)]
    return main, windows


def read(path, skip_first: bool = False) -> Dict[str, float]:
    """Shares of the summed window time: busy, sync (host), idle_in_sync, dataloader (host),
    idle_in_dataloader; and `windows` (count), `window_ms` (their mean). `skip_first`: leave the
    first step out (a reader's judgement that its device ran work from before the trace)."""
    events = events_of(path)
    gpu = collections.Counter(e["pid"] for e in events if e.get("cat") in ("kernel", "Kernel")).most_common(1)[0][0]
    busy = union([span(e) for e in events if e["pid"] == gpu and e.get("cat") in DEVICE])
    main, windows = main_and_windows(events, skip_first)
    syncs = union(
        [
            span(e)
            for e in events
            if e["pid"] == main[0]
            and e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")
            and str(e["name"]).endswith("Synchronize")
        ]
    )
    fetches = union(
        [span(e) for e in events if (e["pid"], e["tid"]) == main and str(e["name"]).startswith("enumerate(DataLoader)")]
    )
    total = {"time": 0.0, "busy": 0.0, "sync": 0.0, "idle_in_sync": 0.0, "dataloader": 0.0, "idle_in_dataloader": 0.0}
    for a, b in windows:
        idle = minus([(a, b)], clip(busy, a, b))
        total["time"] += b - a
        total["busy"] += length(clip(busy, a, b))
        total["sync"] += length(clip(syncs, a, b))
        total["idle_in_sync"] += length(both(idle, clip(syncs, a, b)))
        total["dataloader"] += length(clip(fetches, a, b))
        total["idle_in_dataloader"] += length(both(idle, clip(fetches, a, b)))
    out = {k: v / total["time"] for k, v in total.items() if k != "time"}
    out["windows"] = len(windows)
    out["window_ms"] = total["time"] / len(windows) / 1000
    return out


def read_causes(path, skip_first: bool = False) -> Dict[str, float]:
    """What the diagnosis's causes weigh, read the plain way, as shares of the summed window time:
    `outside_ops` (the main thread in no host event of its process, on any of its threads, and the
    GPU idle meanwhile), `longest_outside_ms` (the longest such stretch of the host, GPU idle or not),
    `exposed_comm` (NCCL/RCCL kernels' time with no other kernel running), `gloo` (the host inside
    gloo collectives), `idle` (the GPU idle); and per window `kernels`, `kernel_median_us` (by
    count). Without device events the GPU figures are 0."""
    events = events_of(path)
    main, windows = main_and_windows(events, skip_first)
    kernels_pid = collections.Counter(e["pid"] for e in events if e.get("cat") in ("kernel", "Kernel")).most_common(1)
    gpu = kernels_pid[0][0] if kernels_pid else None
    device = [e for e in events if e["pid"] == gpu and e.get("cat") in DEVICE]
    busy = union([span(e) for e in device])
    is_comm = lambda e: str(e["name"]).lower().startswith(("nccl", "rccl"))
    comm = union([span(e) for e in device if e.get("cat") in ("kernel", "Kernel") and is_comm(e)])
    other_kernels = union([span(e) for e in device if e.get("cat") in ("kernel", "Kernel") and not is_comm(e)])
    host = union(
        [
            span(e)
            for e in events
            if e["pid"] == main[0]
            and isinstance(e["tid"], int)
            and e["tid"] >= 0
            and e.get("cat") in HOST
            and not str(e["name"]).startswith("ProfilerStep#")
        ]
    )
    gloo = union([span(e) for e in events if e["pid"] == main[0] and str(e["name"]).startswith("gloo:")])
    total = collections.Counter()
    longest = 0.0
    durations: List[float] = []
    for a, b in windows:
        idle = minus([(a, b)], clip(busy, a, b))
        outside = minus([(a, b)], clip(host, a, b))
        longest = max([longest] + [y - x for x, y in outside])
        total["time"] += b - a
        total["idle"] += length(idle)
        total["outside_ops"] += length(both(idle, outside))
        total["exposed_comm"] += length(minus(clip(comm, a, b), other_kernels))
        total["gloo"] += length(clip(gloo, a, b))
        durations += [
            float(e["dur"]) for e in device if e.get("cat") in ("kernel", "Kernel") and a <= float(e["ts"]) < b
        ]
    out = {k: v / total["time"] for k, v in total.items() if k != "time"}
    out["longest_outside_ms"] = longest / 1000
    out["kernels"] = len(durations) / len(windows)
    out["kernel_median_us"] = sorted(durations)[len(durations) // 2] if durations else 0.0
    out["window_ms"] = total["time"] / len(windows) / 1000
    return out


def exposed_comm_by_op(path, skip_first: bool = False) -> Dict[str, float]:
    """Each NCCL/RCCL kernel's time in the windows that no other kernel overlaps, as shares of the
    summed window time, by the innermost host op (`cpu_op` / `user_annotation`, never a
    ProfilerStep range) open around its launching runtime call (the call with its
    `args.correlation`) on that call's thread; "(none)" without one."""
    events = events_of(path)
    main, windows = main_and_windows(events, skip_first)
    gpu = collections.Counter(e["pid"] for e in events if e.get("cat") in ("kernel", "Kernel")).most_common(1)[0][0]
    kernels = [e for e in events if e["pid"] == gpu and e.get("cat") in ("kernel", "Kernel")]
    is_comm = lambda e: str(e["name"]).lower().startswith(("nccl", "rccl"))
    other = union([span(e) for e in kernels if not is_comm(e)])
    calls = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "Runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    ops = collections.defaultdict(list)
    for e in events:
        if e.get("cat") in ("cpu_op", "Operator", "user_annotation") and not str(e["name"]).startswith("ProfilerStep#"):
            ops[(e["pid"], e["tid"])].append(e)
    out = collections.Counter()
    for k in filter(is_comm, kernels):
        call = calls.get(k.get("args", {}).get("correlation"))
        around = (
            []
            if call is None
            else [o for o in ops[(call["pid"], call["tid"])] if span(o)[0] <= span(call)[0] <= span(o)[1]]
        )
        name = min(around, key=lambda o: span(o)[1] - span(o)[0])["name"] if around else "(none)"
        for a, b in windows:
            out[name] += length(minus(clip([span(k)], a, b), other))
    time = sum(b - a for a, b in windows)
    return {name: t / time for name, t in out.items()}


ONE_TIME_MIN_US = 1000.0


def one_time_calls(path, spans: bool = False) -> list:
    """Runtime calls of the main process's threads in the first window that are neither syncs nor copies, block
    the host 1 ms or more while the device's kernels, copies and memsets cover under half of the
    call, and whose name blocks like that in no later window: (name, ms, device busy ms during
    it), longest first."""
    events = events_of(path)
    main, windows = main_and_windows(events)
    kernels_pid = collections.Counter(e["pid"] for e in events if e.get("cat") in ("kernel", "Kernel")).most_common(1)
    busy = union([span(e) for e in events if kernels_pid and e["pid"] == kernels_pid[0][0] and e.get("cat") in DEVICE])

    def blocks(e) -> bool:
        name = str(e["name"])
        if e["pid"] != main[0] or e.get("cat") not in ("cuda_runtime", "Runtime", "cuda_driver"):
            return False
        if isinstance(e["tid"], int) and e["tid"] < 0:
            return False
        if float(e["dur"]) < ONE_TIME_MIN_US or name.endswith("Synchronize") or "Memcpy" in name or "Memset" in name:
            return False
        a, b = span(e)
        return 2 * length(clip(busy, a, b)) < b - a

    first = windows[0]
    later = {(e["tid"], str(e["name"])) for e in events if blocks(e) and first[1] <= float(e["ts"]) < windows[-1][1]}
    found = [
        (str(e["name"]), float(e["dur"]) / 1000, length(clip(busy, *span(e))) / 1000) + ((span(e),) if spans else ())
        for e in events
        if blocks(e) and first[0] <= float(e["ts"]) < first[1] and (e["tid"], str(e["name"])) not in later
    ]
    return sorted(found, key=lambda x: -x[1])


WAITING_OPS = ("aten::to", "aten::_to_copy", "aten::copy_", "aten::item", "aten::_local_scalar_dense")
JIT_NAMES = re.compile(
    r"^(fallback_function|<forward op>|Torch-Compiled Region|CompiledFunction|TorchDynamo)|CompiledFxGraph"
)


def first_calls(path) -> List[Tuple[str, float]]:
    """First calls far longer than the later ones of their name, read the plain way: ops and
    ranges of the main thread in the windows (not copies, `.item()` or DataLoader fetches), a
    name called 3 times or more, the first at least 10x the median of the others and 1 ms over
    it, with the GPU's kernels, copies and memsets covering under half of it (without a GPU: only
    in a trace holding a JIT's or torch.compile's ranges), and sync or copy calls under half of
    it; the outermost of those nested. (name, ms, GPU busy ms during it, span), in time order."""
    events = events_of(path)
    main, windows = main_and_windows(events)
    kernels_pid = collections.Counter(e["pid"] for e in events if e.get("cat") in ("kernel", "Kernel")).most_common(1)
    if not kernels_pid and not any(JIT_NAMES.search(str(e["name"])) for e in events):
        return []
    busy = union([span(e) for e in events if kernels_pid and e["pid"] == kernels_pid[0][0] and e.get("cat") in DEVICE])
    waits = union(
        [
            span(e)
            for e in events
            if (e["pid"], e["tid"]) == main
            and e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")
            and (str(e["name"]).endswith("Synchronize") or "Memcpy" in str(e["name"]) or "Memset" in str(e["name"]))
        ]
    )
    inside = lambda e: any(a <= float(e["ts"]) < b for a, b in windows)
    calls = collections.defaultdict(list)
    for e in sorted(events, key=lambda e: (float(e["ts"]), -float(e["dur"]))):
        name = str(e["name"])
        if (e["pid"], e["tid"]) != main or e.get("cat") not in OPS or not inside(e) or name.startswith("ProfilerStep#"):
            continue
        if name in WAITING_OPS or name.startswith("enumerate(DataLoader)#"):
            continue
        calls[name].append(e)
    found = []
    for name, es in calls.items():
        if len(es) < 3:
            continue
        rest = sorted(float(e["dur"]) for e in es[1:])
        median = rest[len(rest) // 2]
        e = es[0]
        dur = float(e["dur"])
        a, b = span(e)
        if dur < 10 * median or dur < median + 1000:
            continue
        if 2 * length(clip(busy, a, b)) >= dur or 2 * length(clip(waits, a, b)) >= dur:
            continue
        found.append(e)
    found.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
    outer = []
    for e in found:
        if not any(span(o)[0] <= float(e["ts"]) < span(o)[1] for o in outer):
            outer.append(e)
    return [(str(e["name"]), float(e["dur"]) / 1000, length(clip(busy, *span(e))) / 1000, span(e)) for e in outer]


def set_aside_truth(path) -> Tuple[float, float]:
    """What one-time work takes out of the first window, read the plain way: the union of the
    one-time runtime calls and the far longer first calls, in ms, and the GPU's busy ms in it."""
    events = events_of(path)
    kernels_pid = collections.Counter(e["pid"] for e in events if e.get("cat") in ("kernel", "Kernel")).most_common(1)
    busy = union([span(e) for e in events if kernels_pid and e["pid"] == kernels_pid[0][0] and e.get("cat") in DEVICE])
    spans = union([c[3] for c in one_time_calls(path, spans=True)] + [c[3] for c in first_calls(path)])
    return length(spans) / 1000, sum(length(clip(busy, a, b)) for a, b in spans) / 1000
