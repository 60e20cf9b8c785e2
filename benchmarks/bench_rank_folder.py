"""A folder of many small rank traces read as one job (``steptrace.load(folder)``), and merged
into one timeline of the slow steps (``steptrace trace FOLDER``): peak memory, time and, for the
timeline, the file's size, at 64, 256 and 1,024 ranks, each rank a torch.profiler-shaped trace of 20
steps (ProfilerStep ranges, 12 ops a step, a gloo-style all-reduce range in each; rank N/2 slower).
Each size is read in a fresh process; its peak resident memory is given above the same process
before the read (interpreter, torch-free steptrace import), with the folder's size beside it.
Usage: python benchmarks/bench_rank_folder.py [sizes...]"""

import json
import os
import subprocess
import sys
import tempfile

SIZES = [int(a) for a in sys.argv[1:]] or [64, 256, 1024]
STEPS, OPS = 20, 12

READ = """
import resource, sys, time
import steptrace
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
s = steptrace.load(sys.argv[1]).to_dict()
took = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r = s.get("ranks") or {}
print(took, (peak - base) / 1024, len(r.get("rows", [])), (r.get("straggler") or {}).get("rank"), s["diagnosis"]["label"])
"""

MERGE = """
import resource, sys, time
from steptrace._traces.job import job_trace
from steptrace._traces.load import rank_files
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
text, ranks, median = job_trace(rank_files(sys.argv[1]))
took = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(took, (peak - base) / 1024, len(text) / 2**20, ranks, median)
"""


def trace(rank, world):
    events, t = [], 0.0
    slow = rank == world // 2
    for i in range(STEPS):
        step_begin = t
        for k in range(OPS):
            d = 300.0 if slow else 100.0
            events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{k}", "pid": 1, "tid": 1, "ts": t, "dur": d})
            t += d + 5
        wait = 100.0 if slow else 100.0 + OPS * 200.0  # the others wait for the slow rank
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 1, "ts": t, "dur": wait}
        )
        t += wait + 10
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": step_begin,
                "dur": t - step_begin - 5,
            }
        )
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": world, "backend": "gloo"},
        "traceEvents": events,
    }


print(
    f"{'ranks':>6} {'folder MB':>10} {'read s':>8} {'peak RSS above import, MB':>26} {'rows':>6} straggler label"
    f"  | timeline: {'s':>5} {'peak MB':>8} {'file MB':>8} median"
)
for world in SIZES:
    with tempfile.TemporaryDirectory() as folder:
        for r in range(world):
            with open(os.path.join(folder, f"rank{r}.pt.trace.json"), "w") as f:
                json.dump(trace(r, world), f)
        size = sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder)) / 2**20
        out = subprocess.run([sys.executable, "-c", READ, folder], capture_output=True, text=True, check=True)
        took, peak, rows, straggler, label = out.stdout.split()
        merged = subprocess.run([sys.executable, "-c", MERGE, folder], capture_output=True, text=True, check=True)
        m_took, m_peak, m_size, _, median = merged.stdout.split()
        print(
            f"{world:>6} {size:>10.1f} {float(took):>8.2f} {float(peak):>26.1f} {rows:>6} {straggler} {label}"
            f"  | {float(m_took):>15.2f} {float(m_peak):>8.1f} {float(m_size):>8.2f} {median}",
            flush=True,
        )
