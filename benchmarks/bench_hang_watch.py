"""The cost of watching for hangs: a process holds one step open (a fetch that never returns) for
SECONDS, with the watch on (hang_after 2 s: it reports once, then keeps looking once a second) and,
side by side in the same run, off. Prints the CPU time of steptrace's own thread (the collector,
named `steptrace`, which does the watching) over that span, as a share of one core, and the hang
reports written. The recording thread's hot path is the same code either way (the watch reads
the step builder the collector fills anyway). Usage: python benchmarks/bench_hang_watch.py [SECONDS]"""

import datetime
import os
import subprocess
import sys
import tempfile

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0

CHILD = r"""
import os, sys, threading, time, steptrace
hang_after, seconds, folder = sys.argv[1], float(sys.argv[2]), sys.argv[3]
steptrace.configure(warmup_steps=0, hang_after=hang_after, capture_dir=folder)

def collector_cpu_s():
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            if f.read().strip() != "steptrace":
                continue
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return float("nan")

def items():
    for i in range(50):
        yield i
    t0, c0 = time.monotonic(), collector_cpu_s()
    time.sleep(seconds)  # the fetch that does not return (for `seconds`)
    print(f"{collector_cpu_s() - c0:.4f} {time.monotonic() - t0:.3f}", flush=True)
    yield 50

for i in steptrace.steps(items()):
    time.sleep(0.002)
"""


def run(hang_after: str, folder: str):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, hang_after, str(SECONDS), folder],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "STEPTRACE_PRINT_AT_EXIT": "never"},
    )
    cpu_s, wall_s = (float(x) for x in out.stdout.split())
    reports = [n for n in os.listdir(folder) if "-hang-" in n] if os.path.isdir(folder) else []
    return cpu_s, wall_s, len(reports)


def main():
    print(f"# bench_hang_watch {datetime.date.today()} ({os.cpu_count()} cores), a step held open {SECONDS:.0f} s")
    with tempfile.TemporaryDirectory() as tmp:
        for hang_after in ("2", "off", "2", "off"):
            folder = os.path.join(tmp, f"{hang_after}-{len(os.listdir(tmp))}")
            cpu_s, wall_s, reports = run(hang_after, folder)
            print(
                f"hang_after={hang_after:>3}: steptrace thread {cpu_s * 1e3:7.1f} ms CPU in {wall_s:5.1f} s "
                f"= {100 * cpu_s / wall_s:.3f}% of a core; hang reports {reports}"
            )


if __name__ == "__main__":
    main()
