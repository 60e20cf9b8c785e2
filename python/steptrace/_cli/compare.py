"""Runs side by side, and whether step time regressed (``steptrace compare``).

The rule, in one place. Each side is one run or several runs of the same command. Two figures
are judged: the median step (p50: typical latency) and the mean step (throughput: a bimodal run
whose slow half leaves the median where it was still takes longer). For each figure a side's
value is the median of its runs' p50s, or the mean of their means, and its noise is the larger
of two standard errors:
- within a run: sigma ~ (p95 - p50) / 1.645 estimated from the run's own percentiles; the s.e. of
  a median is ~ 1.2533 sigma / sqrt(steps), of a mean sigma / sqrt(steps);
- between runs (two runs or more on a side): the runs' spread of that figure / sqrt(runs), which
  catches what no single run shows (another job on the machine, clocks, placement).
Two standard errors of the difference make each figure's noise band. A regression fails the gate
when either figure grew beyond both its band and the threshold; the verdict says which decided.
Runs of fewer than MIN_STEPS steps have no trustworthy percentiles: there the steps themselves are
compared (each run's `series`, one point a step) by a rank test (Mann-Whitney U, exact for small
sides): when one side's steps are slower than the other's with CONFIDENCE or more, that is the
verdict, with the confidence reached (6 steps against 6 that do not overlap: 99.9%); else they are
too short to tell.

What moved on the device: with kernel figures on every run (traces with a GPU), the kernels and
the ops whose time per step changed most, each side's value the mean of its runs'; a change
larger than the mean step's noise band (in ms) is beyond the noise. A name missing from a side
whose list is complete is 0 there ("new", "gone"); missing from a full list (the first 50), unknown.

What a fix realised: for each cause the first side's diagnosis named with its gain (the most
removing it could save), the step time the second side actually saved (its mean step against
the first's; run time per step for time set aside), and the share of the bound that is. A saving
above its bound by more than the noise band of the mean is flagged: something else changed too.
"""

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import _core

MIN_STEPS = 10
CONFIDENCE = 0.95  # a short run's rank test decides from this confidence


@dataclass
class Figure:
    """One judged figure (step p50 or step mean): the change of b against a and its noise band."""

    name: str
    change: float  # relative
    noise: float  # relative half-width of the band


@dataclass
class Comparison:
    rows: List[Tuple[str, str, str, str]] = field(default_factory=list)  # (what, a, b, change)
    change: Optional[float] = None  # relative change of step p50, b against a
    noise: Optional[float] = None  # relative half-width of the p50's noise band
    figures: List[Figure] = field(default_factory=list)
    verdict: str = ""
    regressed: bool = False  # beyond the threshold and the noise: the gate fails
    realised: List["Realised"] = field(default_factory=list)
    moved: List["Moved"] = field(default_factory=list)
    moved_noise_ms: float = 0.0


@dataclass
class Moved:
    """A kernel or op's device time per step on each side (None: gone, or new), and whether the
    change is beyond the noise."""

    what: str  # "kernel" or "op"
    name: str
    a_ms: Optional[float]
    b_ms: Optional[float]
    beyond: bool


MOVED_ROWS = 5  # the kernels, and the ops, that moved most
FULL_LIST = 50  # a summary lists the first 50 kernels and ops (kernel_stats::max_rows)


def _device_times(runs: Sequence[Dict[str, Any]], what: str) -> Optional[Tuple[Dict[str, float], bool]]:
    """{name: ms per step} over a side's runs (the mean of theirs), and whether each list was
    complete; None when a run has no kernel figures."""
    per_run = []
    complete = True
    for r in runs:
        k = (r.get("gpu") or {}).get("kernels")
        if not k:
            return None
        rows = k["kernels" if what == "kernel" else "ops"]
        complete = complete and len(rows) < FULL_LIST
        per_run.append({row["name"]: row["ms_per_step"] for row in rows})
    names = dict.fromkeys(n for r in per_run for n in r)
    return {n: statistics.fmean(r.get(n, 0.0) for r in per_run) for n in names}, complete


def _moved(a_runs: Sequence[Dict[str, Any]], b_runs: Sequence[Dict[str, Any]], noise_ms: float) -> List[Moved]:
    out: List[Moved] = []
    for what in ("kernel", "op"):
        a, b = _device_times(a_runs, what), _device_times(b_runs, what)
        if a is None or b is None:
            return []
        (ta, a_complete), (tb, b_complete) = a, b
        rows = []
        for name in dict.fromkeys(list(ta) + list(tb)):
            va = ta.get(name, 0.0 if a_complete else None)
            vb = tb.get(name, 0.0 if b_complete else None)
            if va is None or vb is None:
                continue  # below a full list's last row on one side: its change is unknown
            rows.append(
                Moved(what, name, va if name in ta else None, vb if name in tb else None, abs(vb - va) > noise_ms)
            )
        rows.sort(key=lambda m: -abs((m.b_ms or 0.0) - (m.a_ms or 0.0)))
        out.extend(rows[:MOVED_ROWS])
    return out


@dataclass
class Realised:
    """A cause the first side named: its bound, what the second side saved, and whether that is
    beyond the bound by more than the noise."""

    cause: str
    bound: float  # fraction of step time (of run time for time set aside)
    saved: float  # fraction actually saved
    of_run: bool
    beyond: bool


def short_name(kernel: str) -> str:
    """A kernel's name as the table shortens it (no return type, no parameters)."""
    return _core.short_kernel_name(kernel)


def _ms(v: float) -> str:
    return f"{_core.format_ms(v)} ms"  # the table's rule: never an exponent


def _pct(a: float, b: float) -> str:
    if a == b:
        return "="
    if a == 0:
        return "new"
    return f"{100 * (b - a) / a:+.1f}%"


# A phase under this share of the step on both sides changes by noise-sized amounts that read as
# +100% or +1229%: its change is said in ms instead.
SMALL_PHASE = 0.01


def _phase_change(ma: float, mb: float, step_a: float, step_b: float) -> str:
    shares = [m / step for m, step in ((ma, step_a), (mb, step_b)) if step > 0]
    if ma == mb or not shares or max(shares) >= SMALL_PHASE:
        return _pct(ma, mb)
    return f"{'+' if mb > ma else '-'}{_ms(abs(mb - ma))} (under {100 * SMALL_PHASE:.0f}% of a step)"


def _sigma(step_ms: Dict[str, float]) -> float:
    return max(step_ms["p95"] - step_ms["p50"], 0.0) / 1.645


def _error(runs: Sequence[Dict[str, Any]], figure: str) -> float:
    """The standard error of a side's value of `figure` ("p50" or "mean"), within and between runs."""
    scale = 1.2533 if figure == "p50" else 1.0
    within = max(scale * _sigma(r["step_ms"]) / math.sqrt(max(r["steps"], 1)) for r in runs) / math.sqrt(len(runs))
    if len(runs) < 2:
        return within
    between = statistics.stdev(r["step_ms"][figure] for r in runs) / math.sqrt(len(runs))
    return max(within, between)


def side(runs: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Several runs of one side as one summary-like dict: steps summed, the p50 and tail figures
    the median of the runs', the mean the mean of theirs, each phase's mean the mean of theirs."""
    if len(runs) == 1:
        return runs[0]
    out: Dict[str, Any] = {"steps": sum(r["steps"] for r in runs), "step_ms": {}, "phases": {}}
    for q in ("p50", "p95", "p99", "max"):
        out["step_ms"][q] = statistics.median(r["step_ms"][q] for r in runs)
    out["step_ms"]["mean"] = statistics.fmean(r["step_ms"]["mean"] for r in runs)
    names = [n for r in runs for n in r["phases"]]
    for name in dict.fromkeys(names):
        out["phases"][name] = {"mean_ms": statistics.fmean(r["phases"].get(name, {}).get("mean_ms", 0.0) for r in runs)}
    labels = {(r.get("diagnosis") or {}).get("label") or "-" for r in runs}
    causes = [c for r in runs for c in ((r.get("diagnosis") or {}).get("gains") or {})]
    out["diagnosis"] = {
        "label": labels.pop() if len(labels) == 1 else "mixed",
        "gains": {
            c: statistics.fmean(((r.get("diagnosis") or {}).get("gains") or {}).get(c, 0.0) for r in runs)
            for c in dict.fromkeys(causes)
        },
    }
    out["set_aside"] = {n: {} for r in runs for n in (r.get("set_aside") or {})}
    out["run_ms"] = statistics.fmean(r.get("run_ms", 0.0) for r in runs)
    out["run_ms_per_step"] = statistics.fmean(_run_per_step(r) for r in runs)
    return out


def _run_per_step(run: Dict[str, Any]) -> float:
    steps = run.get("steps", 0)
    return run.get("run_ms", 0.0) / steps if steps else 0.0


def _realised(a: Dict[str, Any], b: Dict[str, Any], noise: float) -> List[Realised]:
    """Each cause `a` named with its gain, against what `b` saved."""
    out = []
    gains = (a.get("diagnosis") or {}).get("gains") or {}
    for cause, bound in gains.items():
        of_run = cause in (a.get("set_aside") or {})
        if of_run:
            before, after = a.get("run_ms_per_step", _run_per_step(a)), b.get("run_ms_per_step", _run_per_step(b))
        else:
            before, after = a["step_ms"]["mean"], b["step_ms"]["mean"]
        if before <= 0:
            continue
        saved = (before - after) / before
        out.append(Realised(cause, bound, saved, of_run, saved > bound + noise))
    return out


def _steps_of(runs: Sequence[Dict[str, Any]]) -> Optional[List[float]]:
    """Every step's time of the runs, from their series (one point a step); None where a run's
    series holds several steps a point, or none."""
    out: List[float] = []
    for r in runs:
        series = r.get("series") or {}
        points = series.get("points") or []
        if series.get("steps_per_point") != 1 or len(points) != r.get("steps"):
            return None
        out += [float(p["step_ms"]) for p in points]
    return out


def _u_tail(a: List[float], b: List[float]) -> float:
    """One-sided p-value that b's steps are slower than a's by chance: P(U >= u) for the
    Mann-Whitney U of b over a (pairs b > a, ties a half), exact by counting when the sides are
    small, else the normal approximation."""
    n, m = len(a), len(b)
    u = sum((y > x) + 0.5 * (y == x) for x in a for y in b)
    if n * m <= 400:
        # ways[k][j][v]: orderings of k of a's and j of b's with U = v; by adding the largest item
        ways = [[None] * (m + 1) for _ in range(n + 1)]
        for k in range(n + 1):
            for j in range(m + 1):
                if k == 0 or j == 0:
                    ways[k][j] = [1]
                    continue
                top_b = [0] * k + ways[k][j - 1]  # the largest is one of b's: above all k of a's
                top_a = ways[k - 1][j]
                size = max(len(top_b), len(top_a))
                ways[k][j] = [
                    (top_b[v] if v < len(top_b) else 0) + (top_a[v] if v < len(top_a) else 0) for v in range(size)
                ]
        dist = ways[n][m]
        at = math.ceil(u - 1e-9)
        return sum(dist[at:]) / sum(dist)
    mu, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
    return 0.5 * math.erfc((u - 0.5 - mu) / (sd * math.sqrt(2)))


def _short_verdict(
    c: Comparison,
    a: Dict[str, Any],
    b: Dict[str, Any],
    a_steps: List[float],
    b_steps: List[float],
    max_regression_pct: Optional[float],
    too_short: str,
) -> None:
    slower, faster = _u_tail(a_steps, b_steps), _u_tail(b_steps, a_steps)
    changes = [
        (f"step {q}", (b["step_ms"][q] - a["step_ms"][q]) / a["step_ms"][q])
        for q in ("p50", "mean")
        if a["step_ms"][q] > 0
    ]
    said = "; ".join(f"{name} {100 * ch:+.1f}%" for name, ch in changes)
    sides = f"{len(a_steps)} and {len(b_steps)} steps"
    if min(slower, faster) > 1 - CONFIDENCE:
        c.verdict = (
            f"{too_short}: {sides} overlap (rank test: {100 * (1 - min(slower, faster)):.0f}% confidence "
            f"of a difference, {100 * CONFIDENCE:.0f}% needed); {said}"
        )
        return
    p = min(slower, faster)
    beside = "every step" if p == 1 / math.comb(len(a_steps) + len(b_steps), len(a_steps)) else "the steps"
    if slower < faster:
        c.verdict = (
            f"slower: {said}; {beside} of the second side slower than the first's, over {sides} "
            f"(rank test: {100 * (1 - p):.1f}% confidence)"
        )
        if max_regression_pct is not None:
            beyond = [name for name, ch in changes if 100 * ch > max_regression_pct]
            c.regressed = bool(beyond)
            c.verdict += (
                f", beyond --max-regression {max_regression_pct:g}%: regression, decided by the "
                f"{' and the '.join(beyond)}"
                if beyond
                else f", within --max-regression {max_regression_pct:g}%"
            )
    else:
        c.verdict = (
            f"faster: {said}; {beside} of the second side faster than the first's, over {sides} "
            f"(rank test: {100 * (1 - p):.1f}% confidence)"
        )
    c.change = dict(changes).get("step p50")


def compare(a_runs: Any, b_runs: Any, max_regression_pct: Optional[float]) -> Comparison:
    """`a_runs` and `b_runs`: a summary dict each, or a list of them (runs of the same command)."""
    a_runs = [a_runs] if isinstance(a_runs, dict) else list(a_runs)
    b_runs = [b_runs] if isinstance(b_runs, dict) else list(b_runs)
    a, b = side(a_runs), side(b_runs)
    c = Comparison()
    sa, sb = a["step_ms"], b["step_ms"]
    if len(a_runs) > 1 or len(b_runs) > 1:
        c.rows.append(("runs", str(len(a_runs)), str(len(b_runs)), ""))
    c.rows.append(("steps", str(a["steps"]), str(b["steps"]), ""))
    for q in ("p50", "mean", "p95", "p99", "max"):
        c.rows.append((f"step {q}", _ms(sa[q]), _ms(sb[q]), _pct(sa[q], sb[q])))
    names = list(a["phases"]) + [n for n in b["phases"] if n not in a["phases"]]
    for name in names:
        pa, pb = a["phases"].get(name), b["phases"].get(name)
        ma = pa["mean_ms"] if pa else 0.0
        mb = pb["mean_ms"] if pb else 0.0
        c.rows.append(
            (
                f"{name} (mean)",
                _ms(ma) if pa else "-",
                _ms(mb) if pb else "-",
                _phase_change(ma, mb, sa["mean"], sb["mean"]),
            )
        )
    la = (a.get("diagnosis") or {}).get("label") or "-"
    lb = (b.get("diagnosis") or {}).get("label") or "-"
    c.rows.append(("label", la, lb, "" if la == lb else "changed"))

    if sa["mean"] > 0:
        mean_noise = 2 * math.hypot(_error(a_runs, "mean"), _error(b_runs, "mean")) / sa["mean"]
        c.realised = _realised(a, b, mean_noise)
        c.moved_noise_ms = mean_noise * sa["mean"]
        c.moved = _moved(a_runs, b_runs, c.moved_noise_ms)
    short = [r["steps"] for r in a_runs + b_runs if r["steps"] < MIN_STEPS]
    if short:
        runs = (
            f"{a['steps']} and {b['steps']} steps"
            if len(a_runs) == len(b_runs) == 1
            else f"a run of {min(short)} steps"
        )
        a_steps, b_steps = _steps_of(a_runs), _steps_of(b_runs)
        if a_steps and b_steps and sa["p50"] > 0 and sa["mean"] > 0:
            _short_verdict(c, a, b, a_steps, b_steps, max_regression_pct, "too short to tell")
        else:
            c.verdict = f"too short to tell: {runs} (at least {MIN_STEPS} each are needed)"
        return c
    if sa["p50"] <= 0 or sa["mean"] <= 0:
        c.verdict = "cannot tell: the first side's step time is 0"
        return c
    for figure in ("p50", "mean"):
        change = (sb[figure] - sa[figure]) / sa[figure]
        noise = 2 * math.hypot(_error(a_runs, figure), _error(b_runs, figure)) / sa[figure]
        c.figures.append(Figure(f"step {figure}", change, noise))
    p50, mean = c.figures
    c.change, c.noise = p50.change, p50.noise
    one_run = len(a_runs) < 2 or len(b_runs) < 2
    between = " (one run a side: the noise between runs is unknown; give each side 3 runs or more)" if one_run else ""
    if c.change == 0 and a["step_ms"] == b["step_ms"]:
        c.verdict = "no change: the step times are the same"
        return c
    grew = [f for f in c.figures if f.change > f.noise]
    fell = [f for f in c.figures if f.change < -f.noise]
    said = "; ".join(f"{f.name} {100 * f.change:+.1f}% (noise ±{100 * f.noise:.1f}%)" for f in c.figures)
    if grew:
        c.verdict = f"slower: {said}"
        if max_regression_pct is not None:
            beyond = [f for f in grew if 100 * f.change > max_regression_pct]
            c.regressed = bool(beyond)
            c.verdict += (
                f", beyond --max-regression {max_regression_pct:g}%: regression, decided by the "
                f"{' and the '.join(f.name for f in beyond)}"
                if beyond
                else f", within --max-regression {max_regression_pct:g}%"
            )
    elif fell:
        c.verdict = f"faster: {said}"
    else:
        c.verdict = f"no change beyond the noise: {said}"
        if max_regression_pct is not None and min(f.noise for f in c.figures) * 100 >= max_regression_pct:
            c.verdict += (
                f"; too noisy to tell a {max_regression_pct:g}% regression: "
                "longer runs, or more runs a side, narrow the band"
            )
    c.verdict += between if max_regression_pct is not None else ""
    return c


NAME_WIDTH = 40  # the first column's widest: a longer phase name is clipped, as the kernel table's are


def _clipped(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def render(c: Comparison, name_a: str, name_b: str) -> str:
    # Every column as wide as its widest entry, so long names and values keep the columns aligned.
    whats = [_clipped(_core.printable_text(r[0]), NAME_WIDTH) for r in c.rows]  # as a file spelled it, escaped
    first = max([16] + [len(w) + 1 for w in whats])
    width = max(len(x) for r in c.rows + [("", name_a, name_b, "")] for x in (r[1], r[2])) + 2
    lines = [f"{'':<{first}}{name_a:>{width}}  {name_b:>{width}}  change"]
    for what, (_, va, vb, ch) in zip(whats, c.rows):
        lines.append(f"{what:<{first}}{va:>{width}}  {vb:>{width}}  {ch}")
    lines.append("")
    lines.append(c.verdict)
    if c.moved:
        lines.append("")
        lines.append(
            f"what moved on the device, per step (the kernels and ops that changed most; the mean step's "
            f"noise ±{_ms(c.moved_noise_ms)}):"
        )
        for m in c.moved:
            a_ms, b_ms = m.a_ms or 0.0, m.b_ms or 0.0
            change = (
                "new"
                if m.a_ms is None
                else "gone"
                if m.b_ms is None
                else f"{'+' if b_ms >= a_ms else '-'}{_ms(abs(b_ms - a_ms))} ({_pct(a_ms, b_ms)})"
            )
            note = "" if m.beyond else "  within the noise"
            name = _core.printable_text(short_name(m.name) if m.what == "kernel" else m.name)  # no newline forges a row
            lines.append(f"  {m.what:<7}{_ms(a_ms):>12} -> {_ms(b_ms):<12}{change:<24}{name}{note}")
    if c.realised:
        lines.append("")
        lines.append(
            f"what the fixes realised (the causes {name_a} named, the most each could save, and what {name_b} saved):"
        )
        for r in c.realised:
            unit = "of the run per step" if r.of_run else "of step time"
            share = f", {100 * r.saved / r.bound:.0f}% of it" if r.bound > 0 and r.saved > 0 else ""
            flag = "; more than its bound beyond the noise: something else changed too" if r.beyond else ""
            done = (
                f"realised {100 * r.saved:.0f}%{share}"
                if r.saved >= 0
                else f"nothing realised: steps {100 * -r.saved:.0f}% longer"
            )
            lines.append(f"  {r.cause}: up to {100 * r.bound:.0f}% {unit}; {done}{flag}")
    return "\n".join(lines) + "\n"
