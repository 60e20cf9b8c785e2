"""Live rank windows on a real 4-process gloo job: rank 0 names the straggler window by window,
tells a chronic straggler from a one-off stall at exit, and names a rank that died as missing
without waiting for it. The truth is the job itself (tests/python/live_ranks_job.py): which rank it
slows, when, and which it kills."""

import json
import math
import os
import socket
import statistics
import subprocess
import sys

import pytest
from conftest import HERE  # noqa: E402

pytest.importorskip("torch")

JOB = str(HERE / "live_ranks_job.py")


def run_job(tmp_path, mode):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    procs = [
        subprocess.Popen(
            [sys.executable, JOB, mode, str(tmp_path)],
            cwd=tmp_path,
            env={
                **env,
                "OMP_NUM_THREADS": "1",
                "RANK": str(r),
                "WORLD_SIZE": "4",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(4)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    records = []
    path = tmp_path / "live-0.jsonl"
    if path.exists():
        records = [json.loads(line)["ranks"] for line in path.read_text().splitlines() if line.startswith('{"ranks"')]
    return outs, records


def verdicts(stderr):
    return [line for line in stderr.splitlines() if line.startswith("steptrace ranks")]


def test_a_rank_that_slows_is_named_every_window_from_then_on_and_chronic_at_exit(tmp_path):
    outs, records = run_job(tmp_path, "chronic")
    err = outs[0][1]
    lines = verdicts(err)
    named = [r["straggler"]["rank"] if r["straggler"] else None for r in records]
    assert 2 in named, (named, err[-3000:])
    # The job's own clock: rank 2's input slows 3 s after its run began. A window of slot s covers
    # the wall clock's [s, s + 1) (1 s windows). Every window wholly after the slowdown names rank
    # 2 (the run's last window, cut short by the end, left out); no window wholly before it does,
    # but the first (start-up: four processes importing torch and connecting on 2 cores may make
    # any rank late there).
    slow_from = float((tmp_path / "start-2.txt").read_text()) + 3
    after = [r for r in records[:-1] if r["slot"] >= math.ceil(slow_from)]
    before = [r for r in records[1:] if r["slot"] + 1 <= slow_from]
    assert len(after) >= 3, (named, slow_from, [r["slot"] for r in records])
    assert all(r["straggler"] and r["straggler"]["rank"] == 2 for r in after), named
    assert before, (named, slow_from, [r["slot"] for r in records])
    assert not any(r["straggler"] and r["straggler"]["rank"] == 2 for r in before), named
    assert after[0]["straggler"]["phase"] == "input", after[0]
    # the named phase inside `input` that holds the extra 25 ms a step (the job's sleep there)
    assert all(r["straggler"]["within"] == "decode" for r in after), [r["straggler"] for r in after]
    assert all(15 < r["straggler"]["within_ms"] <= 1.2 * r["straggler"]["excess_ms"] for r in after), [
        r["straggler"] for r in after
    ]
    assert any("rank 2 is the straggler (`input`" in line and "ms of it in `decode`" in line for line in lines), lines
    assert "slowest in" in err and ": chronic" in err, err[-3000:]
    assert "look at its node first" in err, err[-3000:]


def test_ddp_ranks_carry_their_all_reduce_waits_and_the_late_rank_is_named_by_its_arrival(tmp_path):
    """DDP on gloo; rank 2's backward sleeps 25 ms a step from 3 s on (the job's own clock): every
    window wholly after that names rank 2 from the rows' last all-reduces, last at most of them by
    about the sleep, after `backward`; the first, partial window is too short to judge, said."""
    outs, records = run_job(tmp_path, "ddp")
    err = outs[0][1]
    slow_from = float((tmp_path / "start-2.txt").read_text()) + 3
    after = [r for r in records[:-1] if r["slot"] >= math.ceil(slow_from)]
    assert len(after) >= 3, ([r["slot"] for r in records], slow_from, err[-3000:])
    truth = statistics.median(json.loads((tmp_path / "slept-2.json").read_text()))
    # A window with too few steps on some rank (a rank held up by the busy machine) is not judged,
    # and says so (below): every judged window after the slowdown names rank 2.
    judged = [r for r in after if not r["too_short"]]
    assert len(judged) >= 2, (after, err[-3000:])
    for r in judged:
        s = r["straggler"]
        assert s and s["rank"] == 2, (r, err[-3000:])
        assert s["arrivals_last"] >= 0.9 * s["arrivals_compared"], s
        assert abs(s["arrival_late_ms"] - truth) < 0.3 * truth, (s, truth)
        assert s["before"] == "backward", s
    before = [r for r in records[1:] if r["slot"] + 1 <= slow_from]
    assert not any(r["straggler"] for r in before), before
    lines = verdicts(err)
    assert any("rank 2 is the straggler (last at" in line and "after `backward`" in line for line in lines), lines
    # the first window (the run's start, part of a period) held fewer than 5 steps on some rank
    short = [r for r in records if r["too_short"]]
    assert all(r["straggler"] is None for r in short)
    assert all("too short to judge" in line for line in lines if "too short" in line)


def test_a_rank_stalled_once_is_a_one_off(tmp_path):
    outs, records = run_job(tmp_path, "oneoff")
    err = outs[0][1]
    named = [r["straggler"]["rank"] for r in records if r["straggler"]]
    assert named.count(1) == 1, (named, err[-3000:])
    assert "rank 1 once, window" in err and "(input): one-off" in err, err[-3000:]
    # at exit the one stall leaves the label and gains to the typical step (windows were judged after it)
    exit_diagnosis = err[err.find("diagnosis  ") :]
    assert not exit_diagnosis.startswith("diagnosis  STRAGGLER"), exit_diagnosis
    assert "No straggler: rank 1 lagged in one live window only" in exit_diagnosis, exit_diagnosis


def test_a_healthy_job_under_cpu_burners_names_no_straggler_in_any_window(tmp_path):
    """No rank delayed, 6 CPU burners on the host's cores: every rank waits for a core by turns,
    none holds the others by a share of the step (5 runs, 9 windows each: none named)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(6)]
    try:
        outs, records = run_job(tmp_path, "healthy")
    finally:
        for b in burners:
            b.kill()
            b.wait()
    err = outs[0][1]
    assert len(records) >= 5, err[-3000:]
    assert not any(r["straggler"] for r in records), (records, verdicts(err))
    assert "diagnosis  STRAGGLER" not in err, err[-3000:]


def test_a_rank_killed_mid_run_is_missing_and_no_window_waits_for_it(tmp_path):
    outs, records = run_job(tmp_path, "killed")
    assert records, outs[0][1][-3000:]
    assert any(r["missing"] == [3] for r in records), records
    assert not any(3 in r["missing"] for r in records[:2]), records  # alive for the first 2.5 s
    # Rank 0's windows kept their period: its slots come one after the other, none skipped.
    slots = [r["slot"] for r in records]
    assert slots == list(range(slots[0], slots[0] + len(slots))), slots


def test_a_with_step_loop_gets_its_verdicts_too(tmp_path):
    """The loop is `with steptrace.step():` (no steps() to start the verdicts): configure(live=1)
    after torch.distributed's init starts them, and rank 2, slowed from 3 s on, is named."""
    outs, records = run_job(tmp_path, "withstep")
    said = verdicts(outs[0][1])
    assert said and any("rank 2 is the straggler" in line for line in said), outs[0][1][-3000:]
    assert any(r["straggler"] and r["straggler"]["rank"] == 2 for r in records), records


def test_a_window_with_too_few_steps_on_a_rank_is_not_judged_and_says_so():
    from steptrace._core import MIN_WINDOW_STEPS, window_straggler
    from steptrace._live import rank_verdicts

    def row(rank, steps, input_ms, wait_ms):  # r2: rank, world, steps, step mean/p50/p95, the phases, device wait
        step = input_ms + 8 + wait_ms
        return f"r2 {rank} 4 {steps} {step} {step} {step} {input_ms} 0 8 {wait_ms} 0 0"

    start_up = [row(0, 12, 1, 8), row(1, MIN_WINDOW_STEPS - 1, 9, 0), row(2, 12, 1, 8), row(3, 12, 1, 8)]
    assert window_straggler(start_up) is not None  # the rule alone would name rank 1 on its few steps
    assert rank_verdicts._too_short(start_up) == [1]
    said = rank_verdicts.line(1.0, 4, 4, None, {"windows": 0}, [], [], [1])
    assert f"too short to judge (fewer than {MIN_WINDOW_STEPS} steps on rank 1)" in said
    assert rank_verdicts._too_short([row(r, MIN_WINDOW_STEPS, 1, 0) for r in range(4)]) == []


def test_rank_0s_line_escapes_names_from_the_rows():
    from steptrace._live import rank_verdicts

    straggler = {
        "rank": 2,
        "arrivals_last": 8,
        "arrivals_compared": 8,
        "arrival_late_ms": 25.0,
        "before": "back\x1b[2Jward",
        "node": "SM clock\x07 1410 MHz",
    }
    said = rank_verdicts.line(1.0, 4, 4, straggler, {"windows": 1}, [], [])
    assert "\x1b" not in said and "\x07" not in said
    assert "back\\x1B[2Jward" in said and said.endswith("\n")
