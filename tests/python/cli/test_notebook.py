"""A summary in a notebook and in a terminal REPL: Jupyter displays ``_repr_html_``, the report
as one element whose style touches nothing else on the page; a REPL shows ``repr``, the table."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import steptrace
from screenshots import measured, needs_chromium, screenshot
from steptrace._report import html as _html
from conftest import TRACES  # noqa: E402

TRACE = TRACES / "resnet50_num_workers_0.pt.trace.json.gz"


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
        style = cell[cell.index("<style>") + 7 : cell.index("</style>")]
        for rule in filter(None, (r.strip() for r in style.split("}"))):
            selectors = rule.split("{")[0]
            assert all(sel.strip().startswith("div.steptrace-report") for sel in selectors.split(",")), rule
        # the table keeps its columns whatever the notebook's own font: monospace, never wrapped
        pre = next(r for r in style.split("}") if r.strip().startswith("div.steptrace-report pre"))
        assert "monospace" in pre and "white-space: pre;" in pre, pre
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
    gaps = [
        e
        for e in json.loads(s.to_trace())["traceEvents"]
        if e.get("cat") == "idle" and (e["args"]["thread"], e["args"]["step"]) in slowest
    ]
    page = s.to_html()
    assert gaps and page.count("GPU idle while the host was in ") == len(gaps)
    assert page.count("GPU idle while the host was in input") == sum(
        1 for e in gaps if e["args"]["host_phase"] == "input"
    )


@needs_chromium
def test_a_notebook_run_headless_shows_the_report_and_chromium_draws_it(tmp_path):
    """A notebook executed by `jupyter nbconvert --execute`, as a user's would be: its last
    cell's output is the report (header and chart), and the page nbconvert makes of it draws the
    chart's bars in Chromium."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbconvert")
    pytest.importorskip("ipykernel")
    book = nbformat.v4.new_notebook()
    book.cells = [
        nbformat.v4.new_code_cell("import steptrace"),
        nbformat.v4.new_code_cell(f"steptrace.load({TRACE.name!r})"),
    ]
    shutil.copy(TRACE, tmp_path / TRACE.name)  # beside the notebook, as a user's trace would be
    source = tmp_path / "explore.ipynb"
    nbformat.write(book, source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    for to in ("notebook", "html"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "jupyter",
                "nbconvert",
                "--to",
                to,
                "--execute",
                "--ExecutePreprocessor.timeout=120",
                str(source),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
    ran = nbformat.read(tmp_path / "explore.nbconvert.ipynb", as_version=4)
    shown = ran.cells[1].outputs[0]["data"]
    cell = shown["text/html"]
    assert 'class="header"' in cell and 'id="phases-chart"' in cell  # the report's header and chart
    assert "INPUT-BOUND" in cell
    assert shown["text/plain"] == repr(steptrace.load(tmp_path / TRACE.name)).rstrip("\n").replace(
        f"{tmp_path}/", ""
    )  # the table, where HTML is not shown

    shot = tmp_path / "cell.png"
    _, _, rows = screenshot(tmp_path / "explore.html", shot, 1100, 1400)
    colours = _html._colours(steptrace.load(TRACE).to_dict()["series"]["phases"])
    drawn = {tuple(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in colours.values()}
    painted = sum(1 for row in rows for px in row if px in drawn)
    assert painted > 2000, f"the chart is not in the screenshot ({painted} pixels in its colours)"
    # The table keeps its columns under JupyterLab's own CSS (nbconvert's page carries it): ten
    # i's as wide as ten W's in the report's text box, and its lines never wrap.
    laid_out = measured(
        tmp_path / "explore.html",
        """
        const pre = document.querySelector('div.steptrace-report pre');
        const narrow = document.createElement('span'); narrow.textContent = 'iiiiiiiiii'; pre.appendChild(narrow);
        const wide = document.createElement('span'); wide.textContent = 'WWWWWWWWWW'; pre.appendChild(wide);
        return [narrow.getBoundingClientRect().width, wide.getBoundingClientRect().width,
                getComputedStyle(pre).whiteSpace].join(' ');""",
        tmp_path / "measured.html",
    )
    narrow, wide, wrap = laid_out.split()
    assert float(narrow) == pytest.approx(float(wide), rel=0.01) and float(narrow) > 0, laid_out
    assert wrap == "pre", laid_out
    keep = os.environ.get("STEPTRACE_KEEP_SCREENSHOT")  # docs/notebook.png is made this way
    if keep:
        shutil.copy(shot, keep)
