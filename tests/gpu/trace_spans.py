"""What a torch.profiler trace says of steptrace's own ranges, read with nothing but json: the
bounds the GPU checks hold a live phase to (tests/gpu/checks.py)."""

from __future__ import annotations

import gzip
import json


def op_spans(path: str, names) -> dict:
    """From a torch.profiler trace: for each steptrace phase name, (mean span of the host ops
    inside its ranges, from the first op's start to the last op's end; mean length of the ranges)
    in ms, over the ranges on the thread that ran them."""
    with gzip.open(path, "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    host = [e for e in events if e.get("cat") in ("cpu_op", "cuda_runtime", "user_annotation")]
    out = {}
    for name in names:
        ranges = [e for e in host if e.get("cat") == "user_annotation" and e.get("name") == "steptrace:" + name]
        span_sum = range_sum = 0.0
        for r in ranges:
            begin, end = r["ts"], r["ts"] + r["dur"]
            inside = [
                e
                for e in host
                if e.get("tid") == r.get("tid")
                and e is not r
                and begin <= e["ts"]
                and e["ts"] + e["dur"] <= end
                and not e.get("name", "").startswith("steptrace:")
            ]
            if inside:
                span_sum += max(e["ts"] + e["dur"] for e in inside) - min(e["ts"] for e in inside)
            range_sum += r["dur"]
        n = max(len(ranges), 1)
        out[name] = (span_sum / n / 1000, range_sum / n / 1000)
    return out
