"""The HTML report's roofline: each costed op's achieved TFLOP/s against its arithmetic intensity,
under the device's roofs (docs/diagnosis.md, "The ceiling"), from the summary's ``ceiling``."""

from __future__ import annotations

import html
import math
from typing import Any, Dict, List, Optional, Tuple

_W, _H, _PAD = 560, 320, 48
_X = (0.1, 1e4)  # FLOP per byte
_Y = (0.01, 1e4)  # TFLOP/s


def _at(x: float, y: float) -> Tuple[float, float]:
    fx = (math.log10(x) - math.log10(_X[0])) / (math.log10(_X[1]) - math.log10(_X[0]))
    fy = (math.log10(y) - math.log10(_Y[0])) / (math.log10(_Y[1]) - math.log10(_Y[0]))
    return _PAD + fx * (_W - 2 * _PAD), _H - _PAD - fy * (_H - 2 * _PAD)


def _clamp(v: float, lo: float, hi: float) -> float:
    return min(max(v, lo), hi)


def _roofs(ceiling: Dict[str, Any]) -> Tuple[Optional[float], Optional[float]]:
    """The device's peak (TFLOP/s, the FLOPs' dtype) and bandwidth (GB/s), as the rows' roof shares
    imply them (each share is of one of the two)."""
    peak = ceiling.get("peak_tflops") or None
    bandwidth = None
    for r in ceiling["ops"]:
        if r["roof_share"] > 0 and r["bound"] == "memory" and bandwidth is None:
            bandwidth = r["gb_per_s"] / r["roof_share"]
        if r["roof_share"] > 0 and r["bound"] == "compute" and peak is None:
            peak = r["tflops"] / r["roof_share"]
    return peak, bandwidth


def section(summary: Dict[str, Any], limit: int = 12) -> str:
    """The ceiling's heading, MFU line and roofline plot; "" without a ceiling."""
    c = summary.get("ceiling")
    if not c or not c.get("ops"):
        return ""
    points: List[Tuple[float, float, Dict[str, Any]]] = []
    for r in c["ops"][:limit]:
        if r["gflop_per_step"] > 0 and r["mb_per_step"] > 0 and r["tflops"] > 0:
            points.append((r["gflop_per_step"] * 1e3 / r["mb_per_step"], r["tflops"], r))
    svg = [f'<svg class="roofline" width="{_W}" height="{_H}" role="img" aria-label="roofline">']
    for decade in range(-1, 5):  # the axes' decades
        x, _ = _at(10.0**decade, _Y[0])
        svg.append(
            f'<line x1="{x:.1f}" y1="{_PAD}" x2="{x:.1f}" y2="{_H - _PAD}" stroke="#eee"/>'
            f'<text x="{x:.1f}" y="{_H - _PAD + 14}" font-size="10" text-anchor="middle">{10.0**decade:g}</text>'
        )
    for decade in range(-2, 5):
        _, y = _at(_X[0], 10.0**decade)
        svg.append(
            f'<line x1="{_PAD}" y1="{y:.1f}" x2="{_W - _PAD}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{_PAD - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{10.0**decade:g}</text>'
        )
    svg.append(
        f'<text x="{_W / 2}" y="{_H - 8}" font-size="11" text-anchor="middle">FLOP per byte</text>'
        f'<text x="12" y="{_H / 2}" font-size="11" transform="rotate(-90 12 {_H / 2})" '
        f'text-anchor="middle">TFLOP/s</text>'
    )
    peak, bandwidth = _roofs(c)
    if peak and bandwidth:
        xs = [10 ** (math.log10(_X[0]) + i * (math.log10(_X[1]) - math.log10(_X[0])) / 60) for i in range(61)]
        line = " ".join(
            "{:.1f},{:.1f}".format(*_at(x, _clamp(min(peak, bandwidth * x / 1e3), _Y[0], _Y[1]))) for x in xs
        )
        svg.append(f'<polyline points="{line}" fill="none" stroke="#c44" stroke-width="1.5"/>')
    for x, y, r in points:
        px, py = _at(_clamp(x, _X[0], _X[1]), _clamp(y, _Y[0], _Y[1]))
        hover = (
            f"{r['op']} ({r['dtype']}): {r['tflops']:.1f} TFLOP/s, {r['gb_per_s']:.0f} GB/s, "
            f"{r['ms_per_step']:.3f} ms a step"
            + (f", {100 * r['roof_share']:.0f}% of its {r['bound']} roof" if r["bound"] else "")
        )
        svg.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{3 + min(6.0, math.sqrt(r["ms_per_step"])):.1f}" '
            f'fill="#4e79a7" fill-opacity="0.6"><title>{html.escape(hover)}</title></circle>'
            f'<text x="{px + 6:.1f}" y="{py - 4:.1f}" font-size="10">{html.escape(r["op"][:32])}</text>'
        )
    svg.append("</svg>")
    if c.get("device") and c.get("mfu", 0) > 0:
        head = f"MFU {100 * c['mfu']:.1f}% on the {html.escape(c['device'])}"
    else:
        head = "No MFU: " + (
            "no device named" if not c.get("gpu") else f"steptrace's peaks table lacks the {html.escape(c['gpu'])}"
        )
    gain = (
        f" The bound: up to {100 * c['gain']:.0f}% shorter steps with {html.escape(c['gain_assumption'])}."
        if c.get("gain", 0) > 0
        else ""
    )
    return (
        f'<h2>The ceiling</h2><p class="note">{head}: {c["tflops"]:.1f} TFLOP/s, {c["gflop_per_step"]:.3g} GFLOP '
        f"a step ({html.escape(c['flops_from'])}); each op by its arithmetic intensity and achieved rate, under "
        f"the device's roofs (red); hover a point for its figures.{gain}</p>" + "".join(svg)
    )
