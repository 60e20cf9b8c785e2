import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import steptrace

# Where things are, for the tests in the folders below (a folder per concern of the package):
HERE = Path(__file__).resolve().parent  # this folder: the job scripts and helpers the tests share
ROOT = HERE.parent.parent  # the repository
TRACES = ROOT / "tests" / "data" / "profiler_traces"  # the real traces


def spin(seconds: float) -> float:
    """Busy-waits; returns how long it really spun, timed by time.perf_counter (the ground truth)."""
    start = time.perf_counter()
    end, now = start + seconds, start
    while now < end:
        now = time.perf_counter()
    return now - start


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """Runs the `steptrace` command (python -m steptrace) with `args`; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "steptrace"] + [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tests that run torch in this process run it on one intra-op thread, as the job scripts do
    (torch.set_num_threads(1)): with two, a machine already busy (ten CPU burners on 2 cores)
    turns a few ms of compute into hundreds at OpenMP's barriers, and a loop meant to wait on its
    input rightly reads COMPUTE-BOUND. The readings under test are about the programs, not that."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tracer():
    """A fresh, quiet tracer with no warm-up."""
    return steptrace.Tracer(warmup_steps=0, print_at_exit=False)


@pytest.fixture
def run_python(tmp_path):
    """Runs a snippet in a fresh interpreter; returns the CompletedProcess."""

    def run(code: str, env: dict = None, check: bool = True) -> subprocess.CompletedProcess:
        script = tmp_path / "snippet.py"
        script.write_text(textwrap.dedent(code))
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
        full_env.update(env or {})
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=full_env, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"snippet failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run
