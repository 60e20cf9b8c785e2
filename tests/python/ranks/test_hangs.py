"""A hang named while it hangs, on real 4-rank gloo jobs under torchrun (tests/python/hang_job.py,
hang_after 4 s, live windows of 1 s): the rank stuck and its phase, the collective the others wait
in, a mismatched collective, a rank gone, and none of it for a job that only slows down. The truth
is the job's own: which rank it stalls, how, and when (the stalled rank writes the wall time).
Each hung job is ended with SIGTERM to torchrun, as a scheduler would, after which every report
must still be whole."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rank_jobs import free_port, job_env

pytest.importorskip("torch")

JOB = Path(__file__).resolve().parents[1] / "hang_job.py"
HANG_AFTER_S = 4.0  # hang_job.py's
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="torchrun jobs on Linux")


def torchrun(out: Path, mode: str, extra_env=None) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "4",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        str(JOB),
        mode,
        str(out),
    ]
    return subprocess.Popen(
        cmd, cwd=out, env=job_env(extra_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


class Ranks:
    """Four rank processes started one by one, as srun or a multi-node launcher leaves them: a rank
    that dies does not take the others down with it (torchrun's agent stops every worker of its
    node at once, so under torchrun a dead rank is a failed job, not a hang)."""

    def __init__(self, out: Path, mode: str) -> None:
        port = str(free_port())
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(JOB), mode, str(out)],
                cwd=out,
                env=job_env(
                    {
                        "RANK": str(r),
                        "WORLD_SIZE": "4",
                        "LOCAL_RANK": str(r),
                        "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": port,
                    }
                ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for r in range(4)
        ]

    def poll(self):
        ended = [p.poll() is not None for p in self.procs]  # each one polled: the dead are reaped
        return 0 if all(ended) else None

    def send_signal(self, sig):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(sig)

    def communicate(self, timeout=None):
        errs = [p.communicate(timeout=timeout)[1] for p in self.procs]
        return "", errs[0]

    def kill(self):
        for p in self.procs:
            p.kill()

    @property
    def stderr(self):
        return self.procs[0].stderr


def reports(out: Path) -> dict:
    """Each rank's hang report, by rank."""
    found = {}
    for p in (out / "caps").glob("*-hang-step*.txt"):
        found[int(re.search(r"-rank(\d+)-", p.name).group(1))] = p.read_text()
    return found


def run_until_viewed(out: Path, mode: str, ranks, launch=torchrun, limit_s: float = 60.0, also=""):
    """Runs the job until every rank in `ranks` has a report holding the job's view, then ends it
    with SIGTERM to torchrun (or to each rank); returns (reports, rank 0's or torchrun's stderr)."""
    proc = launch(out, mode)
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            got = reports(out)
            if all("The job's view" in got.get(r, "") and also in got.get(r, "") for r in ranks):
                break
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the job ended by itself: " + proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGTERM)  # as torchrun's scheduler would, once the hang is seen
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    return reports(out), err


def jsonl(out: Path, rank: int, key: str):
    path = out / f"live-{rank}.jsonl"
    return [json.loads(line)[key] for line in path.read_text().splitlines() if line.startswith(f'{{"{key}"')]


def whole(report: str) -> bool:
    return report.startswith("steptrace hang report") and "Every thread's stack" in report


def test_a_rank_stuck_in_input_is_named_by_every_rank_with_the_collective_the_others_wait_in(tmp_path):
    # PyTorch's Flight Recorder on (it records gloo's collectives too): each rank asks it to dump
    got, err = run_until_viewed(
        tmp_path,
        "input",
        [0, 1, 2, 3],
        also="Flight Recorder dumped",
        launch=lambda out, mode: torchrun(out, mode, {"TORCH_FR_BUFFER_SIZE": "100"}),
    )
    stall_at = float((tmp_path / "stall-2.txt").read_text())
    for r in range(4):
        assert whole(got[r]), got[r][:2000]  # SIGTERM after the hang left every report whole
        assert "rank 2 never entered all_reduce #10 of group 0: stuck in `input`" in got[r], got[r]
        assert "ranks 0, 1, 3 wait inside all_reduce #10 of group 0" in got[r], got[r]
    # rank 2's own report: its open phase, and the Python line it blocks on
    assert "hang suspected: step 10 has been open" in got[2] and "`input` open" in got[2]
    line = next(n for n, text in enumerate(JOB.read_text().splitlines(), 1) if "threading.Event().wait()" in text)
    assert f'hang_job.py", line {line} in items' in got[2], got[2]
    # the others' reports: inside all_reduce #10, not left
    assert "group 0: all_reduce #10, entered" in got[0] and "not left" in got[0]
    # rank 0 (the lowest live rank) said it on stderr, labelled its window HANG, within 2x hang_after
    assert "steptrace ranks: HANG: rank 2 never entered all_reduce #10" in err, err[-3000:]
    views = jsonl(tmp_path, 0, "hang_job")
    assert views and views[0]["culprits"][0]["rank"] == 2 and views[0]["culprits"][0]["phase"] == "input"
    assert views[0]["at"] - stall_at <= 2 * HANG_AFTER_S, views[0]["at"] - stall_at
    hangs = jsonl(tmp_path, 2, "hang")
    assert len(hangs) == 1 and hangs[0]["phase"] == "input" and hangs[0]["stuck_s"] >= HANG_AFTER_S
    assert "in items" in hangs[0]["stacks"]
    recorded = [Path(v["flight_recorder"]) for v in views if v.get("flight_recorder")]
    assert recorded and recorded[0].stat().st_size > 0 and f"PyTorch's Flight Recorder dumped: {recorded[0]}" in got[0]
    windows = [
        json.loads(line)
        for line in (tmp_path / "live-2.jsonl").read_text().splitlines()
        if line.startswith('{"schema"')
    ]
    assert any((w.get("hang") or {}).get("suspected") for w in windows)  # the windows carry it too


def test_a_mismatched_collective_is_named_with_both_kinds(tmp_path):
    got, err = run_until_viewed(tmp_path, "mismatch", [0, 3])
    for r in (0, 3):
        assert "rank 3 called broadcast #10 where ranks 0, 1, 2 called all_reduce #10" in got[r], got[r]
    assert "Read rank 3's stack (its hang report) first" in got[0]


def test_a_rank_killed_is_named_gone_with_its_last_phase(tmp_path):
    got, err = run_until_viewed(tmp_path, "killed", [0, 1, 2], launch=Ranks)
    assert 3 not in got  # a SIGKILLed process writes nothing
    for r in (0, 1, 2):
        assert re.search(r"rank 3 is gone \(its process exited\); its last row: step \d+, in `compute`", got[r]), got[r]
        assert re.search(
            r"ranks 0, 1, 2 entered all_reduce #\d+ of group 0 \(its call returned: with NCCL, a launch\) "
            r"and are in `wait`",
            got[r],
        ), got[r]
    assert "Read rank 3's log first" in got[0]


def test_a_job_that_slows_20x_and_recovers_under_ten_cpu_burners_is_never_hung(tmp_path):
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(10)]
    try:
        proc = torchrun(tmp_path, "slow")
        _, err = proc.communicate(timeout=240)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "steptrace ranks, the window before" in err  # the live verdicts ran
    assert "hang suspected" not in err and "HANG" not in err, err[-3000:]
    assert not reports(tmp_path)
    for r in range(4):
        assert not jsonl(tmp_path, r, "hang") and not jsonl(tmp_path, r, "hang_job")
