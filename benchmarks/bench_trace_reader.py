"""Reading torch.profiler traces: steptrace against HTA, side by side in one run.

Traces of any size are made by repeating the steps of a real one (the TensorBoard plugin's
ResNet-50 sample, tests/data/profiler_traces), each copy shifted in time. Each reader runs in a
fresh process on the same file; the figures are printed, never asserted:
- end to end (gunzip included): steptrace.load() against HTA (PyPI holistictraceanalysis)
  loading the same trace and computing its temporal and idle-time breakdowns;
- steptrace's MB/s on uncompressed JSON (parse plus analysis) and its peak memory above the
  interpreter's, as a multiple of the uncompressed size, up to a 1 GB trace;
- a folder of rank traces (--ranks of --rank-mb each, uncompressed): steptrace.load(folder),
  which reads the files in parallel on the available cores, against loading them one after
  another in one process, with the peak memory of each.

    python benchmarks/bench_trace_reader.py [--hta-python PATH] [--gb 1.0] [--ranks 4] [--rank-mb 250] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SAMPLE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "data"
    / "profiler_traces"
    / "resnet50_num_workers_0.pt.trace.json.gz"
)

# Peak memory is the process's own high-water mark (VmHWM): getrusage's maxrss keeps the peak of
# the forked parent across exec on Linux.
PEAK = "int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]) * 1024"
STEPTRACE = f"""
import sys, time
import steptrace
t = time.perf_counter()
s = steptrace.load(sys.argv[1]) if sys.argv[1] != "-" else None
elapsed = time.perf_counter() - t
print(elapsed, {PEAK}, s.steps if s else 0, s.label if s else "")
"""

ONE_AFTER_ANOTHER = f"""
import os, sys, time
import steptrace
files = sorted(os.path.join(sys.argv[1], n) for n in os.listdir(sys.argv[1]))
t = time.perf_counter()
steps = sum(steptrace.load(f).steps for f in files)
print(time.perf_counter() - t, {PEAK}, steps)
"""

FOLDER = f"""
import sys, time
import steptrace
t = time.perf_counter()
s = steptrace.load(sys.argv[1])
print(time.perf_counter() - t, {PEAK}, sum(r["steps"] for r in s.to_dict()["ranks"]["rows"]))
"""

HTA = f"""
import logging, os, shutil, sys, tempfile, time
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
os.symlink(os.path.abspath(sys.argv[1]), os.path.join(d, os.path.basename(sys.argv[1])))
t = time.perf_counter()
a = TraceAnalysis(trace_dir=d)
a.get_temporal_breakdown(visualize=False)
a.get_idle_time_breakdown(visualize=False)
print(time.perf_counter() - t, {PEAK})
"""


def make_trace(copies: int, path: Path) -> int:
    """Writes the sample's events `copies` times, each copy after the last; returns the bytes."""
    doc = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    events = doc.pop("traceEvents")
    timed = [e for e in events if "ts" in e and isinstance(e["ts"], (int, float))]
    begin = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - begin + 1000
    parts = []  # each event's JSON around its ts
    for e in timed:
        text = json.dumps({**e, "ts": "@TS@"})
        before, after = text.split('"@TS@"')
        parts.append((before, e["ts"], after))
    head = json.dumps(doc)[:-1] + ', "traceEvents": [\n'
    opener = gzip.open if path.suffix == ".gz" else open
    written = 0
    with opener(path, "wt") as f:
        f.write(head)
        written += len(head)
        for k in range(copies):
            shift = k * span
            chunk = ",\n".join(f"{b}{ts + shift}{a}" for b, ts, a in parts)
            if k:
                chunk = ",\n" + chunk
            f.write(chunk)
            written += len(chunk)
        f.write("\n]}\n")
        written += 4
    return written


def run(python: str, script: str, path: str) -> list:
    out = subprocess.run([python, "-c", script, path], capture_output=True, text=True, check=True)
    return out.stdout.split()


def best_of(n: int, python: str, script: str, path: str) -> list:
    runs = [run(python, script, path) for _ in range(n)]
    return min(runs, key=lambda r: float(r[0]))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--hta-python", default=os.environ.get("STEPTRACE_HTA_PYTHON"), help="a Python with HTA installed")
    p.add_argument("--gb", type=float, default=1.0, help="size of the largest (uncompressed) trace")
    p.add_argument("--ranks", type=int, default=4, help="rank traces in the folder benchmark")
    p.add_argument("--rank-mb", type=float, default=250, help="size of each rank trace (uncompressed)")
    p.add_argument("--keep", help="make the traces in this folder and keep them")
    args = p.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="steptrace-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    base_rss = int(best_of(1, py, STEPTRACE, "-")[1])
    print(f"reading torch.profiler traces (the ResNet-50 sample's steps repeated), {os.cpu_count()} cores")
    print(f"interpreter with steptrace imported: {base_rss / 2**20:.0f} MB resident, subtracted below")
    print()
    print("end to end on .json.gz, gunzip included (best of 3 for steptrace, 1 for HTA):")
    print(f"{'trace':<28} {'uncompressed':>12} {'steptrace s':>12} {'HTA s':>9} {'HTA / steptrace':>16}")
    for copies in (1, 4):
        gz = work / f"resnet50_x{copies}.json.gz"
        size = make_trace(copies, gz)
        st = best_of(3, py, STEPTRACE, str(gz))
        if args.hta_python:
            hta = run(args.hta_python, HTA, str(gz))
            hta_s = float(hta[0])
            ratio = f"{hta_s / float(st[0]):>15.1f}x"
            hta_text = f"{hta_s:>9.2f}"
        else:
            hta_text, ratio = f"{'-':>9}", f"{'(no HTA)':>16}"
        print(
            f"{gz.name:<28} {size / 1e6:>10.0f} MB {float(st[0]):>12.3f} {hta_text} {ratio}   [{st[2]} steps, {st[3]}]"
        )
    print()
    print("uncompressed JSON, parse plus analysis (best of 3):")
    print(f"{'trace':<28} {'size':>9} {'seconds':>9} {'MB/s':>7} {'peak memory above the interpreter':>36}")
    one_copy = make_trace(1, work / "resnet50_x1.json")
    (work / "resnet50_x1.json").unlink()
    sizes = sorted({4, max(4, -(-int(args.gb * 1e9) // one_copy))})  # the largest at least --gb
    for copies in sizes:
        plain = work / f"resnet50_x{copies}.json"
        size = make_trace(copies, plain)
        st = best_of(3 if copies < 16 else 1, py, STEPTRACE, str(plain))
        seconds, rss = float(st[0]), int(st[1]) - base_rss
        print(
            f"{plain.name:<28} {size / 1e6:>6.0f} MB {seconds:>9.3f} {size / 1e6 / seconds:>7.0f} "
            f"{rss / 2**20:>12.0f} MB = {rss / size:.2f}x the JSON   [{st[2]} steps, {st[3]}]"
        )
        if not args.keep:
            plain.unlink()
    print()
    rank_folder(work, args.ranks, args.rank_mb, one_copy, base_rss, args.keep is None)
    return 0


def rank_folder(work: Path, ranks: int, rank_mb: float, one_copy: int, base_rss: int, remove: bool) -> None:
    """A job's folder of rank traces read at once (in parallel) against one after another."""
    import shutil

    folder = work / "ranks"
    folder.mkdir(exist_ok=True)
    copies = max(1, round(rank_mb * 1e6 / one_copy))
    first = folder / "rank-0.json"
    size = make_trace(copies, first)
    for r in range(1, ranks):
        shutil.copyfile(first, folder / f"rank-{r}.json")
    py = sys.executable
    print(f"a folder of {ranks} rank traces of {size / 1e6:.0f} MB each (uncompressed), best of 3:")
    seq = best_of(3, py, ONE_AFTER_ANOTHER, str(folder))
    par = best_of(3, py, FOLDER, str(folder))
    for name, r in (("one after another", seq), ("load(folder)", par)):
        print(
            f"  {name:<18} {float(r[0]):>7.3f} s   peak memory above the interpreter "
            f"{(int(r[1]) - base_rss) / 2**20:>5.0f} MB   [{r[2]} steps in all]"
        )
    print(f"  load(folder) / one after another: {float(par[0]) / float(seq[0]):.2f}x the time")
    if remove:
        shutil.rmtree(folder)


if __name__ == "__main__":
    sys.exit(main())
