"""Names and rows that lie, tried as an attacker would: names from a trace (kernels, ops, the
GPU, the file's own name) cannot drive a terminal nor forge a table row in `show`, `show
--kernels` or `compare`; a summary whose phases do not fit inside its steps is refused by name;
a live rank row is believed only about the rank whose key it came from, and one row the core
cannot read is refused by its rank while the verdicts go on."""

import gzip
import json

import pytest

import steptrace
from steptrace import _core
from steptrace._live import rank_verdicts

from conftest import cli
from fake_store import Store
from conftest import TRACES  # noqa: E402

TRACE = TRACES / "hta_alexnet_benchmark.json.gz"
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[8m"  # retitle, clear, hide what follows


def hostile_trace(path, slow_kernel=1.0):
    """The real AlexNet trace with the GPU's, a kernel's and an op's names carrying escape
    sequences and a newline that would start a forged row; `slow_kernel` scales that kernel."""
    d = json.load(gzip.open(TRACE))
    d["deviceProperties"][0]["name"] = "A100" + ESCAPES
    kernels = [e for e in d["traceEvents"] if e.get("cat") == "kernel"]
    heavy = max({e["name"] for e in kernels}, key=lambda n: sum(e["dur"] for e in kernels if e["name"] == n))
    for e in d["traceEvents"]:
        if e.get("name") == heavy:
            e["name"] = "evil" + ESCAPES + "\nFORGED ROW  99%  evil"
            if e.get("cat") == "kernel":
                e["dur"] = e["dur"] * slow_kernel
        elif e.get("cat") == "cpu_op" and e.get("name") == "aten::conv2d":
            e["name"] = "aten::conv2d" + ESCAPES
    with gzip.open(path, "wt") as f:
        json.dump(d, f)
    return path


def assert_inert(proc):
    shown = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), shown
    assert "\x1b" not in shown and "\x07" not in shown, repr(shown[:2000])
    assert not any(line.lstrip().startswith("FORGED ROW") for line in shown.splitlines()), shown


def test_names_from_a_trace_reach_no_terminal_raw_in_show_kernels_and_compare(tmp_path):
    base = hostile_trace(tmp_path / ("base" + ESCAPES + ".json.gz"))
    new = hostile_trace(tmp_path / "new.json.gz", slow_kernel=3.0)
    shown = cli("show", base)
    assert_inert(shown)
    assert "A100\\x1B]0;pwned\\x07" in shown.stdout, shown.stdout  # shown, escaped, not dropped
    assert_inert(cli("show", "--kernels", base))
    compared = cli("compare", base, new)
    assert_inert(compared)
    assert "evil\\x1B" in compared.stdout or "evil" not in compared.stdout, compared.stdout


def three_steps(tracer):
    """Three steps of `tracer`, each with a phase `decode`; the summary as a dict."""
    for _ in range(3):
        with tracer.step():
            with tracer.phase("decode"):
                pass
    return tracer.summary().to_dict()


def test_a_summary_whose_phases_do_not_fit_its_steps_is_refused_by_name(tmp_path, tracer):
    d = three_steps(tracer)
    for key in ("mean", "p50", "p95", "p99", "max"):
        d["step_ms"][key] = 0.0  # steps of 0 ms beside the phases' time
    decode = d["phases"]["decode"]
    for key in ("mean", "p50", "p95", "p99", "max"):
        decode[key + "_ms"] = 3.0
    path = tmp_path / "lying.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match='phase "decode" takes 3 ms a step, more than the longest step'):
        steptrace.load(path)
    proc = cli("compare", path, path)
    assert proc.returncode == 2 and "more than the longest step" in proc.stderr, proc.stderr


# --- live rank rows --------------------------------------------------------------------------


def row(rank, world, input_ms):
    """A live row as live_row writes it: rank, world, steps, step mean/p50/p95, then input, h2d,
    compute, wait, other, GPU wait (ms a step). Every rank's step is 50 ms: a rank slow in its
    input waits the less at the collective, as a straggler does."""
    wait = 50 - 8 - input_ms
    return f"r2 {rank} {world} 100 50 50 50 {input_ms} 0 8 {wait} 0 0"


def judge(monkeypatch, rows_by_key, world):
    """Rank 0 judges one slot whose rows came under each rank's key as given."""
    from steptrace._ranks import gather as _ranks

    store = Store()
    job = type("Job", (), {"rank": 0, "world_size": world, "store": store})()
    monkeypatch.setattr(_ranks, "notice", lambda core: job)
    core = steptrace.Tracer(warmup_steps=0, print_at_exit="never")._core
    live = rank_verdicts.LiveRanks()
    live.window(core, None, {}, 10)  # rank 0's own window of slot 10 (no steps: no row of its own)
    for rank, text in rows_by_key.items():
        store.set(rank_verdicts.key(rank, 10), f"10 {text}")
    window = {}
    live.window(core, None, window, 11)  # judges slot 10
    return window


def test_a_row_that_claims_another_rank_is_refused_and_the_healthy_rank_is_not_blamed(monkeypatch, capfd):
    world = 5
    rows = {
        1: row(1, world, 1.0),
        2: row(2, world, 1.0),
        3: row(3, world, 1.0),
        4: row(1, world, 40.0),
    }  # rank 4 writes a slow row claiming to be rank 1
    window = judge(monkeypatch, rows, world)
    err = capfd.readouterr().err
    assert window.get("straggler_rank") != 1, window
    assert "rank 4's row refused (it claims to be rank 1)" in err, err


def test_one_row_the_core_cannot_read_is_refused_by_rank_and_the_verdict_goes_on(monkeypatch, capfd):
    world = 5
    rows = {1: row(1, world, 1.0), 2: "r2 2 5 garbage", 3: row(3, world, 1.0), 4: row(4, world, 40.0)}
    window = judge(monkeypatch, rows, world)
    err = capfd.readouterr().err
    assert window.get("straggler_rank") == 4, (window, err)  # the slow rank is still named
    assert "rank 2's row refused" in err and "cannot be reached" not in err, err
    assert _core.window_straggler([row(1, world, 1.0), row(3, world, 1.0), row(4, world, 40.0)])["rank"] == 4


# --- steps that outlast their trace, figures wider than their columns ----------------------------


def _trace(tmp_path, name, steps_us, session_us=None):
    events = []
    at = 0
    for i, dur in enumerate(steps_us):
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": at, "dur": dur}
        )
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": at + 10, "dur": 500})
        at += min(dur, 1000) + 10
    if session_us is not None:  # Kineto's record of the profiler's session
        events.append(
            {
                "ph": "X",
                "cat": "Trace",
                "name": "PyTorch Profiler (0)",
                "pid": "Spans",
                "tid": "PyTorch Profiler",
                "ts": 0,
                "dur": session_us,
            }
        )
    path = tmp_path / name
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_a_step_longer_than_its_trace_is_refused_by_name(tmp_path):
    years = _trace(tmp_path, "years.json", [900, 900, 31 * 365 * 24 * 3600 * 10**6, 900])  # 31 years
    proc = cli("show", years)
    assert proc.returncode == 2 and "step 2 lasts" in proc.stderr and "longer than" in proc.stderr, proc.stderr
    # an open last step that only the profiler's stop closed, seconds past the session: it reads
    fine = _trace(tmp_path, "fine.json", [900, 900, 900, 13_000_000], session_us=5_000)
    assert cli("show", fine).returncode == 0


def test_a_figure_wider_than_its_column_keeps_a_space(tmp_path, tracer):
    d = three_steps(tracer)
    big = 123456789012.0
    d["step_ms"].update(mean=big, p50=big, p95=big, p99=big, max=big, total=3 * big)
    d["phases"]["decode"].update(mean_ms=big, p50_ms=big, p95_ms=big, p99_ms=big, max_ms=big, total_ms=3 * big)
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(d))
    proc = cli("show", path)
    row = next(line for line in proc.stdout.splitlines() if line.startswith("decode"))
    assert row.split()[1:7] == ["3"] + [steptrace._core.format_ms(big)] * 5, row


def test_a_phase_inside_fullgraph_compiled_code_is_named_as_steptraces(tmp_path):
    torch = pytest.importorskip("torch")

    def f(x):
        with steptrace.phase("inner"):
            return x * 2

    with pytest.raises(Exception) as raised:
        torch.compile(f, fullgraph=True, backend="eager")(torch.ones(3))
    assert "SteptracePhases.phase" in str(raised.value) and "Phases.lookup" not in str(raised.value), str(raised.value)


def test_a_rank_whose_clock_is_hours_off_is_still_judged_and_named_the_straggler(monkeypatch, capfd):
    """Live windows end at each process's own wall clock: a rank whose clock is hours off writes
    slots rank 0 never judges, and was "missing" every window, even as the straggler. Its windows
    are now judged by their order, beside rank 0's nearest; a rank that stopped is still missing."""
    from steptrace._ranks import gather as _ranks

    world, skew = 4, 3 * 3600 // 10  # rank 2's clock 3 hours ahead, windows of 10 s
    store = Store()
    cores = [steptrace.Tracer(warmup_steps=0, print_at_exit="never")._core for _ in range(world)]
    jobs = {id(c): type("Job", (), {"rank": r, "world_size": world, "store": store})() for r, c in enumerate(cores)}
    monkeypatch.setattr(_ranks, "notice", lambda core: jobs[id(core)])
    inputs = {0: 1.0, 1: 1.0, 2: 30.0, 3: 1.0}  # rank 2 is slow in its input: the straggler
    monkeypatch.setattr(
        rank_verdicts.LiveRanks,
        "_row",
        lambda self, core, summary: row(jobs[id(core)].rank, world, inputs[jobs[id(core)].rank]),
    )
    lives = [rank_verdicts.LiveRanks() for _ in range(world)]
    verdicts = []
    for s in range(100, 110):
        for r in (1, 2, 3, 0):  # the others write their row before rank 0 judges
            if r == 3 and s >= 104:
                continue  # rank 3 stops: its last row stays, a slot behind that does not move
            window = {"steps": 100}
            lives[r].window(cores[r], None, window, s + (skew if r == 2 else 0))
        verdicts.append(window)
    err = capfd.readouterr().err
    judged = [v for v in verdicts if "straggler_rank" in v]
    assert len(judged) >= 8, verdicts
    assert all(v["straggler_rank"] == 2 for v in judged), judged
    assert verdicts[-1]["ranks_missing"] == 1  # rank 3, which stopped
    assert "rank 2's clock is about 3.0 h ahead of rank 0's" in err, err
    assert "rank 3's clock" not in err
    # behind, by hours: the same
    lives = [rank_verdicts.LiveRanks() for _ in range(world)]
    store.data.clear()
    verdicts = []
    for s in range(200, 208):
        for r in (1, 2, 3, 0):
            window = {"steps": 100}
            lives[r].window(cores[r], None, window, s - (skew if r == 2 else 0))
        verdicts.append(window)
    assert [v.get("straggler_rank") for v in verdicts[3:]] == [2] * 5, verdicts
    assert "rank 2's clock is about 3.0 h behind rank 0's" in capfd.readouterr().err
