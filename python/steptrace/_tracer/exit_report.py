"""The report at exit: the default tracer's table on stderr, its files (JSON, trace, HTML), the
ranks gathered, once, in the process that recorded, whatever Ctrl-C does meanwhile."""

from __future__ import annotations

import atexit
import json
import sys
from typing import Any

from .. import _core
from . import api as _api
from .._capture import capturer as _capture
from .._common import log as _log
from .._ranks import gather as _ranks
from .._live import rank_verdicts as _live_ranks
from .._live import windows as _windows
from .allocator import note_allocator
from .thread_facts import note_threads
from .scopes import note_never_entered


def _write_html(s: _core.Summary) -> None:
    """The HTML report (html_path) of the summary reported at exit."""
    path = s.path_for(_api._default.options()["html_path"])
    if path:
        try:
            _api.Summary(s).to_html(path)
        except OSError as e:
            _log.say(f"could not write the HTML report: {path}: {e.strerror or e}")


class _CtrlCHeld:
    """While the exit report runs: a first Ctrl-C is noted and the report goes on (the table is
    what the run was for); a second one stops it. Main thread only, where Python's handler runs."""

    def __init__(self) -> None:
        self.pressed = 0
        self.stopped = False  # the second press stopped the Python part (gather, HTML)
        self._before: Any = None

    def _note(self, signum: int, frame: Any) -> None:
        self.pressed += 1
        if self.pressed > 1:
            raise KeyboardInterrupt

    def __enter__(self) -> "_CtrlCHeld":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            try:
                self._before = signal.signal(signal.SIGINT, self._note)
            except (ValueError, OSError):  # not settable here: Ctrl-C acts as before
                self._before = None
        return self

    def __exit__(self, *exc: Any) -> bool:
        import signal

        if self._before is not None:
            signal.signal(signal.SIGINT, self._before)
        return False


def _in_a_worker_process() -> bool:
    """Whether this process was started by multiprocessing (DataLoader workers with spawn or
    forkserver, a Pool): its table and files are its parent's to report, unless asked for."""
    mp = sys.modules.get("multiprocessing")
    try:
        return mp is not None and mp.parent_process() is not None
    except Exception:  # an old or replaced multiprocessing: report as a program of its own
        return False


def _rank_windows_unstarted(core: Any) -> None:
    """Under a job with the live view on, live rank verdicts start with a steps() loop, configure()
    or a DDP model made after torch.distributed's start; a run whose loop was `with step()` and
    that met none of them had none, which is said rather than left silent."""
    if _live_ranks.wanted(core) and not _windows.listeners(core).holds(_live_ranks.keep_running):
        _log.say(
            "no live rank verdicts this run: they start with a `steptrace.steps()` loop, a DDP model, or "
            "steptrace.configure(...) called after torch.distributed's init_process_group; a `with "
            "steptrace.step():` loop alone starts none (call configure(live=...) after the init)"
        )


def _finished(end: Any, held: _CtrlCHeld) -> Any:
    """The summary to report and whether the program has seen it: the job's on rank 0 (gathered),
    with its HTML report. Seen only when the program printed its table or took its JSON text after
    the last step (a summary fetched, or written to a file, is not seen). A second Ctrl-C stops
    this part: this process's own summary is then reported."""
    seen = _api._default._shown_recorded == end.recorded
    try:
        s, seen = _ranks.gather_at_exit(_api._default._gather)(end.own, seen)
        _write_html(s)
        return s, seen
    except KeyboardInterrupt:
        held.stopped = True
    except Exception as e:  # a gather that failed: this process's own summary is reported
        _log.say(f"reporting this process's own summary: {type(e).__name__}: {e}")
    return end.own, seen


def _report_at_exit() -> None:
    if _in_a_worker_process() and _api._default.options()["print_at_exit"] != "always":
        try:  # no table, and no json_path/trace_path/html_path written over the parent's
            _api._default.configure(print_at_exit="never", json_path=None, trace_path=None, html_path=None)
            _core.default_tracer().exit_report()  # done: the library's own exit hook says nothing
        except Exception:
            pass
        return
    _capture.finish_all()  # a capture still recording: written with the steps it has, before the report
    held = _CtrlCHeld()
    try:
        with held:
            core = _core.default_tracer()
            note_allocator(core)
            note_threads(core)
            note_never_entered(_api._default)
            _ranks.notice(core)  # the summary at exit carries the rank even where nothing noticed it before
            _rank_windows_unstarted(core)
            text = ""
            end = core.exit_summary()  # the report in one direction: C++'s summary out, finished here, C++ writes
            if end is not None:
                s, seen = end.own, end.seen
                if end.to_finish:
                    s, seen = _finished(end, held)
                text = core.exit_write(end, s, seen)
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()
            else:
                unused_scopes_said(_api._default, core.summary())
    except KeyboardInterrupt:
        _log.say("the exit report was interrupted (Ctrl-C twice)")
        return
    except Exception:  # never turn a clean exit into a failing one
        pass
    if held.stopped:
        _log.say("the exit report was interrupted (Ctrl-C twice): this process's table only, no gather or HTML report")
    elif held.pressed:
        _log.say("Ctrl-C during the exit report: it was finished first (press it twice to stop it)")


atexit.register(_report_at_exit)


def unused_scopes_said(tracer: Any, own: Any) -> None:
    """At exit: a run that called step() or phase() but recorded nothing (no step, no phase
    outside a step) was most likely calling them bare (``steptrace.step()``, not ``with
    steptrace.step():``): said in one line."""
    if (
        own.recorded
        or _api._forked.child
        or not (tracer._step_call.asked or tracer._phases)
        or not tracer.options()["enabled"]
    ):
        return  # STEPTRACE_DISABLE: nothing is recorded by design
    if tracer._core.open_steps():
        return  # entered and never left: the exit report has said so
    if not json.loads(own.json()).get("unscoped_phases"):
        called = "step()" if tracer._step_call.asked else "phase()"
        _log.say(
            f"steptrace.{called} was called but nothing was recorded: it is a context manager or a "
            f"decorator (`with steptrace.{called[:-2]}(...):`, `@steptrace.{called[:-2]}`); called bare it "
            "does nothing"
        )
