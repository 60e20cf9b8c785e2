"""The Python API's cost a call, in paired rounds (benchmarks/paired.py): `with steptrace.phase(...)`
enabled and disabled, `with steptrace.step()` (no target) and `steptrace.steps()` a step, against a trivial `with` (empty __enter__ and
__exit__), a block timed by two perf_counter_ns() reads, and a bare `for` with a trivial `with`.
Targets (issue "Cost that holds anywhere"), by thread CPU: enabled phase <= 1.0x the trivial
`with`, disabled <= 0.3x, steps() <= 1.5x the bare loop. The phases' ratios are printed as
measured and net of the `for` loop around each (an empty loop in the same rounds). With --torch, the enabled phase again
with torch imported (CUDA not started: each phase reads torch.cuda's state), in this process
after the rest. Usage: python benchmarks/bench_python.py [rounds] [n] [--torch]"""

import sys

import steptrace

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from paired import measure, report  # noqa: E402

TORCH = "--torch" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--torch"]
ROUNDS = int(ARGS[0]) if len(ARGS) > 0 else 15
N = int(ARGS[1]) if len(ARGS) > 1 else 100_000
perf_counter_ns = __import__("time").perf_counter_ns


class Trivial:
    __slots__ = ()

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


class Timed:
    __slots__ = ("start", "elapsed")

    def __enter__(self):
        self.start = perf_counter_ns()

    def __exit__(self, *exc):
        self.elapsed = perf_counter_ns() - self.start


trivial, timed = Trivial(), Timed()
on = steptrace.Tracer(warmup_steps=0, print_at_exit="never")
off = steptrace.Tracer(warmup_steps=0, print_at_exit="never", enabled=False)


def empty_loop(n):
    for _ in range(n):
        pass


def with_trivial(n):
    for _ in range(n):
        with trivial:
            pass


def with_timed(n):
    for _ in range(n):
        with timed:
            pass


def phase_on(n, phase=on.phase):
    with on.step():
        for _ in range(n):
            with phase("compute"):
                pass


def phase_off(n, phase=off.phase):
    for _ in range(n):
        with phase("compute"):
            pass


def step_on(n, step=on.step):
    for _ in range(n):
        with step():
            pass


def loop_bare(n):
    for _ in range(n):
        with trivial:
            pass


def loop_steps(n):
    for _ in on.steps(range(n)):
        with trivial:
            pass


phases = measure(
    {
        "trivial with": with_trivial,
        "two perf_counter_ns()": with_timed,
        "with steptrace.phase(name), enabled": phase_on,
        "with steptrace.phase(name), disabled": phase_off,
        "with steptrace.step(), enabled": step_on,
        "the loop alone": empty_loop,
    },
    baseline="trivial with",
    n=N,
    rounds=ROUNDS,
    loop="the loop alone",
)
print(f"python phase, {N} calls a round, Python {sys.version.split()[0]}")
print(
    report(
        phases,
        "trivial with",
        {"with steptrace.phase(name), enabled": 1.0, "with steptrace.phase(name), disabled": 0.3},
    )
)
loops = measure(
    {"for + trivial with": loop_bare, "steptrace.steps() + trivial with": loop_steps},
    baseline="for + trivial with",
    n=N // 4,
    rounds=ROUNDS,
)
print(f"\nsteps(), {N // 4} items a round")
print(report(loops, "for + trivial with", {"steptrace.steps() + trivial with": 1.5}))
if TORCH:
    import torch

    phases = measure(
        {"trivial with": with_trivial, "with steptrace.phase(name), torch imported": phase_on},
        baseline="trivial with",
        n=N,
        rounds=ROUNDS,
    )
    print(f"\ntorch {torch.__version__} imported, CUDA started: {torch.cuda.is_initialized()}")
    print(report(phases, "trivial with", {"with steptrace.phase(name), torch imported": 1.0}))
