"""Live rank windows at 8, 64, 256 and 1,024 ranks against one real TCPStore, on one machine: each
rank is a client connection of its own that writes its window's row (a real one, from
``_core.live_row``; one rank slowed) as the ranks do; rank 0 then runs the production code
(``_live_ranks.LiveRanks``) on the slot before. Prints, per world size, rank 0's time a window
(median and max over the windows), the memory it allocated meanwhile (tracemalloc peak) and its
process's resident growth, and each rank's time to write its row (median), for rows that carry
8 named phases (each a layer inside `compute`: the most a row carries), the same with the last 8
all-reduce waits and the node's readings (`full`, a DDP job on GPUs) and, side by side, the same
rows without any (the row of the version before named phases). Usage:
python benchmarks/bench_live_ranks.py [windows] [sizes...]"""

import datetime
import resource
import statistics
import sys
import time
import tracemalloc

import torch.distributed as dist

import steptrace
from steptrace import _core
from steptrace._live import rank_verdicts as _live_ranks

WINDOWS = int(sys.argv[1]) if len(sys.argv) > 1 else 12
SIZES = [int(a) for a in sys.argv[2:]] or [8, 64, 256, 1024]
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def window_summary(rank, world, slow):
    """A real window of a real tracer: 50 steps of `compute` (8 layers named inside it) and the
    all-reduce's `wait`, in which a fast rank waits for the slow one's longer compute."""
    t = steptrace.Tracer(warmup_steps=0, print_at_exit="never")
    t._core.set_rank(rank, world, rank % 8, f"node{rank // 8}", "")
    for _ in t.steps(range(50)):
        with t.phase("compute"):
            for layer in range(8):
                with t.phase(f"transformer.layers.{layer}.attention"):
                    sum(range(10000 // 8 + (60000 if slow and layer == 3 else 0)))
        with t.phase("wait"):
            sum(range(100 if slow else 60000))
    return t._core.summary()


class Job:
    def __init__(self, rank, world_size, store):
        self.rank, self.world_size, self.store = rank, world_size, store


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def run(world, fast_row, slow_row, rank0_summary):
    server = dist.TCPStore("127.0.0.1", 0, world, True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False)
    clients = [
        dist.TCPStore("127.0.0.1", server.port, world, False, timeout=datetime.timedelta(seconds=60))
        for _ in range(1, world)
    ]
    core = _core.Tracer()
    core.configure({"print_at_exit": "never"})
    core.set_rank(0, world, 0, "node0", "")
    job = Job(0, world, server)
    live = _live_ranks.LiveRanks()
    slot0 = 1_000_000
    rank0_ms, setup_ms, write_us, peaks = [], [], [], []
    before = rss_mb()
    for w in range(WINDOWS + 1):
        slot = slot0 + w
        for r, store in enumerate(clients, start=1):  # every other rank writes its row of this slot
            row = (slow_row if r == world // 2 else fast_row).replace(" 1 2 ", f" {r} {world} ", 1)
            started = time.perf_counter()
            store.set(_live_ranks.key(r, slot), f"{slot} {row}")
            write_us.append((time.perf_counter() - started) * 1e6)
        figures = {"steps": 50, "at_s": float(w)}
        tracemalloc.start()
        started = time.perf_counter()
        live._window(core, job, rank0_summary, figures, slot)
        took = (time.perf_counter() - started) * 1e3
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
        if w <= 2:  # the first window has no slot before it; the next two make each parity's keys once
            setup_ms.append(took)
        else:
            rank0_ms.append(took)
        if w > 0:
            assert figures["straggler_rank"] == world // 2, figures
    grew = rss_mb() - before
    del clients, server
    return rank0_ms, sum(setup_ms), write_us, max(peaks), grew


def plain(row):
    """The row without its named phases: the version before them."""
    return "r1 " + " ".join(row.split(" ")[1:13])


fast = window_summary(1, 2, False)
slow = window_summary(1, 2, True)
fast_row, slow_row = _core.live_row(fast), _core.live_row(slow)
# Rows as a DDP job on GPUs sends them: also its last 8 all-reduce waits (ms: the fast ranks wait
# for the slow one) and its node's readings (the " n" section live_row writes from NVML and /proc).
NODE = " n 1 1980 2619 690.5 55 0 0 0 0 20.5 0.012"
full_fast = _core.live_row(fast, [9.5, 9.8, 10.1, 9.7, 9.9, 10.4, 9.6, 9.9], 120) + NODE
full_slow = _core.live_row(slow, [0.3, 0.2, 0.4, 0.3, 0.2, 0.3, 0.5, 0.3], 120) + NODE.replace(" 1980 ", " 1410 ")
print(
    f"a row: {len(fast_row)} bytes with 8 named phases, {len(plain(fast_row))} without, {len(full_fast)} with its "
    f"collectives and node too ({len(plain(fast_row)) + len(full_fast) - len(fast_row)} without the phases); "
    f"{WINDOWS} windows a size; "
    f"load average {open('/proc/loadavg').read().split()[0]}"
)
print(
    f"{'ranks':>6} {'rows':>6} {'rank 0 ms/window p50':>21} {'max':>7} {'keys made once, ms':>19} {'alloc peak MB':>14} "
    f"{'RSS +MB':>8} {'rank write us p50':>18}"
)
for world in SIZES:
    r0 = window_summary(0, world, False)
    for kind, rows in (
        ("full", (full_fast, full_slow)),
        ("named", (fast_row, slow_row)),
        ("plain", (plain(fast_row), plain(slow_row))),
    ):
        rank0_ms, setup, write_us, peak, grew = run(world, rows[0], rows[1], r0)
        print(
            f"{world:>6} {kind:>6} {statistics.median(rank0_ms):>21.2f} {max(rank0_ms):>7.2f} {setup:>19.1f} "
            f"{peak:>14.2f} {grew:>8.1f} {statistics.median(write_us):>18.1f}",
            flush=True,
        )
