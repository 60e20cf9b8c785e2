"""A thread stuck in a C call that holds the interpreter's lock: no Python thread can run, yet the
hang report has every thread's stack, read as faulthandler reads them (CPython's own dump where it
is exported, else faulthandler's handler for a signal steptrace raises on its own thread). Needs no
torch, so it runs on every Python the wheel is tested on."""

import os
import subprocess
import sys
import time

import pytest

from steptrace import _core


GIL_HELD = r"""
import ctypes, sys, steptrace
steptrace.configure(warmup_steps=0, hang_after=1.5, capture_dir=sys.argv[1])
for i in steptrace.steps(range(20)):
    with steptrace.phase("compute"):
        if i == 5:
            ctypes.PyDLL(None).sleep(3600)  # a C call that keeps the interpreter's lock while it blocks
"""


def run_until_reported(program, folder, *args):
    """Runs `program` with `folder` (its capture_dir) until a hang report is there, then half a second
    more (a signal raised at the hang lands by then); the reports, whether it was still alive, its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", program, str(folder), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        found = []
        while time.monotonic() < deadline and proc.poll() is None and not found:
            found = list(folder.glob("*-hang-step*.txt"))
            time.sleep(0.2)
        time.sleep(0.5)
        alive = proc.poll() is None
        proc.kill()
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return found, alive, f"exit {proc.returncode}: {err}"


def test_a_thread_stuck_holding_the_interpreters_lock_still_has_its_stack_in_the_report(tmp_path):
    """No Python thread can run while the stuck one holds the GIL: the report comes from steptrace's
    own thread and the stacks are read as faulthandler reads them, without the lock."""
    found, _, _ = run_until_reported(GIL_HELD, tmp_path)
    assert found, "no hang report"
    report = found[0].read_text()
    assert "hang suspected: step 5 has been open" in report and "`compute` open" in report, report
    assert 'File "<string>", line 7 in <module>' in report, report  # the line that holds the lock


# Where CPython does not export its dump (3.10, 3.13), the stacks come from faulthandler's handler
# for a real-time signal, written into a memfd. The program may take either back; the watch asks
# before it raises the signal, and the report then says the stacks are not available, why.
TAKEN_BACK = r"""
import os, signal, sys, time, steptrace
from steptrace import _core
out, case = sys.argv[1], sys.argv[2]
steptrace.configure(warmup_steps=0, hang_after=1.0, capture_dir=out)
ours = []
for n in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{n}").startswith("/memfd:steptrace-stacks"):
            ours.append(int(n))
    except FileNotFoundError:  # the listing's own descriptor, closed since
        pass
assert len(ours) == 1, ours
if case == "descriptor":  # closes a descriptor it did not open, and its data file takes the number
    os.close(ours[0])
    fd = os.open(os.path.join(out, "data.bin"), os.O_RDWR | os.O_CREAT, 0o600)
    if fd != ours[0]:
        os.dup2(fd, ours[0])
        os.close(fd)
    os.write(ours[0], b"precious data\n")
elif case == "reset":  # every real-time signal back to its default (which kills)
    for number in range(signal.SIGRTMIN, signal.SIGRTMAX + 1):
        signal.signal(number, signal.SIG_DFL)
elif case == "handler":  # a handler of its own on every real-time signal
    def mine(number, frame):
        open(os.path.join(out, "handler-called"), "w").close()
    for number in range(signal.SIGRTMIN, signal.SIGRTMAX + 1):
        signal.signal(number, mine)
for i in steptrace.steps(range(20)):
    with steptrace.phase("compute"):
        while i == 3:  # short sleeps: a Python handler, were the signal raised, would run at once
            time.sleep(0.05)
"""


@pytest.mark.skipif(not _core.stacks_need_signal(), reason="this Python exports its dump: no signal or memfd is used")
@pytest.mark.parametrize("case", ["descriptor", "reset", "handler"])
def test_a_signal_or_descriptor_the_program_took_back_is_not_used_at_the_hang(tmp_path, case):
    found, alive, err = run_until_reported(TAKEN_BACK, tmp_path, case)
    assert alive, f"the program died at the hang: {err}"
    assert found, err
    report = found[0].read_text()
    assert "hang suspected: step 3 has been open" in report
    assert "not available: the program" in report, report
    if case == "descriptor":
        assert (tmp_path / "data.bin").read_bytes() == b"precious data\n"
    if case == "handler":
        assert not (tmp_path / "handler-called").exists()
