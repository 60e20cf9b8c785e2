"""What reading the shapes costs the trace reader: steptrace.load() of a real trace that recorded
shapes, against the same trace with its shape keys renamed (read as before the ceiling: the args
skipped unread), side by side in one run, each load in a fresh process; wall time (bench_reader_memory.py has the
memory).

    python benchmarks/bench_ceiling_reader.py [--trace PATH] [--copies 8] [--rounds 5]

The trace is made larger by repeating its events (--copies, each shifted in time) so the reader's
own time dominates a process's start.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "tests" / "data" / "profiler_traces" / "tracelens_mi300_xdit_sd3.5.json.gz"
LOAD = """
import json, sys, time
import steptrace
t = time.perf_counter()
s = steptrace.load(sys.argv[1])
took = time.perf_counter() - t
c = json.loads(s.to_json()).get("ceiling")
print(took, (c or {}).get("gflop_per_step", 0))
"""


def make(trace: Path, copies: int, out: Path, shapes: bool) -> Path:
    with gzip.open(trace, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    span = max(float(e.get("ts", 0)) + float(e.get("dur", 0)) for e in events) - min(
        float(e["ts"]) for e in events if "ts" in e
    )
    grown = []
    for k in range(copies):
        for e in events:
            e2 = dict(e)
            if "ts" in e2:
                e2["ts"] = float(e2["ts"]) + k * (span + 1000)
            if k and "correlation" in e2.get("args", {}):  # each copy's launches its own
                e2["args"] = dict(e2["args"], correlation=e2["args"]["correlation"] + k * 10**8)
            if not shapes and "args" in e2:
                e2["args"] = {
                    ("x " + key if key in ("Input Dims", "Input type", "Concrete Inputs") else key): v
                    for key, v in e2["args"].items()
                }
            grown.append(e2)
    doc["traceEvents"] = grown
    out.write_text(json.dumps(doc))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, default=DEFAULT)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            "shapes read": make(args.trace, args.copies, Path(tmp) / "with.json", True),
            "shapes skipped": make(args.trace, args.copies, Path(tmp) / "without.json", False),
        }
        mb = {k: p.stat().st_size / 1e6 for k, p in files.items()}
        got = {k: [] for k in files}
        for r in range(args.rounds):
            for name in list(files) if r % 2 == 0 else list(files)[::-1]:  # alternated
                out = subprocess.run(
                    [sys.executable, "-c", LOAD, str(files[name])], capture_output=True, text=True, check=True
                ).stdout.split()
                got[name].append((float(out[0]), float(out[1])))
        print(f"{args.trace.name} x{args.copies}: {args.rounds} rounds alternated, each load in a fresh process")
        base = statistics.median(t for t, _ in got["shapes skipped"])
        for name, rows in got.items():
            t = statistics.median(x for x, _ in rows)
            print(
                f"  {name:<16} {mb[name]:8.1f} MB JSON  load {t:7.3f} s (x{t / base:.3f}, {mb[name] / t:.0f} MB/s)  "
                f"GFLOP a step {rows[0][1]:.4g}"
            )
        ratios = [a[0] / b[0] for a, b in zip(got["shapes read"], got["shapes skipped"])]
        print(
            f"  paired ratio of load time, median [min, max]: {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
