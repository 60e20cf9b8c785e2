"""The steps() loop before and after a change, side by side in one run: an older _loop.py
against the installed one, interleaved, 9 rounds of 200,000 empty steps each. Usage:
git show REV:python/steptrace/_loop.py > /tmp/old_loop.py;
python benchmarks/bench_steps_loop.py /tmp/old_loop.py REV"""

import importlib.util
import sys
import time
import steptrace
from steptrace._tracer import loop as _loop

spec = importlib.util.spec_from_file_location("steptrace._old_loop", sys.argv[1])
old = importlib.util.module_from_spec(spec)
sys.modules["steptrace._old_loop"] = old
spec.loader.exec_module(old)
t = steptrace.Tracer(print_at_exit=False)
core = t._core
N = 200_000


def run(mod):
    s = time.perf_counter_ns()
    for _ in mod.steps(core, range(N), None):
        pass
    return (time.perf_counter_ns() - s) / N


before = f"before ({sys.argv[2] if len(sys.argv) > 2 else 'old'})"
res = {before: [], "after": []}
for _ in range(9):
    res[before].append(run(old))
    res["after"].append(run(_loop))
for k, v in res.items():
    v.sort()
    print(f"steps() loop, empty body, {k:<18} median {v[4]:.0f} ns a step (min {v[0]:.0f})")
