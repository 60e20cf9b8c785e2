"""Peak memory reading real torch.profiler traces, as a multiple of each trace's JSON: every trace
in tests/data/profiler_traces (among them HTA's A100 trace, hta_negative_queue_rank0) and any
trace given on the command line. Each is read by ``steptrace.load()`` in a fresh process, as
.json and as it is stored (.json.gz); the figure is the process's peak resident memory (VmHWM)
above the same process after ``import steptrace``. Target (issue "Cost that holds anywhere"): at
most 0.25x the JSON. Below a few MB of JSON the fixed cost of reading (the modules load()
imports, the scanner's and the inflater's buffers) is most of it: such traces are printed, and
their verdict says so.

    python benchmarks/bench_reader_memory.py [trace ...]
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "profiler_traces"
SMALL = 16e6  # below this much JSON the fixed cost dominates

READ = """
import sys
def peak():
    return int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]) * 1024
import steptrace
base = peak()
s = steptrace.load(sys.argv[1])
print(peak() - base, s.steps)
"""


def read(path: Path) -> tuple:
    out = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, check=True)
    above, steps = out.stdout.split()
    return int(above), int(steps)


def main() -> int:
    traces = [Path(a) for a in sys.argv[1:]] or sorted(DATA.glob("*.json.gz"))
    work = Path(tempfile.mkdtemp(prefix="steptrace-memory-"))
    print("peak resident memory above `import steptrace`, reading each trace in a fresh process")
    print(f"{'trace':<44} {'JSON MB':>8} {'.json MB':>9} {'ratio':>6} {'.gz MB':>7} {'ratio':>6}  verdict")
    try:
        for trace in traces:
            plain = work / (trace.name.removesuffix(".gz") if trace.name.endswith(".gz") else trace.name)
            if trace.name.endswith(".gz"):
                with gzip.open(trace, "rb") as src, open(plain, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfile(trace, plain)
            size = plain.stat().st_size
            on_json, _ = read(plain)
            on_gz = read(trace)[0] if trace.name.endswith(".gz") else None
            worst = max(on_json, on_gz or 0) / size
            verdict = "met" if worst <= 0.25 else "missed" + (" (small: the fixed cost)" if size < SMALL else "")
            gz = f"{on_gz / 2**20:>7.1f} {on_gz / size:>5.2f}x" if on_gz is not None else f"{'-':>7} {'-':>6}"
            print(f"{trace.name[:44]:<44} {size / 1e6:>8.1f} {on_json / 2**20:>9.1f} {on_json / size:>5.2f}x {gz}  {verdict}")
            plain.unlink()
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
