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
from .scopes import note_never_entered


def _seen_when_shown(finish: Any) -> Any:
    """The exit hook, told the program has seen the summary only when it printed its table or took
    its JSON text after the last step (a summary fetched, or written to a file, is not seen)."""

    def hook(own: _core.Summary, seen: bool) -> Any:
        return finish(own, _api._default._shown_recorded == own.recorded)

    return hook


def _with_html(finish: Any) -> Any:
    """The exit hook, then the HTML report (html_path) of the summary it reports."""

    def hook(own: _core.Summary, seen: bool) -> Any:
        s, seen = finish(own, seen)
        path = s.path_for(_api._default.options()["html_path"])
        if path:
            try:
                _api.Summary(s).to_html(path)
            except OSError as e:
                _log.say(f"could not write the HTML report: {path}: {e.strerror or e}")
        return s, seen

    return hook


class _CtrlCHeld:
    """While the exit report runs: a first Ctrl-C is noted and the report goes on (the table is
    what the run was for); a second one stops it. Main thread only, where Python's handler runs."""

    def __init__(self) -> None:
        self.pressed = 0
        self.stopped = False  # the second press stopped the Python part (gather, HTML)
        self._before: Any = None

    def guard(self, finish: Any) -> Any:
        """The exit hook, stopped by a second Ctrl-C: this process's own summary is then reported."""

        def hook(own: _core.Summary, seen: bool) -> Any:
            try:
                return finish(own, seen)
            except KeyboardInterrupt:
                self.stopped = True
                return own, seen

        return hook

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
            note_never_entered(_api._default)
            _ranks.notice(core)  # the summary at exit carries the rank even where nothing noticed it before
            _rank_windows_unstarted(core)
            text = core.exit_report(
                held.guard(_seen_when_shown(_with_html(_ranks.gather_at_exit(_api._default._gather))))
            )
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
