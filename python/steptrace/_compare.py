"""Two runs side by side, and whether step time regressed (``steptrace compare``).

The rule, in one place: step time is compared by its median (p50). Each run's noise is the
standard error of its median, estimated from its own percentiles (sigma ~ (p95 - p50) / 1.645,
s.e. of the median ~ 1.2533 sigma / sqrt(steps)); two standard errors of the difference make the
noise band. A regression fails the gate only when it is beyond both the band and the threshold.
Runs of fewer than MIN_STEPS steps are too short to tell.
"""

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import _core

MIN_STEPS = 10


@dataclass
class Comparison:
    rows: List[Tuple[str, str, str, str]] = field(default_factory=list)  # (what, a, b, change)
    change: Optional[float] = None  # relative change of step p50, b against a
    noise: Optional[float] = None  # relative half-width of the noise band
    verdict: str = ""
    regressed: bool = False  # beyond the threshold and the noise: the gate fails


def _ms(v: float) -> str:
    return f"{_core.format_ms(v)} ms"  # the table's rule: never an exponent


def _pct(a: float, b: float) -> str:
    if a == b:
        return "="
    if a == 0:
        return "new"
    return f"{100 * (b - a) / a:+.1f}%"


def _median_error(step_ms: Dict[str, float], steps: int) -> float:
    sigma = max(step_ms["p95"] - step_ms["p50"], 0.0) / 1.645
    return 1.2533 * sigma / math.sqrt(max(steps, 1))


def compare(a: Dict[str, Any], b: Dict[str, Any], max_regression_pct: Optional[float]) -> Comparison:
    c = Comparison()
    sa, sb = a["step_ms"], b["step_ms"]
    c.rows.append(("steps", str(a["steps"]), str(b["steps"]), ""))
    for q in ("p50", "mean", "p95", "p99", "max"):
        c.rows.append((f"step {q}", _ms(sa[q]), _ms(sb[q]), _pct(sa[q], sb[q])))
    names = list(a["phases"]) + [n for n in b["phases"] if n not in a["phases"]]
    for name in names:
        pa, pb = a["phases"].get(name), b["phases"].get(name)
        ma = pa["mean_ms"] if pa else 0.0
        mb = pb["mean_ms"] if pb else 0.0
        c.rows.append((f"{name} (mean)", _ms(ma) if pa else "-", _ms(mb) if pb else "-", _pct(ma, mb)))
    la = (a.get("diagnosis") or {}).get("label") or "-"
    lb = (b.get("diagnosis") or {}).get("label") or "-"
    c.rows.append(("label", la, lb, "" if la == lb else "changed"))

    if a["steps"] < MIN_STEPS or b["steps"] < MIN_STEPS:
        c.verdict = (f"too short to tell: {a['steps']} and {b['steps']} steps "
                     f"(at least {MIN_STEPS} each are needed)")
        return c
    if sa["p50"] <= 0:
        c.verdict = "cannot tell: the first run's step p50 is 0"
        return c
    c.change = (sb["p50"] - sa["p50"]) / sa["p50"]
    c.noise = 2 * math.hypot(_median_error(sa, a["steps"]), _median_error(sb, b["steps"])) / sa["p50"]
    band = f"noise ±{100 * c.noise:.1f}%"
    if c.change == 0 and a["step_ms"] == b["step_ms"]:
        c.verdict = "no change: the step times are the same"
    elif abs(c.change) <= c.noise:
        c.verdict = f"no change beyond the noise: step p50 {100 * c.change:+.1f}% ({band})"
        if max_regression_pct is not None and c.noise * 100 >= max_regression_pct:
            c.verdict += (f"; too noisy to tell a {max_regression_pct:g}% regression: "
                          "longer runs narrow the band")
    elif c.change < 0:
        c.verdict = f"faster: step p50 {100 * c.change:+.1f}% ({band})"
    else:
        c.verdict = f"slower: step p50 {100 * c.change:+.1f}% ({band})"
        if max_regression_pct is not None:
            c.regressed = 100 * c.change > max_regression_pct
            c.verdict += (f", beyond --max-regression {max_regression_pct:g}%: regression" if c.regressed
                          else f", within --max-regression {max_regression_pct:g}%")
    return c


def render(c: Comparison, name_a: str, name_b: str) -> str:
    width = max(len(r[1]) for r in c.rows + [("", name_a, "", "")]) + 2
    lines = [f"{'':<16}{name_a:>{width}}  {name_b:>{width}}  change"]
    for what, va, vb, ch in c.rows:
        lines.append(f"{what:<16}{va:>{width}}  {vb:>{width}}  {ch}")
    lines.append("")
    lines.append(c.verdict)
    return "\n".join(lines) + "\n"
