"""Python's hot path (bindings/phases.cpp, bindings/scopes.cpp, bindings/step_loop.cpp): a phase, a step and a
steps() loop allocate nothing per use, a disabled tracer's phase never reaches the core, and the
fast path gives what the Python path would (the same scope, torch's current stream where torch has started CUDA, a decorator that
records once the tracer is enabled again)."""

import tracemalloc

import pytest

import steptrace
from steptrace import _core

N = 100_000


def _traced_growth(fn):
    """Bytes Python holds after fn() beyond before it, and the peak above before, by tracemalloc."""
    fn()  # warm: the scope and the table entry exist before counting
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        fn()
        end, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return end - start, peak - start


def test_a_phase_allocates_nothing_per_use(tracer):
    phase = tracer.phase

    def phases():
        with tracer.step():
            for _ in range(N):
                with phase("compute"):
                    pass

    grown, peak = _traced_growth(phases)
    # One kept object a phase would be >= 1.6 MB here; what a `with` makes and frees at once
    # (its bound __enter__/__exit__) never piles up.
    assert grown < 4096 and peak < 16384, (grown, peak)
    assert tracer.summary().to_dict()["phases"]["compute"]["calls"] == 2 * N


def test_a_steps_loop_allocates_nothing_per_step(tracer):
    def loop():
        for _ in tracer.steps(range(N)):
            pass

    grown, peak = _traced_growth(loop)
    assert grown < 4096 and peak < 16384, (grown, peak)
    assert tracer.summary().to_dict()["steps"] == 2 * N


def test_a_step_allocates_nothing_per_use(tracer):
    step = tracer.step

    def steps():
        for _ in range(N):
            with step():
                pass

    grown, peak = _traced_growth(steps)
    assert grown < 4096 and peak < 16384, (grown, peak)
    assert tracer.summary().to_dict()["steps"] == 2 * N


def test_step_gives_what_the_python_path_gives(tracer):
    """step() with nothing, outside an event loop, is the tracer's one scope (the Python path's
    answer too); a stream, a batch, a decorated function or a coroutine take the Python path."""
    import asyncio

    scope = tracer.step()
    assert scope is tracer.step() is steptrace.Tracer.step(tracer)
    assert tracer.step(stream=0) is not scope and tracer.step(stream=0) is tracer.step(stream=0)
    assert type(tracer.step(batch=4)).__name__ == "_BatchStep"

    async def in_a_task():
        return tracer.step()

    assert type(asyncio.run(in_a_task())).__name__ == "_RequestStepScope"
    assert tracer.step() is scope  # the loop is gone: the thread's scope again

    @tracer.step
    def one(x):
        with tracer.phase("compute"):
            return x + 1

    assert one(1) == 2
    with pytest.raises(ValueError, match="boom"):  # the user's exception, unchanged
        with tracer.step():
            raise ValueError("boom")
    with tracer.step():
        with pytest.raises(steptrace.StepError, match="already open"):
            with tracer.step():
                pass
    d = tracer.summary().to_dict()
    assert (d["steps"], d["failed_steps"], d["phases"]["compute"]["calls"]) == (2, 1, 1)
    assert "One iteration of your loop" in tracer.step.__doc__


def test_a_disabled_phase_never_reaches_the_core():
    off = steptrace.Tracer(warmup_steps=0, print_at_exit=False, enabled=False)
    on = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
    with off.phase("decode"):  # the first use of a name takes the Python path
        pass
    entered = _core.phase_enters()
    for _ in range(10_000):
        with off.phase("decode"):
            pass
    assert _core.phase_enters() == entered  # the no-op: not one call into the tracer
    scope = off.phase("decode")
    assert type(scope) is _core.DisabledPhase and off.phase("decode") is scope
    with on.step():
        for _ in range(1000):
            with on.phase("decode"):
                pass
    assert _core.phase_enters() == entered + 1000  # the counter counts what does reach it


def test_a_function_decorated_while_disabled_records_once_enabled(tracer):
    tracer.configure(enabled=False)
    with tracer.phase("decode"):
        pass

    @tracer.phase("decode")  # the disabled no-op decorates with the real scope
    def decode():
        return 7

    assert decode() == 7
    tracer.configure(enabled=True)
    with tracer.step():
        assert decode() == 7
        with tracer.phase("decode"):  # the fast path gives the real scope again
            pass
    assert tracer.summary().to_dict()["phases"]["decode"]["calls"] == 2


def test_the_fast_path_gives_the_python_paths_scope(tracer):
    first = tracer.phase("load")  # new: made on the Python path, remembered
    assert tracer.phase("load") is first
    assert tracer.phase(name="load") is first  # a keyword takes the Python path: the same scope
    with pytest.raises(TypeError, match="phase name must be a str"):
        tracer.phase(3)
    with pytest.raises(TypeError, match="phase name must be a str"):
        tracer.phase(["load"])  # unhashable: the Python path's error, not the dict's
    assert "A named scope inside a step" in tracer.phase.__doc__


# A stand-in torch with CUDA on: torch.cuda.current_stream() counts its calls in `asked` and gives
# a stream whose handle is current["stream"] (0 until a test sets it).
STAND_IN_TORCH = """
import sys, types, json
torch = types.ModuleType("torch")
cuda = types.ModuleType("torch.cuda")
asked = []
current = {"stream": 0}
class Stream:
    @property
    def cuda_stream(self):
        return current["stream"]
def current_stream():
    asked.append(1)
    return Stream()
cuda._initialized = True
cuda.is_initialized = lambda: cuda._initialized
cuda.current_stream = current_stream
torch.cuda = cuda
sys.modules["torch"], sys.modules["torch.cuda"] = torch, cuda
"""


def test_where_torch_started_cuda_a_phase_times_the_current_stream(run_python):
    """A stand-in torch that has started CUDA: phase(name) of a name already known must still ask
    for torch's current stream, as the Python path does, and stop asking when CUDA is not on."""
    proc = run_python(
        STAND_IN_TORCH
        + """
cuda._initialized = False
import steptrace
t = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
plain = t.phase("decode")
plain_again = t.phase("decode")
cuda._initialized = True
on_stream = t.phase("decode")
on_stream_again = t.phase("decode")
print(json.dumps({"plain": plain is plain_again, "asked": len(asked),
                  "stream_scope": on_stream is not plain and on_stream is on_stream_again}))
"""
    )
    out = proc.stdout.strip().splitlines()[-1]
    assert out == '{"plain": true, "asked": 2, "stream_scope": true}', proc.stderr


def test_with_torch_cuda_on_a_known_phase_on_the_current_stream_skips_the_python_path(run_python):
    """A stand-in torch with CUDA on and torch._C's raw-stream functions: a name met before on the
    current stream is found in C (the Python path, which asks torch.cuda.current_stream(), runs
    once per name and stream), gives the Python path's scope, follows a change of stream, and falls
    back to the Python path when torch._C fails."""
    proc = run_python(
        STAND_IN_TORCH
        + """
import tracemalloc
C = types.ModuleType("torch._C")
current["stream"] = 0x7f00aa001000
C._cuda_getDevice = lambda: 0
C._cuda_getCurrentRawStream = lambda device: current["stream"]
torch.cuda, torch._C = cuda, C
sys.modules.update({"torch": torch, "torch.cuda": cuda, "torch._C": C})
import steptrace
t = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
first = t.phase("decode")
again = [t.phase("decode") for _ in range(1000)]
out = {"same": all(a is first for a in again), "asked": len(asked),
       "python_path": first is t._phases[("decode", current["stream"])]}
current["stream"] = 0x7f00bb001000  # the same slot as the first: told apart by the handle
other = t.phase("decode")
out["other_stream"] = other is not first and other is t._phases[("decode", current["stream"])]
current["stream"] = 0x7f00aa001000
out["back"] = t.phase("decode") is first  # the slot went to the other stream: the Python path again
out["asked_after"] = len(asked)
with t.step():
    for _ in range(50):
        with t.phase("decode"):
            pass
tracemalloc.start()
start, _ = tracemalloc.get_traced_memory()
with t.step():
    for _ in range(100_000):
        with t.phase("decode"):
            pass
end, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
out["kept"] = end - start < 50_000
def broken(device):
    raise RuntimeError("no stream")
C._cuda_getCurrentRawStream = broken
out["fallback"] = t.phase("decode") is first and len(asked) == out["asked_after"] + 1
out["calls"] = t.summary().to_dict()["phases"]["decode"]["calls"]
print(json.dumps(out, sort_keys=True))
"""
    )
    out = proc.stdout.strip().splitlines()[-1]
    assert out == (
        '{"asked": 1, "asked_after": 3, "back": true, "calls": 100050, "fallback": true, "kept": true, '
        '"other_stream": true, "python_path": true, "same": true}'
    ), proc.stderr


def test_many_names_each_find_their_own_scope(tracer):
    """More names than the table's recent slots, each asked for as several equal str objects:
    every call gives the scope of that name (the slots are a cache of the table, by address)."""
    names = [f"stage{i}" for i in range(300)]
    for _ in range(3):
        for name in names:
            again = "".join(list(name))  # equal, another object
            assert tracer.phase(name)._steptrace_annotation == name
            assert tracer.phase(again) is tracer.phase(name)
    with tracer.step():
        for name in names:
            with tracer.phase("".join(list(name))):
                pass
    phases = tracer.summary().to_dict()["phases"]
    assert all(phases[name]["calls"] == 1 for name in names)
