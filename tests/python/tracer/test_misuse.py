"""Misuse that used to be silent now says one line: step() or phase() called without `with`, a
phase in a forked DataLoader worker, a step opened inside a steps() loop; and the version."""

import steptrace

from conftest import cli


def test_a_bare_step_or_phase_call_says_so_once_at_exit(run_python):
    for call in ("step()", "phase('decode')"):
        proc = run_python(f"""
import steptrace
for _ in range(10):
    steptrace.{call}  # no `with`: nothing is recorded
""")
        said = [line for line in proc.stderr.splitlines() if "was called but nothing was recorded" in line]
        assert len(said) == 1 and "with steptrace." in said[0], proc.stderr
    used = run_python("""
import steptrace
for _ in range(3):
    with steptrace.step():
        pass
""")
    assert "was called but nothing was recorded" not in used.stderr


def test_a_phase_in_a_forked_worker_says_once_that_it_is_not_collected(run_python):
    proc = run_python("""
import os, steptrace
with steptrace.phase("decode"):  # known before the fork: the child's phase(name) must still say it
    pass
pid = os.fork()
if pid == 0:
    for _ in range(5):
        with steptrace.phase("decode"):
            pass
    os._exit(0)
os.waitpid(pid, 0)
""")
    said = [line for line in proc.stderr.splitlines() if "forked process" in line]
    assert len(said) == 1 and "not collected" in said[0], proc.stderr


def test_a_step_inside_a_steps_loop_names_the_loop(tracer):
    import pytest

    with pytest.raises(steptrace.StepError, match=r"steptrace.steps\(...\)` loop already opens one step per item"):
        for _ in tracer.steps(range(2)):
            with tracer.step():
                pass


def test_the_version_is_there():
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"steptrace {steptrace.__version__}"


def test_phases_used_outside_any_step_are_not_called_bare(run_python):
    proc = run_python("""
import steptrace
with steptrace.phase("setup"):  # a phase outside every step: recorded, though no step is
    pass
""")
    assert "was called but nothing was recorded" not in proc.stderr, proc.stderr


def test_the_reports_header_writes_the_wall_time_as_the_table_does(tracer):
    import re

    for _ in range(3):
        with tracer.step():
            pass
    s = tracer.summary()
    in_table = re.search(r"([\d.]+) s of wall time", str(s)).group(1)
    assert f"{in_table} s of wall time" in s.to_html()


def test_a_step_left_open_at_exit_says_so_and_always_prints_the_table(run_python):
    left_open = """
import steptrace
for _ in range(4):
    with steptrace.step():
        pass
steptrace.step().__enter__()  # entered, never left
"""
    proc = run_python(left_open)
    said = [line for line in proc.stderr.splitlines() if "still open at exit" in line]
    assert len(said) == 1 and "a step was" in said[0] and "not counted" in said[0], proc.stderr
    assert "was called but nothing was recorded" not in proc.stderr  # it was entered: no "bare" hint
    alone = run_python("import steptrace\nsteptrace.step().__enter__()\n", env={"STEPTRACE_PRINT_AT_EXIT": "always"})
    assert "still open at exit" in alone.stderr and "no steps counted" in alone.stderr, alone.stderr
    closed = run_python(left_open.replace("steptrace.step().__enter__()", "pass"))
    assert "still open" not in closed.stderr


def test_a_phase_made_and_never_entered_is_said_once_and_gets_no_sync_advice(run_python):
    """`steptrace.phase("compute")` without `with` inside a real step: the step is all `other`, which
    read WAIT-HEAVY "remove per-step host syncs" with no word of the slip."""
    proc = run_python(
        """
import time, steptrace

@steptrace.phase("never_called")  # a decorator whose function never runs: not a slip
def spare():
    pass

for _ in range(12):
    with steptrace.step():
        steptrace.phase("compute")  # the slip: made, never entered
        time.sleep(0.003)
""",
        env={"STEPTRACE_PRINT_AT_EXIT": "always"},
    )
    said = [line for line in proc.stderr.splitlines() if line.startswith("steptrace warning: steptrace.phase(")]
    assert len(said) == 1 and "steptrace.phase('compute')" in said[0], proc.stderr
    assert "never_called" not in said[0]
    assert "remove per-step host syncs" not in proc.stderr, proc.stderr
    assert "try first  steptrace.phase(...) was made but never entered (compute)" in proc.stderr, proc.stderr
    assert "shorter steps" not in proc.stderr  # no gain from `other`: it is untraced, not a cause
