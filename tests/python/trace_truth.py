"""An independent reading of a torch.profiler trace, written apart from steptrace (plain json and
interval unions, no steptrace code), to hold steptrace's figures to: per step window, the GPU's
busy share, and the host's time in blocking syncs and in DataLoader fetches, with the GPU idle
time inside each.

Windows: each ProfilerStep#N range of the thread with most of them; with none, one window from
the first host event of the thread with the most ops to the last host or device event."""

import collections
import gzip
import json
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


def read(path, skip_first: bool = False) -> Dict[str, float]:
    """Shares of the summed window time: busy, sync (host), idle_in_sync, dataloader (host),
    idle_in_dataloader; and `windows` (count), `window_ms` (their mean). `skip_first`: leave the
    first step out (a reader's judgement that its device ran work from before the trace)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    span = lambda e: (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
    gpu = collections.Counter(e["pid"] for e in events if e.get("cat") in ("kernel", "Kernel")).most_common(1)[0][0]
    busy = union([span(e) for e in events if e["pid"] == gpu and e.get("cat") in DEVICE])
    steps = [e for e in events if str(e["name"]).startswith("ProfilerStep#") and e.get("cat") in ("cpu_op", "user_annotation", "Operator")]
    if steps:
        main = collections.Counter((e["pid"], e["tid"]) for e in steps).most_common(1)[0][0]
        windows = sorted(span(e) for e in steps if (e["pid"], e["tid"]) == main)[1 if skip_first else 0:]
    else:
        main = collections.Counter((e["pid"], e["tid"]) for e in events if e.get("cat") == "cpu_op").most_common(1)[0][0]
        first = min(float(e["ts"]) for e in events if (e["pid"], e["tid"]) == main and e.get("cat") in HOST)
        last = max(span(e)[1] for e in events if e.get("cat") in DEVICE or (e["pid"] == main[0] and e.get("cat") in HOST))
        windows = [(first, last)]
    syncs = union([span(e) for e in events if e["pid"] == main[0] and e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")
                   and str(e["name"]).endswith("Synchronize")])
    fetches = union([span(e) for e in events if (e["pid"], e["tid"]) == main and str(e["name"]).startswith("enumerate(DataLoader)")])
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
