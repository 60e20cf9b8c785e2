"""PyTorch's CUDA allocator figures in the summary: read at the summary, never reset, and never
when the program has not initialised CUDA itself (the CPU build of torch stands in for CUDA's,
with its three allocator calls replaced)."""

import pytest

torch = pytest.importorskip("torch")

STATS = {
    "allocated_bytes.all.current": 1_234_500_000,
    "allocated_bytes.all.peak": 2_345_600_000,
    "reserved_bytes.all.current": 3_000_000_000,
    "reserved_bytes.all.peak": 3_100_000_000,
}


def test_allocator_figures_are_read_at_the_summary_and_shown(tracer, monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device: calls.append(device) or STATS)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: pytest.fail("steptrace reset the peaks"))
    for _ in range(3):
        with tracer.step():
            pass
    assert calls == []  # never per step
    s = tracer.summary()
    assert calls == [1]
    facts = s.to_dict()["facts"]
    assert facts["gpu.allocator.device"] == "cuda:1"
    assert facts["gpu.allocator.allocated_mb"] == "1234.5"
    assert facts["gpu.allocator.peak_allocated_mb"] == "2345.6"
    assert facts["gpu.allocator.peak_reserved_mb"] == "3100.0"
    assert (
        "cuda:1 (PyTorch's allocator, at the summary): 1234.5 MB allocated, peak 2345.6 MB; 3000.0 MB reserved"
        in str(s)
    )


def test_nothing_is_read_when_the_program_has_not_initialised_cuda(tracer, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device: pytest.fail("read CUDA's allocator uninitialised"))
    with tracer.step():
        pass
    s = tracer.summary()
    assert not any(k.startswith("gpu.allocator") for k in s.to_dict()["facts"])
    assert "PyTorch's allocator" not in str(s)


def test_a_failing_allocator_leaves_the_summary_whole(tracer, monkeypatch):
    def broken(device):
        raise RuntimeError("CUDA error: unknown error")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "memory_stats", broken)
    with tracer.step():
        pass
    assert tracer.summary().steps == 1
