"""Python `with steptrace.phase(...)` against a bare `with` block that reads
time.perf_counter_ns() twice, side by side in one run (interleaved repeats, best of each).
Target: steptrace <= 1.3x the bare block."""

import sys
import time
import timeit

import steptrace

perf_counter_ns = time.perf_counter_ns


class BareTimer:
    __slots__ = ("start", "elapsed")

    def __enter__(self):
        self.start = perf_counter_ns()

    def __exit__(self, *exc):
        self.elapsed = perf_counter_ns() - self.start


def bare():
    with BareTimer():
        pass


def traced(phase=steptrace.phase):
    with phase("compute"):
        pass


def main(n: int = 300_000, repeats: int = 7) -> None:
    steptrace.configure(print_at_exit=False, warmup_steps=0)
    best_bare = best_traced = float("inf")
    with steptrace.step():
        for _ in range(repeats):
            best_bare = min(best_bare, timeit.timeit(bare, number=n) / n * 1e9)
            best_traced = min(best_traced, timeit.timeit(traced, number=n) / n * 1e9)
    ratio = best_traced / best_bare
    print(f"python phase, {n} per repeat, best of {repeats}, Python {sys.version.split()[0]}")
    print(f"  {'bare with-block, two perf_counter_ns()':<40} {best_bare:8.1f} ns")
    print(f"  {'with steptrace.phase(...)':<40} {best_traced:8.1f} ns   {ratio:.2f}x the bare block "
          f"(target <= 1.3x): {'met' if ratio <= 1.3 else 'MISSED'}")


if __name__ == "__main__":
    main()
