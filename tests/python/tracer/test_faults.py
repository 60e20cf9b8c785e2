"""Faults steptrace must survive without breaking the program it traces, each run as the
standalone program a user would write: a fork while another thread records, a sub-interpreter,
a storm of Ctrl-C around steps(), threads that run one after another, names that are not UTF-8."""

import json

import pytest

import steptrace
from steptrace import _core
from conftest import ROOT  # noqa: E402


def test_children_forked_while_a_thread_records_exit_and_answer(run_python):
    proc = run_python(
        """
        import os, sys, threading, time
        import steptrace

        stop = False
        def record():
            while not stop:
                with steptrace.step():
                    with steptrace.phase("busy"):
                        pass
        t = threading.Thread(target=record)
        t.start()
        pids = []
        for i in range(60):
            pid = os.fork()
            if pid == 0:
                s = steptrace.summary()        # a defined answer, never a hang
                assert s.steps == 0, s.steps
                steptrace.reset()
                steptrace.configure(warmup_steps=1)
                with steptrace.step():         # records nothing here
                    pass
                if i % 2:                      # both ways out: with and without exit handlers
                    os._exit(0)
                sys.exit(0)
            pids.append(pid)
        deadline = time.monotonic() + 60
        hung, failed = 0, 0
        for pid in pids:
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    failed += os.waitstatus_to_exitcode(status) != 0
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, 9); os.waitpid(pid, 0); hung += 1
                    break
                time.sleep(0.001)
        stop = True
        t.join()
        print(hung, failed, steptrace.summary().steps > 0)
        steptrace.configure(print_at_exit=False)
        """
    )
    assert proc.stdout.split() == ["0", "0", "True"], proc.stderr


def test_import_in_a_sub_interpreter_raises_a_clear_import_error(run_python):
    proc = run_python(
        """
        try:
            import _interpreters as interpreters      # Python 3.13 renamed it
        except ImportError:
            import _xxsubinterpreters as interpreters
        interp = interpreters.create()
        try:
            failure = interpreters.run_string(interp, "import steptrace")
            print("refused:", failure.formatted)      # 3.13 returns the sub-interpreter's exception
        except Exception as e:
            print("refused:", e)                      # before 3.13 it is raised here
        import steptrace                      # the main interpreter is unaffected
        print("main:", steptrace.summary().steps)
        """
    )
    assert "ImportError" in proc.stdout and "main interpreter" in proc.stdout
    assert "main: 0" in proc.stdout


def test_a_ctrl_c_storm_around_steps_leaves_nothing_open(run_python):
    proc = run_python(
        """
        import json, signal, sys, time
        import steptrace

        # Interrupts land only while armed: in the loop and in steptrace's cleanup as it unwinds,
        # never in this harness's own handler (its first act is to disarm). Python 3.9 and 3.10
        # run a signal handler between any two bytecodes, so one could land before that first
        # act: none is raised in this module while it handles an interrupt.
        armed = False
        def interrupt(signum, frame):
            if armed and not (frame.f_globals is globals() and sys.exc_info()[0] is KeyboardInterrupt):
                raise KeyboardInterrupt
        signal.signal(signal.SIGALRM, interrupt)

        # The spins are `while True: if ...: break`, not `while cond: pass`: on CPython 3.13 an
        # exception a signal handler raises in a tight loop's condition escapes every enclosing
        # `try` (CPython issue gh-130279), which would fail this harness, not steptrace.
        def slow_items():
            for i in range(10**9):
                end = time.perf_counter() + 0.0003
                while True:
                    if time.perf_counter() >= end:
                        break
                yield i

        steptrace.configure(warmup_steps=0, print_at_exit=False)
        signal.setitimer(signal.ITIMER_REAL, 0.0007, 0.0007)  # an interrupt every 0.7 ms
        caught = 0
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                armed = True
                for _ in steptrace.steps(slow_items()):
                    with steptrace.phase("compute"):
                        end = time.perf_counter() + 0.0002
                        while True:
                            if time.perf_counter() >= end:
                                break
            except KeyboardInterrupt:
                armed = False
                caught += 1
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        before = steptrace.summary().to_dict()
        for _ in steptrace.steps(range(10)):     # nothing open: no StepError
            with steptrace.phase("compute"):
                pass
        after = steptrace.summary().to_dict()
        print(json.dumps({"caught": caught, "new_steps": after["steps"] - before["steps"],
                          "errors": after["errors"], "failed": after["failed_steps"]}))
        """
    )
    out = json.loads(proc.stdout)
    assert out["caught"] >= 20  # the storm did land, many times
    assert out["new_steps"] == 10
    assert (out["errors"]["nested_steps"], out["errors"]["unbalanced_phases"]) == (0, 0)
    assert out["failed"] >= 1  # interrupts inside steptrace's part of the loop count as failed


def test_a_steps_loop_that_goes_with_something_open_closes_it(tracer):
    """The steps() loop is a C object (_core.StepLoop): when it goes, whatever it has open ends,
    a step as completed (the loop was left), and only on the thread that opened it."""
    from steptrace import _core

    loop = tracer.steps(range(10))
    assert type(loop) is _core.StepLoop
    next(loop)
    del loop  # a step open: it ends as completed
    with tracer.step():  # no StepError: nothing was left open
        pass

    def failing():
        yield 1
        raise OSError("the loader broke")

    loop = tracer.steps(failing())
    next(loop)
    with pytest.raises(OSError, match="the loader broke"):
        next(loop)  # the fetch failed: a failed step claims it, the error is the user's
    with pytest.raises(StopIteration):
        next(loop)  # finished: nothing more
    del loop
    loop = tracer.steps(range(10))
    next(loop)
    loop.close()
    loop.close()  # closed: nothing more
    # Dropped on another thread: that thread's own step is left alone.
    import threading

    loop = tracer.steps(range(10))
    next(loop)

    def elsewhere():
        with tracer.step():
            loop.close()  # noqa: F821  (bound before the thread starts; deleted after it ends)

    other = threading.Thread(target=elsewhere)
    other.start()
    other.join()
    del loop  # the backstop, on the thread that opened it: what is still open ends as failed
    with tracer.step():
        pass
    d = tracer.summary().to_dict()
    assert (d["steps"], d["failed_steps"]) == (6, 2)
    assert d["phases"]["input"]["calls"] == 3  # completed steps only: the three loops' steps that ended well
    assert (d["errors"]["nested_steps"], d["errors"]["unbalanced_phases"]) == (0, 0)


def test_threads_that_run_one_after_another_are_each_a_thread(tracer):
    import threading

    tracer.configure(warmup_steps=5)

    def work():
        for _ in range(10):
            with tracer.step():
                pass

    for _ in range(5):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    d = tracer.summary().to_dict()
    assert (d["steps"], d["warmup_steps"], d["threads"]) == (25, 25, 5)


def test_a_name_that_is_not_utf8_prints_and_is_written_whole(run_python, tmp_path):
    path = tmp_path / "odd.json"
    proc = run_python(
        """
        import steptrace
        from steptrace import _core
        odd = _core.register_phase(b"dec\\xff\\xfeode")   # as C++ code in the process might
        t = steptrace.default_tracer()._core
        for _ in range(8):
            with steptrace.step():
                t.begin_phase(odd); t.end_phase(odd)
        text = str(steptrace.summary())
        escaped = "dec\\\\xFF\\\\xFEode"
        rows = [line for line in text.splitlines() if line.startswith(escaped + " ")]
        # the diagnosis may name the phase too (it can take most of a step on a busy machine)
        print(len(rows), "\\ufffd" not in text)
        """,
        env={"STEPTRACE_JSON": str(path), "STEPTRACE_PRINT_AT_EXIT": "always"},
    )
    assert proc.stdout.strip() == "1 True"  # one row, each byte outside UTF-8 shown as \xHH, none replaced
    assert "dec\\xFF\\xFEode" in proc.stderr  # the exit report printed
    assert "dec\\xFF\\xFEode" in json.loads(path.read_text())["phases"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.json", "snippet.py"]  # no temporary left


def test_options_are_typed_and_every_one_is_listed(tracer):
    options = tracer.options()
    assert set(options) == set(steptrace.OPTIONS)
    assert options["warmup_steps"] == 0 and options["enabled"] is True and options["cupti"] is True
    assert options["print_at_exit"] == "never"
    tracer.configure(json_path=None, print_at_exit="auto")
    assert tracer.options()["json_path"] == "" and tracer.options()["print_at_exit"] == "auto"


@pytest.mark.parametrize("field, text", [("steps", "-3"), ("steps", "1e300"), ("wall_ms", "-1.0")])
def test_load_refuses_negative_or_absurd_numbers(tracer, tmp_path, field, text):
    with tracer.step():
        pass
    doc = tracer.summary().to_dict()
    raw = json.dumps(doc).replace(f'"{field}": {json.dumps(doc[field])}', f'"{field}": {text}', 1)
    path = tmp_path / "bad.json"
    path.write_text(raw)
    with pytest.raises(ValueError, match=f'"{field}" must be'):
        steptrace.load(path)


def test_the_table_shows_once_when_the_program_printed_it(run_python):
    proc = run_python(
        """
        import sys, steptrace
        for _ in steptrace.steps(range(12)):
            pass
        print(steptrace.summary(), file=sys.stderr)
        """
    )
    assert proc.stderr.count("steptrace summary") == 1
    assert proc.stderr.rstrip().endswith("STEPTRACE_PRINT_AT_EXIT=always prints it at exit too")


def test_a_summary_fetched_or_written_to_a_file_is_not_shown(run_python, tmp_path):
    proc = run_python(
        f"""
        import steptrace
        for _ in steptrace.steps(range(12)):
            pass
        s = steptrace.summary()
        s.to_json({str(tmp_path / "run.json")!r})
        s.to_dict(), s.label
        """
    )
    assert proc.stderr.count("steptrace summary") == 1 and "already shown" not in proc.stderr  # the exit table
    shown = run_python(
        """
        import steptrace
        for _ in steptrace.steps(range(12)):
            pass
        text = steptrace.summary().to_json()  # the JSON text in hand: shown
        """
    )
    assert "summary already shown (12 steps)" in shown.stderr and "── steptrace summary" not in shown.stderr


def test_labels_come_from_the_diagnosis():
    assert "LAUNCH-BOUND" in steptrace.LABELS and len(steptrace.LABELS) == len(set(_core.LABELS))


def test_the_readme_options_table_is_the_option_table():

    from steptrace._cli.docs import options_markdown

    readme = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    block = readme.split("<!-- options: begin")[1].split("<!-- options: end -->")[0]
    assert block.split("-->", 1)[1].strip() == options_markdown()


def _ctrl_c_during_the_exit_report(run_python, tmp_path, presses: int):
    return run_python(
        f"""
        import os, signal, time
        import steptrace, steptrace._report.html as html

        render = html.render
        def pressed_meanwhile(*args, **kwargs):  # Ctrl-C arrives while the exit report runs
            for _ in range({presses}):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
            return render(*args, **kwargs)
        html.render = pressed_meanwhile
        steptrace.configure(html_path={str(tmp_path / "run.html")!r}, print_at_exit="always")
        for _ in steptrace.steps(range(10)):
            pass
        """,
        check=False,
    )


def test_ctrl_c_during_the_exit_report_still_prints_the_table(run_python, tmp_path):
    proc = _ctrl_c_during_the_exit_report(run_python, tmp_path, presses=1)
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert "steptrace summary" in proc.stderr and (tmp_path / "run.html").exists()
    assert proc.stderr.count("Ctrl-C during the exit report") == 1


def test_ctrl_c_twice_stops_the_exit_report_with_one_line(run_python, tmp_path):
    proc = _ctrl_c_during_the_exit_report(run_python, tmp_path, presses=2)
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert proc.stderr.count("interrupted") == 1, proc.stderr


def test_spawned_workers_that_record_print_no_table_of_their_own(run_python, tmp_path):
    proc = run_python(
        """
        import multiprocessing as mp
        import steptrace

        def work():
            for _ in steptrace.steps(range(20)):  # a worker that records steps of its own
                pass

        if __name__ == "__main__":
            workers = [mp.get_context("spawn").Process(target=work) for _ in range(2)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
                assert w.exitcode == 0
            for _ in steptrace.steps(range(30)):
                pass
        """,
        env={"STEPTRACE_JSON": str(tmp_path / "run.json")},
    )
    assert proc.stderr.count("steptrace summary") == 1, proc.stderr  # the parent's alone
    assert json.loads((tmp_path / "run.json").read_text())["steps"] == 25  # the parent's, not a worker's 15
