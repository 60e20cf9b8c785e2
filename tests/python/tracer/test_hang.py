"""A single process stuck in a phase: its DataLoader worker deadlocks, so the loop's fetch never
returns (tests/python/hang_loader.py). The report names the phase and the line the loop waits on,
the listeners get `hang_s` and `hang_phase`, and SIGTERM afterwards (a scheduler ending the job)
leaves the report whole. The truth is the program's: it blocks at item 12, in its fetch."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

JOB = Path(__file__).resolve().parents[1] / "hang_loader.py"


def test_a_deadlocked_loader_worker_is_named_with_the_phase_and_the_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    proc = subprocess.Popen(
        [sys.executable, str(JOB), str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        found = []
        while time.monotonic() < deadline and proc.poll() is None:
            found = list((tmp_path / "caps").glob("*-hang-step*.txt")) if (tmp_path / "caps").exists() else []
            windows = (tmp_path / "windows.jsonl").read_text() if (tmp_path / "windows.jsonl").exists() else ""
            if found and '"hang_phase": "input"' in windows:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(1.2)  # a look later: still one report
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert len(found) == 1
    report = found[0].read_text()
    assert report.startswith("steptrace hang report") and "Every thread's stack" in report  # whole after SIGTERM
    assert "hang suspected: step 12 has been open" in report and "`input` open" in report, report
    assert "DataLoader worker dead or deadlocked" in report
    loop_line = next(n for n, text in enumerate(JOB.read_text().splitlines(), 1) if "steptrace.steps(loader)" in text)
    assert f'hang_loader.py", line {loop_line} in <module>' in report, report  # the line the loop waits on
    assert "in _get_data" in report or "in _next_data" in report  # inside the DataLoader's fetch
    assert "hang suspected: step 12" in err and "in `input`" in err
    windows = [json.loads(line) for line in (tmp_path / "windows.jsonl").read_text().splitlines()]
    stuck = [w for w in windows if w["hang_s"]]
    assert stuck and stuck[-1]["hang_phase"] == "input" and stuck[-1]["hang_s"] >= 1.5
    assert stuck[-1]["hang_report"] == str(found[0])
