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
