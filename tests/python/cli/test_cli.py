"""The `steptrace` command on saved summaries: `compare` (several runs a side, the mean and the
median, the noise within and between runs) and its answer to a bad file."""

import json
import os
import shutil
import sys
import time

import steptrace
from conftest import cli


def _synthetic(steps=1000, p50=10.0, p95=11.0, scale=1.0):
    """A summary with fixed statistics (as a real run writes its JSON), scaled by `scale`."""
    t = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
    for _ in range(3):
        with t.step():
            with t.phase("input"):
                pass
            with t.phase("compute"):
                pass
    d = t.summary().to_dict()
    d["steps"] = steps
    stats = {"mean": p50 * 1.01, "p50": p50, "p95": p95, "p99": p95 * 1.05, "max": p95 * 1.2}
    d["step_ms"] = {k: v * scale for k, v in stats.items()}
    d["step_ms"]["total"] = d["step_ms"]["mean"] * steps
    for name, share in (("input", 0.3), ("compute", 0.7)):
        p = d["phases"][name]
        for k in ("mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"):
            p[k] = stats[k[:-3]] * share * scale
        p["total_ms"] = p["mean_ms"] * steps
        p["share"] = share
    d["phases"]["other"].update(total_ms=0, mean_ms=0, p50_ms=0, p95_ms=0, p99_ms=0, max_ms=0, share=0)
    return d


def _write(path, d):
    path.write_text(json.dumps(d))
    return path


def test_compare_gates_a_20_percent_regression_by_threshold(tmp_path):
    a = _write(tmp_path / "a.json", _synthetic())
    b = _write(tmp_path / "b.json", _synthetic(scale=1.2))
    fails = cli("compare", a, b, "--max-regression", 10)
    assert fails.returncode == 1, fails.stdout + fails.stderr
    assert "step p50 +20.0%" in fails.stdout and "regression" in fails.stdout
    assert "input (mean)" in fails.stdout and "+20.0%" in fails.stdout
    passes = cli("compare", a, b, "--max-regression", 30)
    assert passes.returncode == 0, passes.stdout
    assert "within --max-regression 30%" in passes.stdout
    same = cli("compare", a, a, "--max-regression", 10)
    assert same.returncode == 0
    assert "no change" in same.stdout
    faster = cli("compare", b, a, "--max-regression", 10)
    assert faster.returncode == 0 and "faster" in faster.stdout


def test_compare_says_when_runs_are_too_short_or_too_noisy(tmp_path):
    a = _write(tmp_path / "a.json", _synthetic(steps=5))
    b = _write(tmp_path / "b.json", _synthetic(steps=5, scale=1.5))
    short = cli("compare", a, b, "--max-regression", 10)
    assert short.returncode == 0 and "too short to tell" in short.stdout
    # p95 at 5x p50 over 40 steps: a median's noise band of about ±40%, wider than a 12% change.
    noisy_a = _write(tmp_path / "na.json", _synthetic(steps=40, p50=10, p95=50))
    noisy_b = _write(tmp_path / "nb.json", _synthetic(steps=40, p50=11.2, p95=50))
    noisy = cli("compare", noisy_a, noisy_b, "--max-regression", 10)
    assert noisy.returncode == 0, noisy.stdout
    assert "too noisy to tell a 10% regression" in noisy.stdout


def test_compare_judges_the_mean_too_and_says_which_figure_decided(tmp_path):
    """A bimodal run: its median where it was, its mean 30% higher (throughput lost). Judged by
    the median alone it was 'no change'."""
    a = _write(tmp_path / "a.json", _synthetic())
    slow = _synthetic(p95=21.0)
    slow["step_ms"]["mean"] = 10.1 * 1.3
    slow["step_ms"]["total"] = slow["step_ms"]["mean"] * slow["steps"]
    b = _write(tmp_path / "b.json", slow)
    out = cli("compare", a, b, "--max-regression", 10)
    assert out.returncode == 1, out.stdout
    assert "step p50 +0.0%" in out.stdout and "step mean +30.0%" in out.stdout
    assert "regression, decided by the step mean" in out.stdout


def test_compare_takes_several_runs_a_side_and_their_spread(tmp_path):
    """Runs of one command that differ by 60% among themselves: a +15% change between the sides'
    medians is within that noise, though each run alone is precise (1,000 steps)."""
    base = [_write(tmp_path / f"base{i}.json", _synthetic(p50=p, p95=p * 1.1)) for i, p in enumerate((10, 13, 16))]
    new = [_write(tmp_path / f"new{i}.json", _synthetic(p50=p, p95=p * 1.1)) for i, p in enumerate((12, 15, 18))]
    spread = cli("compare", *base, "vs", *new, "--max-regression", 10)
    assert spread.returncode == 0, spread.stdout
    assert "runs" in spread.stdout and "base0.json +2" in spread.stdout
    assert "no change beyond the noise" in spread.stdout and "too noisy to tell a 10% regression" in spread.stdout
    # One run a side, the same +20%: the band knows only the noise inside each run.
    alone = cli("compare", base[0], new[0], "--max-regression", 10)
    assert alone.returncode == 1 and "one run a side" in alone.stdout
    # Consistent runs, +20%: a regression, whatever the number of runs.
    steady_a = [_write(tmp_path / f"sa{i}.json", _synthetic(p50=10 + 0.1 * i)) for i in range(3)]
    steady_b = [_write(tmp_path / f"sb{i}.json", _synthetic(p50=12 + 0.1 * i, p95=13.2 + 0.1 * i)) for i in range(3)]
    steady = cli("compare", *steady_a, "vs", *steady_b, "--max-regression", 10)
    assert steady.returncode == 1, steady.stdout
    assert "decided by the step p50 and the step mean" in steady.stdout
    assert cli("compare", base[0], base[1], new[0]).returncode == 2  # three files and no `vs`


def test_the_command_names_a_bad_file(tmp_path):
    missing = cli("show", tmp_path / "nope.json")
    assert missing.returncode == 2 and "nope.json" in missing.stderr
    (tmp_path / "bad.json").write_text('{"schema": "other"}')
    bad = cli("trace", tmp_path / "bad.json")
    assert bad.returncode == 2 and "unsupported summary schema" in bad.stderr
    assert cli("compare", tmp_path / "bad.json").returncode == 2  # argparse: usage
    (tmp_path / "ok.json").write_text(json.dumps(_synthetic()))
    unwritable = cli("trace", tmp_path / "ok.json", "-o", tmp_path / "no" / "such" / "dir.json")
    assert unwritable.returncode == 2 and "dir.json: No such file or directory" in unwritable.stderr
    console = shutil.which("steptrace", path=os.path.dirname(sys.executable))
    assert console, "the console script is installed beside the interpreter"


def _six_steps(step_ms, gains=None):
    """A 6-step run's summary whose series holds each step's time (as a real short run's does)."""
    d = _synthetic(steps=len(step_ms), p50=sorted(step_ms)[len(step_ms) // 2], p95=max(step_ms))
    d["step_ms"]["mean"] = sum(step_ms) / len(step_ms)
    template = d["series"]["points"][0]
    d["series"]["steps_per_point"] = 1
    d["series"]["points"] = [dict(template, first_step=i, steps=1, step_ms=v) for i, v in enumerate(step_ms)]
    if gains:
        d["diagnosis"]["gains"] = gains
    return d


def test_compare_judges_short_runs_by_a_rank_test_on_their_steps(tmp_path):
    base = [10.1, 9.8, 10.4, 10.0, 9.9, 10.2]
    slow = [v * 5.76 for v in base]  # +476%: no step of one overlaps the other
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    a = _write(tmp_path / "before" / "run.json", _six_steps(base, {"input": 0.3}))
    b = _write(tmp_path / "after" / "run.json", _six_steps(slow))
    out = cli("compare", a, b, "--max-regression", 10)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "slower: step p50 +476" in out.stdout and "regression" in out.stdout
    assert "over 6 and 6 steps (rank test: 99.9% confidence)" in out.stdout  # 1 - 1/924: exact, one-sided
    assert "realised -" not in out.stdout and "nothing realised: steps 476% longer" in out.stdout
    head = out.stdout.splitlines()[0]  # same-named files: their folders tell them apart
    assert "before/run.json" in head and "after/run.json" in head
    faster = cli("compare", b, a, "--max-regression", 10)
    assert faster.returncode == 0 and "faster:" in faster.stdout
    # steps that overlap: no verdict from 6 steps
    mixed = _write(tmp_path / "mixed.json", _six_steps([9.9, 10.3, 10.0, 10.1, 9.7, 10.5]))
    tie = cli("compare", a, mixed, "--max-regression", 10)
    assert tie.returncode == 0 and "too short to tell: 6 and 6 steps overlap (rank test:" in tie.stdout


def test_compare_keeps_its_columns_aligned_with_long_names(tmp_path):
    """A long phase name and a long run name: every row's values end in the same columns (a name
    past 40 characters clipped, as the kernel table clips)."""
    from steptrace._cli import compare as _compare

    def run(sleep_s):
        t = steptrace.Tracer(warmup_steps=0, print_at_exit="never")
        for _ in range(6):
            with t.step():
                with t.phase("data_loading_and_augmentation_of_the_whole_batch_on_the_host"):
                    time.sleep(sleep_s)
                with t.phase("compute"):
                    pass
        return t.summary().to_dict()

    c = _compare.compare(run(0.002), run(0.001), None)
    text = _compare.render(c, "baseline-run-with-a-long-name.json", "b.json")
    rows = text.split("\n\n")[0].splitlines()
    header, body = rows[0], rows[1:]
    a_end = header.index("baseline-run-with-a-long-name.json") + len("baseline-run-with-a-long-name.json")
    b_end = header.index("b.json") + len("b.json")
    for what, va, vb, _ in c.rows:  # each value ends where its column's name ends
        line = next(r for r in body if r.startswith(_compare._clipped(what, _compare.NAME_WIDTH)))
        assert line[a_end - len(va) : a_end] == va and line[b_end - len(vb) : b_end] == vb, text
    assert any(r.startswith("data_loading_and_augmentation_of_the_...") for r in body), text
