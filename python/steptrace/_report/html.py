"""The HTML report: one self-contained file that opens offline (no script, no fetch).

The table and the diagnosis as the terminal shows them, a bar per cause with the most its fix
could save, a stacked chart of each phase's time per step over the whole run (the summary's
``series``), the slowest steps the flight recorder kept, each drawn along its own time axis with
the GPU beside it where there is a device view (busy, and idle in the colour of the host phase
it idled in), what the GPU spent its time on (sorted bars by kernel, by launching op and by kind,
where the summary has a kernel table), and the time set aside (also marked on the chart).
"""

import html
import json
import zlib
from typing import Any, Dict, List, Sequence

from .._core import SHORT_KERNEL_US, short_kernel_name
from .._core import format_ms as _ms  # the table's rule for times: never an exponent
from . import roofline as _roofline

# One colour per phase in every report: the built-in phases fixed, a custom phase by its name, so
# `compute` is the same green in every report, whatever else the run had.
_BUILT_IN = {
    "input": "#f28e2b",
    "h2d": "#edc948",
    "compute": "#59a14f",
    "wait": "#e15759",
    "collective": "#ff9da7",
    "other": "#bab0ac",
}
_CUSTOM = ["#4e79a7", "#76b7b2", "#b07aa1", "#9c755f", "#86bcb6", "#d37295", "#a0cbe8", "#8cd17d", "#499894"]


def colour(name: str) -> str:
    return _BUILT_IN.get(name) or _CUSTOM[zlib.crc32(name.encode("utf-8", "surrogatepass")) % len(_CUSTOM)]


def _colours(names: Sequence[str]) -> Dict[str, str]:
    return {name: colour(name) for name in names}


def _legend(colours: Dict[str, str]) -> str:
    items = "".join(
        f'<span class="key"><i style="background:{c}"></i>{html.escape(n)}</span>' for n, c in colours.items()
    )
    return f'<div class="legend">{items}</div>'


def _step_offset(summary: Dict[str, Any]) -> int:
    """What turns the series' counted-step numbers into the loop's own (the numbering the slowest
    steps use: warm-up included): exact on one thread with no failed step; else 0, and the chart
    says it counts counted steps."""
    one_thread = summary.get("threads", 0) == 1 and summary.get("failed_steps", 0) == 0
    return int(summary.get("warmup_steps", 0)) if one_thread else -1


FEW_BARS = 12  # a per-step chart of this many bars or fewer labels each


def _series_chart(series: Dict[str, Any], colours: Dict[str, str], offset: int = 0) -> str:
    """Stacked bars, one per point of the series: mean ms per step in each phase. `offset`: added
    to the series' step numbers (-1: none can be, they are counted steps)."""
    counted = offset < 0
    offset = max(offset, 0)
    points = series.get("points", [])
    phases = series.get("phases", [])
    if not points:
        return "<p>No steps to chart.</p>"
    width, height, left, bottom, pad = 900, 260, 56, 28, 16
    top = max(sum(p["phase_ms"]) for p in points) or 1.0
    bar = (width - left) / len(points)
    parts = [
        f'<svg id="phases-chart" width="{width}" height="{height + bottom + pad}" '
        f'role="img" aria-label="time per step in each phase over the run"><g transform="translate(0,{pad})">'
    ]
    for k in range(5):  # gridlines with their ms
        y = height - height * k / 4
        parts.append(
            f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_ms(top * k / 4)}</text>'
        )
    for i, p in enumerate(points):
        y = height
        x = left + i * bar
        first = p["first_step"] + offset
        title = f"steps {first}–{first + p['steps'] - 1}: {_ms(p['step_ms'])} ms"
        for name, ms in zip(phases, p["phase_ms"]):
            h = height * ms / top
            if h <= 0:
                continue
            y -= h
            parts.append(
                f'<rect class="bar" x="{x:.2f}" y="{y:.2f}" width="{max(bar - 0.5, 0.5):.2f}" '
                f'height="{h:.2f}" fill="{colours[name]}"><title>{html.escape(title)}; '
                f"{html.escape(name)} {_ms(ms)} ms</title></rect>"
            )
    # Every bar labelled when there are few (a 6-step trace's slowest went unlabelled), else five.
    ticks = (
        list(range(len(points)))
        if len(points) <= FEW_BARS
        else sorted({min(len(points) - 1, round(k * (len(points) - 1) / 4)) for k in range(5)})
    )
    for i in ticks:  # ticks along the steps: each at the first step of the bar under it, each bar once
        x = left + (i + 0.5) * bar
        anchor = "middle" if len(ticks) == 1 else "start" if i == ticks[0] else "end" if i == ticks[-1] else "middle"
        parts.append(
            f'<line class="tick" x1="{x:.1f}" x2="{x:.1f}" y1="{height}" y2="{height + 4}" stroke="#555"/>'
            f'<text x="{x:.1f}" y="{height + 16}" text-anchor="{anchor}">{points[i]["first_step"] + offset}</text>'
        )
    marked = 0
    for i, p in enumerate(points):  # set-aside time: a mark above the bar that came next
        aside = p.get("set_aside_ms", 0)
        if aside > 0:
            marked += 1
            x = left + (i + 0.5) * bar
            first, last = p["first_step"] + offset, p["first_step"] + offset + p["steps"] - 1
            since = f"between the end of step {first - 1} and" if first > 0 else "before"
            parts.append(
                f'<path class="aside" d="M{x - 4:.1f},-12 L{x + 4:.1f},-12 L{x:.1f},-4 Z" fill="#222">'
                f"<title>{html.escape(_ms(aside))} ms set aside {since} the end of step {last} "
                f"(see Set aside below)</title></path>"
            )
    parts.append('<text x="4" y="-4">ms</text></g></svg>')
    per = series.get("steps_per_point", 1)
    note = f"each bar is the mean of {per} consecutive steps" if per > 1 else "one bar per step"
    note += (
        "; steps numbered as counted (after warm-up, failed steps left out)"
        if counted
        else "; steps numbered as the loop ran them (warm-up included), as below"
    )
    if marked:
        note += "; ▼ marks time set aside (validation, checkpoints, ...) in the bar's steps or just before them"
    return "".join(parts) + f'<p class="note">{note}; hover a bar or a mark for its figures.</p>'


# A colour per kernel kind, for the kernel chart (kinds are named in cpp/src/analysis/kernel_table.cpp).
_KINDS = {
    "gemm": "#4e79a7",
    "convolution": "#59a14f",
    "attention": "#b07aa1",
    "elementwise": "#f28e2b",
    "reduction": "#edc948",
    "collective": "#ff9da7",
    "copy": "#76b7b2",
    "memset": "#9c755f",
    "other": "#bab0ac",
}


def _bars(rows: List[tuple], scale: float) -> str:
    """Sorted horizontal bars: (label, colour, ms per step, share, hover text) each."""
    out = []
    for label, fill, ms, share, hover in rows:
        out.append(
            f'<tr title="{html.escape(hover)}"><td class="kname">{html.escape(label)}</td>'
            f'<td><div class="kbar" style="width:{max(1.0, 300 * share / scale):.1f}px;background:{fill}"></div></td>'
            f'<td class="num nowrap">{_ms(ms)} ms</td><td class="num">{100 * share:.1f}%</td></tr>'
        )
    return '<table class="kernels">' + "".join(out) + "</table>"


def _kernels(summary: Dict[str, Any], limit: int = 10) -> str:
    """What the GPU spent its time on: the kernels, the ops (live: the phases) that launched them
    and the kinds, each sorted by device time per step."""
    k = (summary.get("gpu") or {}).get("kernels")
    if not k or not k.get("kernels"):
        return ""
    kernels = k["kernels"][:limit]
    scale = max(r["busy_share"] for r in kernels)
    rows = [
        (
            short_kernel_name(r["name"]),
            _KINDS.get(r["kind"], _KINDS["other"]),
            r["ms_per_step"],
            r["busy_share"],
            f"{r['name']}: {r['kind']}, {r['calls_per_step']:.1f} calls a step, median {r['median_us']:.1f} us"
            + (", tensor cores" if r.get("tensor_core") else ""),
        )
        for r in kernels
    ]
    ops = k.get("ops", [])[:limit]
    op_rows = [
        (
            r["name"],
            "#8c8c8c",
            r["ms_per_step"],
            r["busy_share"],
            f"{r['name']}: {r['kernels_per_step']:.1f} kernels a step, "
            f"{r.get('short_kernels_per_step', 0):.1f} of at most {SHORT_KERNEL_US:.0f} us",
        )
        for r in ops
    ]
    kind_rows = [
        (r["kind"], _KINDS.get(r["kind"], _KINDS["other"]), r["ms_per_step"], r["busy_share"], r["kind"])
        for r in k.get("kinds", [])
    ]
    tensor = ""
    if k.get("gemm_named_share", 0) > 0:
        tensor = (
            f"; {100 * k['gemm_tensor_core_share']:.0f}% of the GEMM and convolution time on tensor cores "
            f"(of the {100 * k['gemm_named_share']:.0f}% whose kernel names tell)"
        )
    return (
        f'<h2>What the GPU spent its time on</h2><p class="note">Per step, of {_ms(k["ms_per_step"])} ms of '
        f"kernels, copies and memsets{tensor}; hover a bar for its calls. <code>steptrace show --kernels</code> "
        f"lists them all.</p><h3>By kernel</h3>{_bars(rows, scale)}"
        + (f"<h3>By the op that launched them</h3>{_bars(op_rows, max(r[3] for r in op_rows))}" if op_rows else "")
        + (f"<h3>By kind</h3>{_bars(kind_rows, max(r[3] for r in kind_rows))}" if kind_rows else "")
    )


def _gains(summary: Dict[str, Any]) -> str:
    """A bar per cause the diagnosis named: the most its fix could save."""
    gains = (summary.get("diagnosis") or {}).get("gains") or {}
    if not gains:
        return ""
    aside = summary.get("set_aside") or {}
    rows = []
    for cause, gain in gains.items():
        unit = "shorter run" if cause in aside else "shorter steps"
        rows.append(
            f'<tr><td>{html.escape(cause)}</td><td><div class="gain" style="width:{400 * gain:.1f}px"></div></td>'
            f'<td class="nowrap">up to {100 * gain:.0f}% {unit}</td></tr>'
        )
    return (
        '<h2>What each fix can save</h2><p class="note">An upper bound per cause, one at a time: with a device '
        "view, the GPU idle time while the host was in it; host-only, its share of the step; set aside, its "
        'share of the run.</p><table class="gains">' + "".join(rows) + "</table>"
    )


def idle_gaps(trace: str) -> Dict[tuple, List[tuple]]:
    """The GPU's idle gaps in each kept step, cut along the host's innermost phases, as the
    timeline export computes them (``Summary.to_trace``): {(thread, step): [(begin_ms, end_ms,
    phase)]}."""
    out: Dict[tuple, List[tuple]] = {}
    for e in json.loads(trace)["traceEvents"]:
        if e.get("cat") == "idle":
            a = e["args"]
            out.setdefault((a["thread"], a["step"]), []).append(
                (e["ts"] / 1000, (e["ts"] + e["dur"]) / 1000, a["host_phase"])
            )
    return out


def _window_bar(summary: Dict[str, Any], colours: Dict[str, str]) -> str:
    """A window's phases as one bar, each with its ms: one bar of a chart over steps says nothing."""
    phases = [(n, p["mean_ms"]) for n, p in (summary.get("phases") or {}).items() if p.get("mean_ms", 0) > 0]
    total = sum(ms for _, ms in phases) or 1.0
    cells = "".join(
        f'<span style="width:{100 * ms / total:.2f}%;background:{colours.get(n) or colour(n)}" '
        f'title="{html.escape(n)} {_ms(ms)} ms">{html.escape(n)} {_ms(ms)} ms</span>'
        for n, ms in phases
    )
    return f'<div class="window-bar">{cells}</div><p class="note">the whole window, by the phase the host was in.</p>'


def _slowest(
    timeline: Dict[str, Any],
    colours: Dict[str, str],
    idle: Dict[tuple, List[tuple]],
    limit: int = 8,
    window: bool = False,
) -> str:
    steps = sorted((s for s in timeline.get("steps", []) if s["slowest"] or window), key=lambda s: -s["step_ms"])[
        :limit
    ]
    if not steps:
        return "<p>The flight recorder kept no slowest steps.</p>"
    width = 600
    longest = max(s["end_ms"] - s["begin_ms"] for s in steps) or 1.0
    rows: List[str] = []
    with_device = any(s.get("device") is not None for s in steps)

    def span(a: float, b: float, s: Dict[str, Any], style: str, title: str, label: str = "") -> str:
        x = width * (a - s["begin_ms"]) / longest
        w = width * (b - a) / longest
        shown = html.escape(label) if label and w >= 8 * len(label) else ""  # printed where it fits: no hover needed
        return (
            f'<span style="left:{x:.1f}px;width:{max(w, 1):.1f}px;{style}" title="{html.escape(title)}">{shown}</span>'
        )

    for s in steps:
        track = f'<div class="track" style="width:{width * (s["end_ms"] - s["begin_ms"]) / longest:.1f}px">'
        cells = [track]
        for p in s["phases"]:
            if p["depth"] == 0:
                cells.append(
                    span(
                        p["begin_ms"],
                        p["end_ms"],
                        s,
                        f"background:{colours.get(p['name']) or colour(p['name'])}",
                        f"{p['name']} {_ms(p['end_ms'] - p['begin_ms'])} ms",
                        f"{_ms(p['end_ms'] - p['begin_ms'])} ms",
                    )
                )
        cells.append("</div>")
        if s.get("device") is not None:  # the GPU beside it: busy dark, idle in the host phase's colour
            cells.append(track.replace('class="track"', 'class="track gpu"'))
            for d in s["device"]:
                if d["kind"] not in ("sync", "memory"):
                    cells.append(span(d["begin_ms"], d["end_ms"], s, "background:#333", f"GPU busy: {d['kind']}"))
            for a, b, name in idle.get((s["thread"], s["index"]), []):
                cells.append(
                    span(
                        a,
                        b,
                        s,
                        f"background:{colours.get(name) or colour(name)};opacity:0.45",
                        f"GPU idle while the host was in {name}: {_ms(b - a)} ms",
                    )
                )
            cells.append("</div>")
        which = "the window" if window else f"thread {s['thread']}, step {s['index']}"
        rows.append(
            f'<tr><td class="nowrap">{which}</td><td class="num">{_ms(s["step_ms"])} ms</td>'
            f"<td>{''.join(cells)}</td></tr>"
        )
    unit = "window" if window else "step"
    what = (
        f"phases (outermost), along the {unit}; below, the GPU: busy dark, idle in the colour of the host phase "
        f"it idled in"
        if with_device
        else f"phases (outermost), along the {unit}"
    )
    return f'<table class="steps"><tr><th>{unit}</th><th>time</th><th>{what}</th></tr>' + "".join(rows) + "</table>"


def _set_aside(summary: Dict[str, Any]) -> str:
    rows = summary.get("set_aside") or {}
    if not rows:
        return "<p>No time was set aside.</p>"
    body = "".join(
        f'<tr><td>{html.escape(name)}</td><td class="num">{a["calls"]}</td><td class="num">{_ms(a["total_ms"])} ms</td>'
        f'<td class="num">{100 * a["run_share"]:.1f}%</td></tr>'
        for name, a in rows.items()
    )
    return f"<table><tr><th>name</th><th>calls</th><th>total</th><th>of the run</th></tr>{body}</table>"


def _captures(summary: Dict[str, Any]) -> str:
    """The run's captures on trouble: the steps each kept, why, what they read, and the trace."""
    rows = summary.get("captures") or []
    if not rows:
        return ""

    def steps(c: Dict[str, Any]) -> str:
        if c.get("retroactive"):
            return "kept " + ", ".join(str(i) for i in c.get("indices") or [])
        return f"{c['first_step']}-{c['last_step']}"

    body = "".join(
        f"<tr><td>{steps(c)}</td><td>{html.escape(c['reason'])}</td><td>{html.escape(c.get('label') or 'no steps read')}"
        f"</td><td><code>{html.escape(c['path'])}</code></td></tr>"
        for c in rows
    )
    return (
        f"<h2>Captures on trouble</h2><table><tr><th>steps</th><th>why</th><th>read as</th><th>trace</th></tr>"
        f"{body}</table>"
    )


_STYLE = """
body { font: 14px system-ui, sans-serif; margin: 24px; color: #222; max-width: 960px; }
pre { background: #f6f6f6; padding: 12px; font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; white-space: pre; overflow-x: auto; }
.header { color: #444; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.label { display: inline-block; padding: 2px 8px; background: #222; color: #fff; border-radius: 3px; }
svg text { font-size: 11px; fill: #555; }
.legend .key { margin-right: 14px; } .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
.note { color: #666; font-size: 12px; }
table { border-collapse: collapse; } td, th { padding: 3px 10px 3px 0; text-align: left; } .num { text-align: right; }
.nowrap { white-space: nowrap; }
.track { position: relative; height: 14px; background: #eee; }
.track.gpu { height: 8px; margin-top: 2px; background: #fff; }
.gain { height: 12px; background: #e15759; }
h3 { font-size: 14px; margin: 14px 0 4px; }
.kernels td.kname { max-width: 420px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.kbar { height: 12px; }
.window-bar { display: flex; height: 22px; width: 900px; } .window-bar span { font-size: 11px; line-height: 22px; color: #fff; overflow: hidden; white-space: nowrap; text-indent: 4px; }
.track span { position: absolute; top: 0; height: 14px; font-size: 10px; line-height: 14px; color: #fff; overflow: hidden; white-space: nowrap; text-indent: 3px; }
.track.gpu span { height: 8px; }
"""


def _header(summary: Dict[str, Any]) -> str:
    """One line: steps, threads, wall time, steps/s, where it ran (when the summary knows), and
    when the report was made."""
    import datetime

    steps, wall_s = summary.get("steps", 0), summary.get("wall_ms", 0) / 1000
    threads = summary.get("threads", 0)
    if summary.get("windows"):  # a trace without steps: its window, diagnosed as a step
        parts = [
            f"{steps} window{'' if steps == 1 else 's'} of a trace without steps (the whole trace)",
            f"{_ms(wall_s)} s long",
        ]
    else:
        parts = [
            f"{steps} steps on {threads} thread{'' if threads == 1 else 's'}",
            f"{_ms(wall_s)} s of wall time",
        ]  # as the table writes it
    if wall_s > 0 and steps and not summary.get("windows"):
        parts.append(f"{steps / wall_s:.1f} steps/s")
    rank = summary.get("rank")
    if rank:
        parts.append(
            f"rank {rank['rank']} of {rank['world_size']} on {rank.get('host') or '?'}, started "
            f"{rank.get('started_at') or '?'}"
        )
    backend = summary.get("backend") or {}
    parts.append("GPU: CUPTI" if backend.get("cupti") else "GPU: CUDA events" if backend.get("cuda") else "host only")
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f"report made {made}")
    return html.escape(" · ".join(parts))


def _scoped(style: str, scope: str) -> str:
    """The report's style with each rule scoped under `scope` (a notebook cell must not restyle the
    notebook): `body` becomes the scope itself."""
    rules = []
    for rule in style.strip().splitlines():
        # a line may hold several rules: "h1 { ... } h2 { ... }"
        chunks = [c for c in rule.split("}") if c.strip()]
        for chunk in chunks:
            sel, _, decl = chunk.partition("{")
            scoped = ", ".join(scope if s.strip() == "body" else f"{scope} {s.strip()}" for s in sel.split(","))
            rules.append(f"{scoped} {{{decl}}}")
    return "\n".join(rules)


def fragment(
    summary: Dict[str, Any], table: str, idle: Dict[tuple, List[tuple]], title: str = "steptrace report"
) -> str:
    """The same report as one element for a notebook cell (Jupyter's ``_repr_html_``): its style
    scoped to the report, nothing else on the page touched."""
    page = render(summary, table, idle, title)
    body = page[page.index("<body>") + len("<body>") : page.index("</body>")]
    scope = "div.steptrace-report"
    style = _scoped(_STYLE, scope) + f"\n{scope} {{ margin: 0; }}"  # the cell has its own margins
    return f'<div class="steptrace-report"><style>{style}</style>{body}</div>'


def render(summary: Dict[str, Any], table: str, idle: Dict[tuple, List[tuple]], title: str = "steptrace report") -> str:
    """The report for a summary (its dict, its table text, the GPU's idle gaps from its timeline
    export: ``idle_gaps``) as one HTML page."""
    diag = summary.get("diagnosis") or {}
    series = summary.get("series") or {}
    colours = _colours(series.get("phases") or [p for p in summary.get("phases", {})])
    window = bool(summary.get("windows"))  # a trace without steps: its window, never "per step"
    advice = "".join(f"<li>{html.escape(a)}</li>" for a in diag.get("advice") or [])
    header = _header(summary)
    memory = summary.get("host_memory")
    memory_line = (
        f"<p>Host resident memory at step ends: peak {memory['peak_mb']:.1f} MiB, "
        f"{memory['growth_mb']:+.1f} MiB over the run.</p>"
        if memory
        else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="header">{header}</p>
<p><span class="label">{html.escape(diag.get("label") or "no steps")}</span> {html.escape(diag.get("evidence") or "")}</p>
<ol>{advice}</ol>
{_gains(summary)}
<h2>{"Time in each phase of the window" if window else "Time per step in each phase, over the run"}</h2>
{_legend(colours)}
{_window_bar(summary, colours) if window else _series_chart(series, colours, _step_offset(summary))}
{memory_line}
{_kernels(summary)}
{_roofline.section(summary)}
<h2>{"The window along its time" if window else "The slowest steps"}</h2>
{_slowest(summary.get("timeline") or {}, colours, idle, window=window)}
<h2>Set aside</h2>
{_set_aside(summary)}
{_captures(summary)}
<h2>The summary</h2>
<pre>{html.escape(table)}</pre>
</body></html>
"""
