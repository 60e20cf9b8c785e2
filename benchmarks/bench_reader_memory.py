"""Peak memory reading real torch.profiler traces, as a multiple of each trace's JSON: every trace
in tests/data/profiler_traces (among them HTA's A100 trace, hta_negative_queue_rank0) and any
trace given on the command line. Each is read by ``steptrace.load()`` in a fresh process, as
.json and as it is stored (.json.gz). Two figures for each:
- first read: the process's peak resident memory (VmHWM) above the same process after
  ``import steptrace``. It includes the library's code paged in by the first read (file-backed,
  shared between processes, 0.5-0.8 MB whatever the trace: printed as "code"), which is most of it
  below a few MB of JSON;
- data: the same trace read again in that process after its first read's memory was handed back
  (``malloc_trim``) and the peak reset (``/proc/self/clear_refs``): what reading the trace itself
  holds, code aside. The verdict is on this figure.
Target (issue "Cost that holds anywhere"): at most 0.25x the JSON.

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
import ctypes, sys
def status(key):
    return int([l for l in open('/proc/self/status') if l.startswith(key)][0].split()[1]) * 1024
def page_in_code():
    # every readable page of every file mapped (the libraries' code and constants) brought into
    # this process: the read then adds only what it allocates
    for line in open('/proc/self/maps').read().splitlines():
        span, perms, *rest = line.split()
        if 'r' in perms and len(rest) == 4 and rest[3].startswith('/'):
            lo, hi = (int(x, 16) for x in span.split('-'))
            for page in range(lo, hi, 4096):
                ctypes.string_at(page, 1)
import steptrace
if sys.argv[2] == 'data':
    page_in_code()
    open('/proc/self/clear_refs', 'w').write('5')  # VmHWM back to VmRSS
base = status('VmHWM')
s = steptrace.load(sys.argv[1])
print(status('VmHWM') - base, s.steps)
"""


def read(path: Path) -> tuple:
    """(first read, data) in bytes, each in a fresh process."""

    def run(what: str) -> int:
        args = [sys.executable, "-c", READ, str(path), what]
        return int(subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()[0])

    return run("first"), run("data")


def main() -> int:
    traces = [Path(a) for a in sys.argv[1:]] or sorted(DATA.glob("*.json.gz"))
    work = Path(tempfile.mkdtemp(prefix="steptrace-memory-"))
    print("peak resident memory in MB and as a multiple of the JSON, each read in a fresh process")
    print(f"{'':<38} {'':>7}  {'---- as .json ----':>18}  {'--- as .json.gz ---':>18}")
    print(
        f"{'trace':<38} {'JSON MB':>7}  {'first':>6} {'data':>5} {'ratio':>6}  "
        f"{'first':>6} {'data':>5} {'ratio':>6}  verdict (data)"
    )
    worst_small = worst_large = 0.0
    try:
        for trace in traces:
            plain = work / (trace.name.removesuffix(".gz") if trace.name.endswith(".gz") else trace.name)
            if trace.name.endswith(".gz"):
                with gzip.open(trace, "rb") as src, open(plain, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfile(trace, plain)
            size = plain.stat().st_size
            forms = [read(plain)] + ([read(trace)] if trace.name.endswith(".gz") else [])
            worst = max(data for _, data in forms) / size
            if size < SMALL:
                worst_small = max(worst_small, worst)
            else:
                worst_large = max(worst_large, worst)
            verdict = "met" if worst <= 0.25 else "missed"
            cells = [f"{f / 2**20:>6.1f} {d / 2**20:>5.1f} {d / size:>5.2f}x" for f, d in forms]
            cells += [f"{'-':>6} {'-':>5} {'-':>6}"] * (2 - len(forms))
            print(f"{trace.name[:38]:<38} {size / 1e6:>7.1f}  {cells[0]}  {cells[1]}  {verdict}")
            plain.unlink()
        print(
            f"worst data ratio: {worst_large:.2f}x on traces of {SMALL / 1e6:.0f} MB of JSON and more, "
            f"{worst_small:.2f}x below (target <= 0.25x)"
        )
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
