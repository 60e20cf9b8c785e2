"""torch.profiler traces through steptrace.load and the steptrace command, and steptrace's own
steps and phases annotated in a real profiler session's trace."""

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import steptrace
from conftest import TRACES  # noqa: E402

DATA = TRACES
NW0 = DATA / "resnet50_num_workers_0.pt.trace.json.gz"
NW4 = DATA / "resnet50_num_workers_4.pt.trace.json.gz"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "steptrace", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_load_reads_a_trace_by_its_content_whatever_its_name(tmp_path):
    renamed = tmp_path / "resnet.bin"
    shutil.copy(NW0, renamed)
    s = steptrace.load(renamed)
    assert s.label == "INPUT-BOUND"
    assert s.steps == 6  # step 5 shows no device work from before the trace: it counts
    d = s.to_dict()
    assert d["step_ms"]["mean"] == pytest.approx(
        (5 * 174.580 + 176.078) / 6, abs=0.001
    )  # the design's 6-10, and 5's range
    assert d["gpu"]["h2d"]["pageable_share"] == 1.0
    assert "num_workers" in d["diagnosis"]["advice"][0]
    assert "read from the torch.profiler trace" in d["backend"]["reason"]
    # plain JSON too, and the JSON it gives reads back as a summary
    plain = tmp_path / "resnet.json"
    plain.write_bytes(gzip.decompress(NW0.read_bytes()))
    assert steptrace.load(plain).to_dict()["phases"] == d["phases"]
    saved = tmp_path / "summary.json"
    s.to_json(saved)
    assert steptrace.load(saved).label == "INPUT-BOUND"


def test_every_command_takes_a_trace(tmp_path):
    show = cli("show", NW0)
    assert show.returncode == 0, show.stderr
    assert "INPUT-BOUND" in show.stdout and "from pageable memory" in show.stdout
    out = tmp_path / "t.json"
    trace = cli("trace", NW0, "-o", out)
    assert trace.returncode == 0, trace.stderr
    events = json.loads(out.read_text())["traceEvents"]
    assert any(e.get("name", "").startswith("GPU idle: input") for e in events)
    report = cli("report", NW4, "-o", tmp_path / "r.html")
    assert report.returncode == 0, report.stderr
    assert "COMPUTE-BOUND" in (tmp_path / "r.html").read_text()
    compare = cli("compare", NW0, NW4, "--max-regression", "10")
    assert compare.returncode == 0, compare.stderr
    assert "INPUT-BOUND" in compare.stdout and "COMPUTE-BOUND" in compare.stdout
    # compare's own rule, whatever the source: 6 and 5 steps that do not overlap, by a rank test
    assert "faster: step p50 -28.2%" in compare.stdout
    assert (
        "every step of the second side faster than the first's, over 6 and 5 steps (rank test: 99.8% confidence)"
        in compare.stdout
    )


def test_a_bad_trace_exits_2_with_a_message_naming_it(tmp_path):
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(NW0.read_bytes()[:300_000])
    empty_trace = tmp_path / "nosteps.json"
    empty_trace.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]}'
    )
    for path, words in ((cut, "truncated"), (empty_trace, "no host events")):
        p = cli("show", path)
        assert p.returncode == 2, p.stderr
        assert str(path) in p.stderr and words in p.stderr
        assert "Traceback" not in p.stderr
    with pytest.raises(ValueError, match="no host events"):
        steptrace.load(empty_trace)
    with pytest.raises(ValueError, match="no host range named"):
        steptrace.load(NW0, step="no_such_range")


torch = pytest.importorskip("torch")


def _loop_under_profiler(trace_path: Path, annotate: bool) -> dict:
    """A CPU loop of 12 steps under torch.profiler (4 recorded), steptrace recording too. Returns
    each step's fetch and compute time in ms, stamped by perf_counter around them (the truth)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    t = steptrace.Tracer(warmup_steps=1, print_at_exit=False)
    data = [torch.randn(64, 64) for _ in range(12)]
    truth = {"input": [], "compute": []}

    def slow_loader():
        for x in data:
            start = time.perf_counter()
            time.sleep(0.02)  # a 20 ms fetch
            truth["input"].append((time.perf_counter() - start) * 1e3)
            yield x

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=6, warmup=1, active=4, repeat=1)) as prof:
        for x in t.steps(slow_loader()) if annotate else slow_loader():
            with t.phase("compute"):
                start = time.perf_counter()
                end = start + 0.01
                while time.perf_counter() < end:
                    x = x @ x
                    x = x / x.norm()
                truth["compute"].append((time.perf_counter() - start) * 1e3)
            prof.step()
    prof.export_chrome_trace(str(trace_path))
    return truth


def test_steptrace_phases_in_a_profiler_trace_are_read_exactly(tmp_path):
    from steptrace._profiler import annotate as _annotate

    path = tmp_path / "annotated.json"
    truth = _loop_under_profiler(path, annotate=True)
    # outside the session the scopes are the C++ ones again: nothing is paid
    assert not _annotate.active
    assert "__enter__" not in steptrace._tracer.scopes._PhaseScope.__dict__
    names = {e.get("name") for e in json.loads(path.read_text())["traceEvents"]}
    assert {"steptrace:step", "steptrace:input", "steptrace:compute"} <= names
    read = steptrace.load(path).to_dict()
    assert "steptrace's own annotations" in read["backend"]["reason"]
    assert read["steps"] >= 2
    ph = read["phases"]
    # the sleeps are input and the spins compute, within what perf_counter stamped beside them
    # (whichever steps the profiler kept: a preempted sleep runs long, so the bounds are each
    # phase's shortest and longest stamped step)
    for phase in ("input", "compute"):
        assert min(truth[phase]) - 0.5 <= ph[phase]["mean_ms"] <= max(truth[phase]) + 2, (
            phase,
            ph[phase],
            truth[phase],
        )
    assert read["diagnosis"]["label"] == "INPUT-BOUND"


def test_a_trace_without_steptrace_uses_the_op_rules(tmp_path):
    path = tmp_path / "plain.json"
    _loop_under_profiler(path, annotate=False)
    read = steptrace.load(path).to_dict()
    assert "own annotations" not in read["backend"]["reason"]
    assert "no GPU activity" in read["backend"]["reason"]
    assert read["gpu"] is None
    # no DataLoader op names the 20 ms sleeps: they are time in no op, `other`; the spins are ops
    assert read["phases"]["other"]["mean_ms"] >= 18
    assert read["phases"]["compute"]["mean_ms"] >= 5


_CYCLES = """
import sys, torch, torch.profiler as tp
m = torch.nn.Linear(128, 128)
with tp.profile(schedule=tp.schedule(wait=1, warmup=1, active=2, repeat=int(sys.argv[2])),
                on_trace_ready=tp.tensorboard_trace_handler(sys.argv[1])) as p:
    for i in range(int(sys.argv[3])):
        m(torch.randn(32, 128)).sum().backward()
        p.step()
"""


def _profiler_steps(folder: Path) -> list:
    """Each file's ProfilerStep durations in ms, read straight from the JSON (the truth), less the
    closing stubs: ranges inside which no op began."""
    out = []
    for f in sorted(folder.iterdir()):
        events = [e for e in json.loads(f.read_text())["traceEvents"] if e.get("ph") == "X"]
        for s in (e for e in events if e["name"].startswith("ProfilerStep#")):
            inside = [e for e in events if e is not s and s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
            if inside:
                out.append(s["dur"] / 1e3)
    return out


def test_a_tensorboard_trace_handler_folder_of_cycles_is_one_run(tmp_path):
    # 5 cycles of 2 active steps, the last one ended by the loop's end: its second step a stub
    folder = tmp_path / "tb"
    subprocess.run(
        [sys.executable, "-c", _CYCLES, str(folder), "5", "19"], check=True, capture_output=True, timeout=300
    )
    assert len(list(folder.iterdir())) == 5
    truth = _profiler_steps(folder)
    s = steptrace.load(folder)
    d = s.to_dict()
    assert "ranks" not in d and s.rank is None  # one process, never 5 ranks
    assert s.steps + d["warmup_steps"] == len(truth) == 9
    assert [c["steps"] + c["warmup_steps"] for c in d["cycles"]] == [2, 2, 2, 2, 1]
    if d["warmup_steps"] == 0:  # host-only traces show no warm-up evidence: every step counts
        assert d["step_ms"]["mean"] == pytest.approx(sum(truth) / len(truth), abs=0.002)
        assert d["step_ms"]["max"] == pytest.approx(max(truth), abs=0.001)
    assert "closing stub" in d["backend"]["reason"]
    shown = cli("show", folder)
    assert shown.returncode == 0, shown.stderr
    assert "cycles     5 torch.profiler cycles of one process" in shown.stdout
    assert "rank" not in shown.stdout.split("cycles")[0]  # no "rank 0 of 5", no ranks table


def test_two_processes_cycles_in_one_folder_are_two_ranks_of_their_cycles(tmp_path):
    folder = tmp_path / "tb"
    for _ in range(2):  # two processes, one folder: each its own pid
        subprocess.run(
            [sys.executable, "-c", _CYCLES, str(folder), "3", "12"], check=True, capture_output=True, timeout=300
        )
    assert len(list(folder.iterdir())) == 6
    d = steptrace.load(folder).to_dict()
    rows = d["ranks"]["rows"]
    assert len(rows) == 2 and [r["steps"] for r in rows] == [6, 6]
    # a copy of one cycle is the same process at the same time: no cycle of it, a rank of its own
    one = sorted(folder.iterdir())[0]
    shutil.copy(one, tmp_path / "copy.json")
    pair = steptrace.load([one, tmp_path / "copy.json"]).to_dict()
    assert len(pair["ranks"]["rows"]) == 2 and "cycles" not in pair


def test_copies_of_one_trace_are_read_once_each(tmp_path, monkeypatch):
    """Copies share the writer's pid but overlap in time (their trace.span_ns): ranks of their own,
    never read a second time as one process's cycles."""
    from steptrace._traces import job as _job

    again = []
    monkeypatch.setattr(_job._core, "read_cycles", lambda *a: again.append(a))
    for i in range(3):
        shutil.copy(NW0, tmp_path / f"copy{i}.json.gz")
    d = steptrace.load(tmp_path).to_dict()
    assert len(d["ranks"]["rows"]) == 3 and again == []
    first, last = map(int, steptrace.load(NW0).to_dict()["facts"]["trace.span_ns"].split())
    assert 0 <= first < last

    class Said:  # a saved summary's facts are the file's: a span that is not two numbers is none
        def __init__(self, span):
            self.span = span

        def fact(self, key):
            return self.span

    assert [_job._span(Said(v)) for v in (None, "", "7", "a b", "-1 5", "3 9")] == [None] * 5 + [(3, 9)]
    assert _job._overlap([("a", Said("0 10")), ("b", Said("5 20"))])
    assert not _job._overlap([("a", Said("0 10")), ("b", Said("10 20")), ("c", Said("bad"))])


def test_cycles_given_as_pipes_are_read_once_each_never_waited_on(tmp_path):
    """Pipes cannot be read a second time: two cycles of one process given as FIFOs are two runs
    of a job, read at once, never a wait on a writer that is gone."""
    import os
    import threading

    folder = tmp_path / "tb"
    subprocess.run([sys.executable, "-c", _CYCLES, str(folder), "2", "9"], check=True, capture_output=True, timeout=300)
    files = sorted(folder.iterdir())
    pipes = []
    for i, f in enumerate(files):
        pipe = tmp_path / f"cycle{i}.json"
        os.mkfifo(pipe)
        threading.Thread(target=lambda p=pipe, f=f: p.write_bytes(f.read_bytes()), daemon=True).start()
        pipes.append(pipe)
    proc = cli("show", *pipes)
    assert proc.returncode == 0, proc.stderr
    assert "ranks      2 of 2 read from files" in proc.stdout
    assert "cycles of one process" not in proc.stdout


def test_facts_known_where_a_trace_is_read_reach_its_advice():
    """A trace holds no core count: read with the facts of the process reading it (a capture read
    back where it was made), its loader advice is that machine's; facts the trace has are kept."""
    from steptrace import _core

    plain = json.loads(_core.read_file(os.fsencode(str(NW0))).json())
    told = json.loads(_core.read_file(os.fsencode(str(NW0)), "", "", [("host.cpus", "2")]).json())
    assert plain["diagnosis"]["label"] == told["diagnosis"]["label"] == "INPUT-BOUND"
    assert "not above the machine's core count" in plain["diagnosis"]["advice"][0], plain["diagnosis"]["advice"]
    assert "on this 2-core machine try num_workers=2" in told["diagnosis"]["advice"][0], told["diagnosis"]["advice"]
    assert told["facts"]["host.cpus"] == "2" and "host.cpus" not in plain["facts"]
