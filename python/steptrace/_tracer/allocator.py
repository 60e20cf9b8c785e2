"""What PyTorch's CUDA caching allocator holds, told to a tracer as facts at each summary.

Read once per summary, never per step (the allocator's statistics come as a dictionary of over
a hundred counters), and never reset: the peaks are the program's own high-water marks, since it
started or last called ``torch.cuda.reset_peak_memory_stats``. Nothing is read, and CUDA is never
initialised, when the program has not initialised it itself."""

import sys
from typing import Any

_FACTS = (
    ("gpu.allocator.allocated_mb", "allocated_bytes.all.current"),
    ("gpu.allocator.peak_allocated_mb", "allocated_bytes.all.peak"),
    ("gpu.allocator.reserved_mb", "reserved_bytes.all.current"),
    ("gpu.allocator.peak_reserved_mb", "reserved_bytes.all.peak"),
)


def note_allocator(core: Any) -> None:
    """Sets the ``gpu.allocator.*`` facts of ``core`` (a ``_core.Tracer``) from the current device."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None:
        return
    try:
        if not cuda.is_initialized():
            return
        device = cuda.current_device()
        stats = cuda.memory_stats(device)
    except Exception:  # a broken or CPU-only CUDA: the summary goes on without these
        return
    core.set_fact("gpu.allocator.device", f"cuda:{device}")
    try:
        core.set_fact("gpu.name", cuda.get_device_name(device))  # the peaks table's key for MFU
    except Exception:
        pass
    for fact, key in _FACTS:
        core.set_fact(fact, f"{stats.get(key, 0) / 1e6:.1f}")
