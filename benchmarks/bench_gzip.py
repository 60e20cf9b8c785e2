"""Reading a .json.gz trace end to end against `zcat` inflating the same file, in paired rounds
(benchmarks/paired.py's verdict): each round runs both, in rotated order, each in a fresh process;
steptrace's time is load() inside its process (the interpreter's start left out), zcat's its whole
run into /dev/null. Target (the cost issue's): <= 1.2x zcat by wall time, on a machine with a core
to spare (steptrace inflates on a thread of its own, ahead of the parser). Usage:
python benchmarks/bench_gzip.py [--copies 10] [--rounds 9] [--keep DIR]"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trace_reader import make_trace  # noqa: E402
from paired import _quartiles, verdict  # noqa: E402

LOAD = """
import sys, time
import steptrace
t = time.perf_counter()
s = steptrace.load(sys.argv[1])
print(time.perf_counter() - t, s.steps)
"""


def zcat_s(path: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["zcat", str(path)], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def load_s(path: Path) -> float:
    out = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp())
    path = work / f"resnet50-x{args.copies}.json.gz"
    if not path.exists():
        make_trace(args.copies, path)
    size_mb = path.stat().st_size / 1e6
    runs = {"zcat": [], "steptrace.load": []}
    for r in range(args.rounds):
        for name in ["zcat", "steptrace.load"] if r % 2 == 0 else ["steptrace.load", "zcat"]:
            runs[name].append(zcat_s(path) if name == "zcat" else load_s(path))
    ratios = [a / b for a, b in zip(runs["steptrace.load"], runs["zcat"])]
    low, mid, high = _quartiles(ratios)
    load = open("/proc/loadavg").read().split()[0]
    print(
        f"{args.rounds} paired rounds, rotated; load average {load}; {size_mb:.0f} MB of gzip, cores {os.cpu_count()}"
    )
    for name, times in runs.items():
        print(f"  {name:<16} {statistics.median(times):8.3f} s wall (median)")
    print(
        f"  target: steptrace.load(.json.gz) <= 1.2x zcat by wall: {mid:.2f}x [{low:.2f}-{high:.2f}], "
        f"{verdict(ratios, 1.2)}"
    )
    if not args.keep:
        path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
