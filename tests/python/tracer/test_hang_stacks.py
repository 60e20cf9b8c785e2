"""A thread stuck in a C call that holds the interpreter's lock: no Python thread can run, yet the
hang report has every thread's stack, read as faulthandler reads them (CPython's own dump where it
is exported, else faulthandler's handler for a signal steptrace raises on its own thread). Needs no
torch, so it runs on every Python the wheel is tested on."""

import os
import subprocess
import sys
import time


GIL_HELD = r"""
import ctypes, sys, steptrace
steptrace.configure(warmup_steps=0, hang_after=1.5, capture_dir=sys.argv[1])
for i in steptrace.steps(range(20)):
    with steptrace.phase("compute"):
        if i == 5:
            ctypes.PyDLL(None).sleep(3600)  # a C call that keeps the interpreter's lock while it blocks
"""


def test_a_thread_stuck_holding_the_interpreters_lock_still_has_its_stack_in_the_report(tmp_path):
    """No Python thread can run while the stuck one holds the GIL: the report comes from steptrace's
    own thread and the stacks are read as faulthandler reads them, without the lock."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    proc = subprocess.Popen([sys.executable, "-c", GIL_HELD, str(tmp_path)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        found = []
        while time.monotonic() < deadline and proc.poll() is None and not found:
            found = list(tmp_path.glob("*-hang-step*.txt"))
            time.sleep(0.2)
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert found, "no hang report"
    report = found[0].read_text()
    assert "hang suspected: step 5 has been open" in report and "`compute` open" in report, report
    assert 'File "<string>", line 7 in <module>' in report, report  # the line that holds the lock
