"""A summary in a notebook and in a terminal REPL: Jupyter displays ``_repr_html_``, the report
as one element whose style touches nothing else on the page; a REPL shows ``repr``, the table."""

import re
from pathlib import Path

import steptrace

TRACE = Path(__file__).resolve().parent.parent / "data" / "profiler_traces" / "resnet50_num_workers_0.pt.trace.json.gz"


def test_a_summary_displays_as_its_report_in_a_notebook_and_its_table_in_a_repl(tracer):
    for _ in range(8):
        with tracer.step():
            with tracer.phase("compute"):
                pass
    for s in (tracer.summary(), steptrace.load(TRACE)):
        cell = s._repr_html_()
        assert cell.startswith('<div class="steptrace-report"><style>') and cell.endswith("</div>")
        assert "<html" not in cell and "<body" not in cell
        assert 'class="header"' in cell and 'id="phases-chart"' in cell  # the report's header and chart
        style = cell[cell.index("<style>") + 7:cell.index("</style>")]
        for rule in filter(None, (r.strip() for r in style.split("}"))):
            selectors = rule.split("{")[0]
            assert all(sel.strip().startswith("div.steptrace-report") for sel in selectors.split(",")), rule
        assert repr(s) == s._core.table()  # the REPL shows the table
    assert "What each fix can save" in steptrace.load(TRACE)._repr_html_()
    assert re.search(r"INPUT-BOUND", steptrace.load(TRACE)._repr_html_())


def test_the_reports_gpu_lane_draws_the_idle_gaps_the_timeline_export_computes():
    """Beside each slowest step the report draws the GPU: its idle gaps are the timeline export's
    own (cut along the innermost host phase), one span each, not a second computation."""
    import json

    s = steptrace.load(TRACE)
    d = s.to_dict()
    slowest = {(x["thread"], x["index"]) for x in d["timeline"]["steps"] if x["slowest"]}
    gaps = [e for e in json.loads(s.to_trace())["traceEvents"]
            if e.get("cat") == "idle" and (e["args"]["thread"], e["args"]["step"]) in slowest]
    page = s.to_html()
    assert gaps and page.count("GPU idle while the host was in ") == len(gaps)
    assert page.count("GPU idle while the host was in input") == sum(1 for e in gaps if e["args"]["host_phase"] == "input")

