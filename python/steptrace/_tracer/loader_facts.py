"""A DataLoader's settings, told to a tracer for the advice (num_workers, pin_memory, ...). Apart
from ``steptrace.torch`` so that the tracer's own module (``_api``) and the framework callbacks
use it without importing each other: imports go one way (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

_FACTS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "batch_size")


def tell_settings(tracer: Any, loader: Any) -> None:
    """Tells the diagnosis the loader's settings (num_workers, pin_memory, ...), which the advice
    names: for an instrumented loader, and for a DataLoader given to steptrace.steps() as it is.
    `tracer`: anything with ``set_fact``."""
    for name in _FACTS:
        value = getattr(loader, name, None)
        if value is not None:
            tracer.set_fact(f"dataloader.{name}", value)
