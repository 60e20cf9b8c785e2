"""The flight recorder, the `steptrace` command, the HTML report, the live view and windows.

Ground truth: step lengths stamped with time.perf_counter beside the records; synthetic
summaries (fixed percentiles) for `compare`, whose verdict must not depend on the machine."""

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

import pytest

import steptrace
from conftest import cli
from screenshots import needs_chromium, screenshot


def check_trace(doc):
    """Every event is well-formed; complete slices on one track nest; returns the slices."""
    assert isinstance(doc["traceEvents"], list)
    tracks = defaultdict(list)
    slices = []
    for e in doc["traceEvents"]:
        assert isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        assert e["ph"] in ("M", "X"), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index"), e
            continue
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0, e
        tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        slices.append(e)
    for xs in tracks.values():
        xs.sort(key=lambda x: (x[0], -x[1]))
        open_ends = []
        for b, end in xs:
            while open_ends and open_ends[-1] <= b:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-3, "a slice crosses its parent's end"
            open_ends.append(end)
    return slices


OUTLIER = """
    import json, sys, time
    import steptrace
    steptrace.configure(warmup_steps=5)
    slow_truth = None
    for i in steptrace.steps(range(10_000)):
        with steptrace.phase("compute"):
            t0 = time.perf_counter()
            if i == 6_000:
                time.sleep(0.3)  # the outlier: far beyond any preemption (32 ms ones were seen), 1000x the others
                slow_truth = (time.perf_counter() - t0) * 1e3
            else:
                while time.perf_counter() - t0 < 0.0002:
                    pass
    json.dump({"slow_ms": slow_truth}, open(sys.argv[0] + ".truth", "w"))
"""


@pytest.fixture(scope="module")
def outlier_run(tmp_path_factory):
    """10,000 steps, step 6,000 at least 50x slower; summary, trace and HTML written at exit."""
    d = tmp_path_factory.mktemp("outlier")
    script = d / "run.py"
    import textwrap

    script.write_text(textwrap.dedent(OUTLIER))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    env.update(
        STEPTRACE_JSON=str(d / "run.json"),
        STEPTRACE_TRACE=str(d / "exit.trace.json"),
        STEPTRACE_HTML=str(d / "exit.html"),
        STEPTRACE_PRINT_AT_EXIT="never",
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    truth = json.loads((d / "run.py.truth").read_text())
    return d, truth["slow_ms"]


def test_the_timeline_keeps_the_50x_step_with_its_phases(outlier_run):
    d, slow_ms = outlier_run
    run = json.loads((d / "run.json").read_text())
    assert run["steps"] == 10_000 - 5
    p50 = run["step_ms"]["p50"]
    assert slow_ms >= 50 * p50 * 0.9, (slow_ms, p50)
    kept = {s["index"]: s for s in run["timeline"]["steps"]}
    assert 6_000 in kept, sorted(kept)
    slow = kept[6_000]
    assert slow["slowest"] and not slow["recent"]
    compute = [p for p in slow["phases"] if p["name"] == "compute"]
    assert len(compute) == 1
    measured = compute[0]["end_ms"] - compute[0]["begin_ms"]
    assert slow_ms * 0.95 - 0.05 <= measured <= slow_ms * 1.05 + 0.5, (measured, slow_ms)
    assert slow["step_ms"] >= measured
    # Recent: the last 64 steps of the thread; slowest: 8. Bounded JSON whatever the run's length.
    assert sum(s["recent"] for s in kept.values()) == 64
    assert sum(s["slowest"] for s in kept.values()) == 8
    size = (d / "run.json").stat().st_size
    print(f"summary JSON for 10,000 steps: {size} bytes; flight recorder {run['timeline']['bytes']} bytes")
    assert size < 400_000
    assert len(run["series"]["points"]) <= 240
    assert sum(p["steps"] for p in run["series"]["points"]) == run["steps"]


def test_steptrace_trace_output_loads_and_is_well_formed(outlier_run, tmp_path):
    d, slow_ms = outlier_run
    out = tmp_path / "trace.json"
    proc = cli("trace", d / "run.json", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "Perfetto" in proc.stdout
    doc = json.loads(out.read_text())
    slices = check_trace(doc)
    steps = [e for e in slices if e["cat"].startswith("step")]
    # One slice per kept step: a step both recent and among the slowest (a preempted step near the
    # end of the run, on a busy machine) is drawn once, so the count is the union, 64 to 72.
    kept = json.loads((d / "run.json").read_text())["timeline"]["steps"]
    assert 64 < len(kept) <= 64 + 8
    assert len(steps) == len(kept)
    assert sorted(e["args"]["index"] for e in steps) == sorted(s["index"] for s in kept)
    slow = [e for e in steps if e["args"]["index"] == 6_000]
    assert len(slow) == 1 and "slowest" in slow[0]["name"]
    assert slow[0]["dur"] >= slow_ms * 1000 * 0.95  # microseconds
    # The file written at exit (trace_path) is the same trace.
    assert json.loads((d / "exit.trace.json").read_text()) == doc


def test_summary_to_trace_matches_the_command(outlier_run, tmp_path):
    d, _ = outlier_run
    s = steptrace.load(d / "run.json")
    assert json.loads(s.to_trace(tmp_path / "t.json")) == json.loads((d / "exit.trace.json").read_text())


def test_show_prints_the_table(outlier_run):
    d, _ = outlier_run
    out = cli("show", d / "run.json")
    assert out.returncode == 0
    assert "slowest step: 6000 of thread 0" in out.stdout


@needs_chromium
def test_the_html_report_renders_its_chart_in_headless_chromium(outlier_run, tmp_path):
    d, _ = outlier_run
    html = d / "exit.html"  # written at exit by html_path
    text = html.read_text()
    for fetches in ("<script", "<link", "src=", "url(", "@import"):  # opens offline: it fetches nothing
        assert fetches not in text
    width, height, rows = screenshot(html, tmp_path / "shot.png", 1000, 700)
    from steptrace._report import html as _html

    series = steptrace.load(d / "run.json").to_dict()["series"]
    colour = _html._colours(series["phases"])["compute"]
    compute = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))

    # The chart's signature: a row crossed by many separate bars (at least 120 points for 10,000
    # steps), which the slowest steps' solid bars below it, one per row, cannot fake.
    def bars(row):
        xs = [x for x, px in enumerate(row) if px == compute]
        runs = sum(1 for x, px in enumerate(row) if px == compute and (x == 0 or row[x - 1] != compute))
        return runs, (xs[-1] - xs[0] if xs else 0)

    most, span = max(bars(row) for row in rows)
    assert most >= 100, f"the chart's bars are not in the screenshot (at most {most} bars in a row)"
    assert span > 600, "the bars span the chart"


def test_the_html_report_has_a_header_ticks_and_one_step_numbering(outlier_run):
    d, _ = outlier_run
    summary = steptrace.load(d / "run.json")
    doc = summary.to_dict()
    text = summary.to_html()
    header = re.search(r'<p class="header">(.*?)</p>', text).group(1)
    assert f"{doc['steps']} steps on 1 thread" in header and "steps/s" in header and "report made" in header
    rate = float(re.search(r"([0-9.]+) steps/s", header).group(1))
    assert rate == pytest.approx(doc["steps"] / (doc["wall_ms"] / 1000), rel=0.01)
    ticks = re.findall(r'<line class="tick"[^>]*/><text[^>]*>(\d+)</text>', text)
    assert len(ticks) == 5 and ticks == sorted(ticks, key=int)
    # One numbering: the chart's steps as the loop ran them, warm-up included, as the slowest
    # steps below are numbered; the planted outlier is step 6000 in both.
    assert int(ticks[0]) == doc["warmup_steps"]
    assert int(ticks[-1]) <= doc["steps"] + doc["warmup_steps"]
    assert "steps numbered as the loop ran them" in text
    assert "white-space: pre;" in text and "overflow-x: auto" in text  # columns kept; long lines scroll, never cut


def test_live_prints_about_one_line_a_second_and_appends_windows(run_python, tmp_path):
    jsonl = tmp_path / "windows.jsonl"
    proc = run_python(
        """
        import time, steptrace
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 5.2:
            with steptrace.step():
                with steptrace.phase("compute"):
                    time.sleep(0.01)
        print(steptrace.summary().steps)
    """,
        env={"STEPTRACE_LIVE": "1", "STEPTRACE_JSONL": str(jsonl), "STEPTRACE_PRINT_AT_EXIT": "never"},
    )
    lines = [line for line in proc.stderr.splitlines() if line.startswith("steptrace live")]
    # Windows end on the wall clock's seconds: a first window that began late in its second is a
    # short one, and the run's last, cut by its end, is another.
    assert 4 <= len(lines) <= 7, proc.stderr
    assert "step p50" in lines[-1] and "compute" in lines[-1]
    windows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert len(windows) == len(lines)
    assert all(w["schema"] == "steptrace.summary/1" and "timeline" not in w for w in windows)
    assert all(w["backend"]["host_clock"] and w["backend"]["reason"] for w in windows)  # as window() has it
    assert sum(w["steps"] for w in windows) <= int(proc.stdout.strip())


def test_windows_leave_the_whole_run_and_render_as_prometheus(tracer):
    from prometheus_client.parser import text_string_to_metric_families

    for _ in range(30):
        with tracer.step():
            with tracer.phase("compute"):
                pass
    w1 = tracer.window()
    for _ in range(10):
        with tracer.step():
            pass
    w2 = tracer.window()
    assert (w1.steps, w2.steps, tracer.summary().steps) == (30, 10, 40)
    assert tracer.window().steps == 0
    families = {f.name: f for f in text_string_to_metric_families(w1.prometheus("app"))}
    steps = families["app_step_seconds"]
    assert steps.type == "summary"
    by_name = defaultdict(dict)
    for sample in steps.samples:
        by_name[sample.name][sample.labels.get("quantile")] = sample.value
    d = w1.to_dict()
    assert by_name["app_step_seconds_count"][None] == 30
    assert by_name["app_step_seconds"]["0.5"] == pytest.approx(d["step_ms"]["p50"] / 1e3)
    share = {s.labels["phase"]: s.value for s in families["app_phase_share"].samples}
    assert share["compute"] == pytest.approx(d["phases"]["compute"]["share"])
    with pytest.raises(ValueError, match="not a Prometheus metric name prefix"):
        w1.prometheus("1x")


def test_time_set_aside_is_in_the_series_point_that_follows_it_and_marked_on_the_chart(tmp_path):
    tracer = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
    for i in range(30):
        if i == 20:
            with tracer.exclude("validation"):
                time.sleep(0.002)
        with tracer.step():
            with tracer.exclude("checkpoint") if i == 25 else contextlib.nullcontext():
                time.sleep(0.001)
    summary = tracer.summary()
    path = tmp_path / "run.json"
    summary.to_json(path)
    doc = steptrace.load(path).to_dict()  # and back from the file
    points = doc["series"]["points"]
    assert len(points) == 30 and doc["series"]["steps_per_point"] == 1
    marked = {p["first_step"]: p["set_aside_ms"] for p in points if p["set_aside_ms"] > 0}
    assert sorted(marked) == [20, 25]  # before step 20; inside step 25
    assert marked[20] == pytest.approx(doc["set_aside"]["validation"]["total_ms"], rel=1e-9, abs=1e-6)
    assert marked[25] == pytest.approx(doc["set_aside"]["checkpoint"]["total_ms"], rel=1e-9, abs=1e-6)
    text = steptrace.load(path).to_html()
    marks = re.findall(r'<path class="aside"[^>]*><title>([^<]*)</title>', text)
    assert len(marks) == 2
    assert "between the end of step 19 and the end of step 20" in marks[0]
    assert "▼ marks time set aside" in text


def test_one_colour_per_phase_in_every_report_and_a_window_reads_as_a_window(tmp_path):
    from steptrace._report import html as _html

    # two runs whose phases come in different orders: each phase keeps its colour
    a = _html._colours(["input", "compute", "decode", "other"])
    b = _html._colours(["decode", "wait", "compute", "augment", "input", "other"])
    for name in ("input", "compute", "decode", "other"):
        assert a[name] == b[name]
    assert len({a["input"], a["compute"], b["wait"], a["other"]}) == 4

    # a trace without steps: one window, never "per step", one tick, its phases with their ms
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000 + 100 * i, "dur": 80}
        for i in range(5)
    ]
    trace = tmp_path / "window.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    s = steptrace.load(trace)
    text = s.to_html()
    assert "Time per step" not in text and "The slowest steps" not in text
    assert "Time in each phase of the window" in text
    assert re.search(r'class="window-bar"><span[^>]*>compute 0\.400 ms</span>', text), text
    assert "slowest step:" not in str(s) and "the window is kept with its phases" in str(s)


def test_the_slowest_steps_print_their_phases_ms_where_they_fit(outlier_run):
    d, slow_ms = outlier_run
    text = steptrace.load(d / "run.json").to_html()
    slowest = text[text.index("<h2>The slowest steps</h2>") :]
    labels = re.findall(r'title="compute ([0-9.]+) ms">([0-9.]+) ms</span>', slowest)
    assert labels and all(title == shown for title, shown in labels)  # visible, no hover needed
    assert max(float(ms) for _, ms in labels) == pytest.approx(slow_ms, rel=0.05)


def test_the_per_step_chart_labels_every_step_when_there_are_few():
    """A 6-step run: each bar has its step's label (five ticks left the slowest one's out)."""
    t = steptrace.Tracer(warmup_steps=0, print_at_exit="never")
    for i in range(6):
        with t.step():
            with t.phase("compute"):
                time.sleep(0.004 if i == 3 else 0.001)
    page = t.summary().to_html()
    chart = page[page.index('aria-label="time per step in each phase over the run"') :]
    chart = chart[: chart.index("</svg>")]
    labels = re.findall(r'<line class="tick"[^>]*/><text [^>]*>(\d+)</text>', chart)
    assert labels == [str(i) for i in range(6)], labels
