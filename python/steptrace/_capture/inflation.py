"""What torch.profiler did to the steps a capture recorded: its own cost slows each op, so the
shares and gain read from a capture are of steps it made slower than the untraced ones beside
them. Said before the capture's figures, from INFLATED on."""

from __future__ import annotations

from typing import Any, Dict

INFLATED = 1.25  # a capture whose steps the profiler made this much slower says so


def inflation(run: Dict[str, Any], captured: Dict[str, Any]) -> str:
    """`run`: the live summary's dict (its typical step untraced); `captured`: the capture's."""
    profiled = (captured.get("step_ms") or {}).get("p50") or 0.0
    untraced = (run.get("step_ms") or {}).get("p50") or 0.0
    if untraced <= 0 or profiled < INFLATED * untraced:
        return ""
    return (
        f"torch.profiler made these steps {profiled / untraced:.1f}x slower than the untraced ones beside them "
        f"(p50 {profiled:.3g} ms against {untraced:.3g} ms): the shares and the gain below are of the profiled "
        "steps, the run's own figures are the untraced ones. "
    )
