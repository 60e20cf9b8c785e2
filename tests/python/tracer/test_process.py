"""Whole-process behaviour: exit report, environment, fork, Ctrl-C."""

import json
import os

import pytest

LOOP = """
import steptrace
for _ in steptrace.steps(range(12)):
    with steptrace.phase("compute"):
        pass
"""


def test_the_table_prints_at_exit_when_steps_ran(run_python):
    proc = run_python(LOOP)
    assert "steptrace summary" in proc.stderr
    assert "7 steps (5 warm-up" in proc.stderr
    assert proc.stdout == ""


def test_nothing_prints_at_exit_without_steps(run_python):
    assert run_python("import steptrace").stderr == ""


def test_printing_at_exit_can_be_turned_off_and_json_written(run_python, tmp_path):
    path = tmp_path / "run.json"
    proc = run_python(f"import steptrace\nsteptrace.configure(print_at_exit=False, json_path={str(path)!r})\n" + LOOP)
    assert proc.stderr == ""
    assert json.loads(path.read_text())["steps"] == 7


def test_environment_variables_configure_the_default_tracer(run_python, tmp_path):
    path = tmp_path / "env.json"
    proc = run_python(LOOP, env={"STEPTRACE_WARMUP_STEPS": "2", "STEPTRACE_JSON": str(path)})
    assert "10 steps (2 warm-up" in proc.stderr
    assert json.loads(path.read_text())["steps"] == 10


def test_a_bad_environment_value_is_one_clear_line_and_ignored(run_python):
    proc = run_python(LOOP, env={"STEPTRACE_WARMUP_STEPS": "lots", "STEPTRACE_SAMPLE": "1"})
    assert "STEPTRACE_WARMUP_STEPS='lots' is ignored: expected a non-negative integer" in proc.stderr
    assert "STEPTRACE_SAMPLE is not a steptrace variable" in proc.stderr
    assert "7 steps (5 warm-up" in proc.stderr  # the default was kept


def test_steptrace_disable_makes_every_call_a_no_op(run_python):
    proc = run_python(LOOP + "\nassert steptrace.summary().steps == 0\n", env={"STEPTRACE_DISABLE": "1"})
    assert proc.stderr == ""


def test_ctrl_c_inside_a_step_propagates_and_the_summary_still_prints(run_python):
    proc = run_python(
        """
        import steptrace
        for i in range(100):
            with steptrace.step():
                if i == 10:
                    raise KeyboardInterrupt
        """,
        check=False,
    )
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in proc.stderr
    assert "5 steps (5 warm-up and 1 failed not counted)" in proc.stderr


def test_ctrl_c_in_a_steps_loop_prints_what_ran(run_python):
    proc = run_python(
        """
        import steptrace
        for i in steptrace.steps(range(100)):
            if i == 10:
                raise KeyboardInterrupt
        """,
        check=False,
    )
    assert "KeyboardInterrupt" in proc.stderr
    # A generator cannot tell an exception in the loop body from a break: the interrupted
    # step ends, as completed, when the iterator is closed.
    assert "6 steps (5 warm-up and 0 failed not counted)" in proc.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_prints_the_parents_summary(run_python):
    proc = run_python(
        """
        import os, sys, steptrace
        for _ in steptrace.steps(range(12)):
            pass
        pid = os.fork()
        if pid == 0:
            sys.exit(0)          # runs atexit handlers in the child
        os.waitpid(pid, 0)
        """
    )
    assert proc.stderr.count("steptrace summary") == 1
