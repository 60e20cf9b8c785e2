"""steptrace beside torch.profiler: CUPTI is handed over for a session that records CUDA activity
and taken back when it stops, whatever the order; a CPU-only session leaves it alone; the
profiler's own trace is unchanged."""

import types

import pytest

import steptrace
from steptrace import _core
from steptrace._profiler import handover as _profiler

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def fake_profiler_module(calls):
    """A stand-in for torch.autograd.profiler whose session calls only record what happened."""

    def prepare(config, activities, *args, **kwargs):
        calls.append(("prepare", _core.cupti_holder()))

    def disable():
        calls.append(("disable", _core.cupti_holder()))
        return "results"

    return types.SimpleNamespace(_prepare_profiler=prepare, _disable_profiler=disable)


def test_a_cuda_session_holds_cupti_from_prepare_to_disable():
    calls = []
    module = fake_profiler_module(calls)
    _profiler.wrap(module)
    _profiler.wrap(module)  # twice: wrapped once
    assert _core.cupti_holder() == ""
    module._prepare_profiler(None, {ProfilerActivity.CPU, ProfilerActivity.CUDA})
    assert _core.cupti_holder() == "torch.profiler"
    assert module._disable_profiler() == "results"
    assert calls == [("prepare", "torch.profiler"), ("disable", "torch.profiler")]
    assert _core.cupti_holder() == ""


def test_a_cpu_only_session_leaves_cupti_alone():
    calls = []
    module = fake_profiler_module(calls)
    _profiler.wrap(module)
    module._prepare_profiler(None, {ProfilerActivity.CPU})
    module._disable_profiler()
    assert calls == [("prepare", ""), ("disable", "")]


def test_a_session_that_fails_to_start_gives_cupti_back():
    def prepare(config, activities, *args, **kwargs):
        raise RuntimeError("no profiler today")

    module = types.SimpleNamespace(_prepare_profiler=prepare, _disable_profiler=lambda: None)
    _profiler.wrap(module)
    with pytest.raises(RuntimeError, match="no profiler today"):
        module._prepare_profiler(None, {ProfilerActivity.CUDA})
    assert _core.cupti_holder() == ""


@pytest.mark.parametrize("first", ["steptrace", "torch"])
def test_the_profiler_is_wrapped_whichever_is_imported_first(first):
    import subprocess
    import sys

    imports = "import steptrace, torch" if first == "steptrace" else "import torch, steptrace"
    code = (
        f"{imports}\nimport torch.autograd.profiler as p\n"
        "print(getattr(p._prepare_profiler, '_steptrace', False), getattr(p, '__loader__', None) is not None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]


def test_torch_profiler_runs_inside_steps_and_its_trace_is_intact(tmp_path):
    import torch.autograd.profiler as autograd_profiler

    assert getattr(autograd_profiler._prepare_profiler, "_steptrace", False)
    tracer = steptrace.Tracer(warmup_steps=0, print_at_exit="never")
    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in tracer.steps(range(5)):
            with tracer.phase("compute"):
                torch.mm(x, x)
    names = [e.name for e in prof.events()]
    assert names.count("aten::mm") == 5
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    assert (tmp_path / "trace.json").stat().st_size > 0
    assert tracer.summary().steps == 5
    assert _core.cupti_holder() == ""
