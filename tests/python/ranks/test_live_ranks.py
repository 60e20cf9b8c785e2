"""Live rank windows on a real 4-process gloo job: rank 0 names the straggler window by window,
tells a chronic straggler from a one-off stall at exit, and names a rank that died as missing
without waiting for it. The truth is the job itself (tests/python/live_ranks_job.py): which rank it
slows, when, and which it kills."""

import json
import math
import os
import socket
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
    procs = [subprocess.Popen([sys.executable, JOB, mode, str(tmp_path)], cwd=tmp_path,
                              env={**env, "OMP_NUM_THREADS": "1", "RANK": str(r), "WORLD_SIZE": "4",
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(4)]
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
    assert all(15 < r["straggler"]["within_ms"] <= 1.2 * r["straggler"]["excess_ms"] for r in after), \
        [r["straggler"] for r in after]
    assert any("rank 2 is the straggler (`input`" in line and "ms of it in `decode`" in line for line in lines), lines
    assert "slowest in" in err and ": chronic" in err, err[-3000:]
    assert "look at its node first" in err, err[-3000:]


def test_a_rank_stalled_once_is_a_one_off(tmp_path):
    outs, records = run_job(tmp_path, "oneoff")
    err = outs[0][1]
    named = [r["straggler"]["rank"] for r in records if r["straggler"]]
    assert named.count(1) == 1, (named, err[-3000:])
    assert "rank 1 once, window" in err and "(input): one-off" in err, err[-3000:]


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
