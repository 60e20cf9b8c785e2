"""Window listeners beside a loop, side by side in one run: the same loop of ~1 ms steps (a
Python spin holding the GIL, as a training loop's Python does) on three tracers, each with a
window every second: no listener; a listener that sleeps 2 s and one that raises; log_to a
TensorBoard SummaryWriter. Rounds of 1.5 s interleaved, 4 of each; each step timed by
perf_counter. Usage: python benchmarks/bench_listeners.py"""

import statistics
import tempfile
import time

import steptrace
from steptrace.demo import _busy

ROUNDS, ROUND_S, STEP_S = 4, 1.5, 0.001  # the live lines on stderr: 2>/dev/null


def loop(tracer, seconds):
    took, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        with tracer.step():
            with tracer.phase("compute"):
                _busy(STEP_S)
        took.append(time.perf_counter() - start)
    return took


def main():
    tracers = {name: steptrace.Tracer(live=1, print_at_exit=False) for name in ("none", "slow+raising", "tensorboard")}

    def fails(window):
        raise RuntimeError("tracker down")

    tracers["slow+raising"].on_window(lambda w: time.sleep(2))
    tracers["slow+raising"].on_window(fails)
    folder = tempfile.mkdtemp()
    try:
        from torch.utils.tensorboard import SummaryWriter

        tracers["tensorboard"].log_to(SummaryWriter(folder))
    except ImportError:
        del tracers["tensorboard"]
    took = {name: [] for name in tracers}
    for _ in range(ROUNDS):
        for name, t in tracers.items():
            took[name] += loop(t, ROUND_S)
    base = statistics.median(took["none"])
    for name, times in took.items():
        errors = tracers[name].summary().to_dict()["errors"]
        print(
            f"listeners {name:<13} {len(times):6d} steps  median {statistics.median(times) * 1e3:.4f} ms "
            f"({statistics.median(times) / base:.3f}x none)  max {max(times) * 1e3:7.2f} ms  "
            f"windows dropped {errors['windows_dropped']}, calls failed {errors['window_calls_failed']}"
        )


if __name__ == "__main__":
    main()
