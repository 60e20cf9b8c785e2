"""Live windows for listeners inside the program: ``on_window(fn)`` and what the tracker adapters
and the Lightning / Hugging Face callbacks stand on.

One daemon thread per tracer waits on the core's window queue (without the GIL) and calls each
listener there, never on the training thread. The core keeps the latest two windows: a listener
that falls behind loses the oldest, and a call that raises (anything, SystemExit too) loses its
window; both are counted in
the summary's errors (``windows_dropped``, ``window_calls_failed``), the first failure said once.
Windows come every ``live`` seconds, or every 10 s when ``live`` is 0 (cpp/src/core/README.md,
"Windows").
"""

from __future__ import annotations

import _thread
import atexit
import json
import os
import sys
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional

from .. import _core
from .._capture import capturer as _capture
from . import rank_verdicts as _live_ranks
from .._common import log as _log

# The built-in phases a window reports by name, whatever else the loop records.
BUILT_IN = ("input", "h2d", "compute", "wait", "other")
_WAIT_S = 0.5  # how often the thread looks up from its wait to see whether it should stop
_JOIN_S = 1.0  # how long exit waits for a listener's call in progress
_LAST_S = 10.0  # how long exit waits for the listeners' calls on the run's last window (a tracker's upload)


def figures(summary: Dict[str, Any], step: int, at_s: float) -> Dict[str, Any]:
    """A window's figures as listeners and trackers get them (docs/python.md, "Trackers and notebooks", lists the
    keys): numbers, but for ``label`` and ``gain_cause``, which are text or None."""
    out: Dict[str, Any] = {"step": step, "at_s": at_s, "steps": summary["steps"]}
    if summary["steps"]:
        out["step_p50_ms"] = summary["step_ms"]["p50"]
        out["step_p95_ms"] = summary["step_ms"]["p95"]
        out["step_max_ms"] = summary["step_ms"]["max"]
        phases = summary["phases"]
        for name in BUILT_IN:
            if name in phases:
                out[f"{name}_ms"] = phases[name]["mean_ms"]
                out[f"{name}_share"] = phases[name]["share"]
    gpu = summary.get("gpu")
    if gpu:
        out["gpu_busy_share"] = gpu["busy_share"]
    ceiling = summary.get("ceiling")  # told its FLOPs (flops_per_step, flops="count"): model FLOP/s, MFU
    if ceiling:
        out["model_tflops"] = ceiling["tflops"]
        if ceiling["mfu"] > 0:
            out["mfu"] = ceiling["mfu"]
    diagnosis = summary["diagnosis"]
    label = diagnosis["label"]
    out["label"] = label
    out["label_code"] = _core.LABELS.index(label) + 1 if label in _core.LABELS else 0
    gains = diagnosis.get("gains") or {}
    if gains:
        cause = max(gains, key=gains.get)
        out["gain_cause"], out["gain_share"] = cause, gains[cause]
    out.update(_capture.fields(summary.get("captures") or []))  # the core's captures since the last window
    hang = summary.get("hang")  # a step open now: how long, and whether past hang_after (a suspected hang)
    if hang:
        out["open_step_s"] = hang["stuck_s"]
        out["hang_s"] = hang["stuck_s"] if hang["suspected"] else 0.0
        out["hang_phase"] = hang["phase"] if hang["suspected"] else ""
        if hang["suspected"] and hang["report"]:
            out["hang_report"] = hang["report"]
    node = summary.get("node")  # a rank's node, in a job: each reading it took (-1: not read)
    if node:
        out.update({f"node_{k}": v for k, v in node.items() if k != "gpu" and v is not None and v >= 0})
    return out


def numbers(window: Dict[str, Any]) -> Dict[str, float]:
    """The window's numeric figures under ``steptrace/``: what a scalar logger takes (the label
    as its code, ``label_code``; ``at_s`` and ``step`` left to the logger's own axis)."""
    return {
        f"steptrace/{key}": float(value)
        for key, value in window.items()
        if key not in ("step", "at_s") and isinstance(value, (int, float)) and not isinstance(value, bool)
    }


class Listeners:
    """The listeners of one tracer and the thread that calls them. It holds its tracer weakly: a
    tracer dropped by the program is freed, and its window thread ends with it."""

    def __init__(self, core: _core.Tracer) -> None:
        self._core = weakref.ref(core)
        self._calls: List[Callable[[Dict[str, Any]], Any]] = []
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._stopping = False
        self._failure_said = False
        self._forked = False  # a forked child's copy: its tracer gives no windows, so no thread
        self._draining = False  # at exit: the windows queued are called, then the thread ends
        self.delivered = 0  # windows handed to the listeners
        global _stop_registered
        if not _stop_registered:  # at the first, after the exit report's: atexit runs last first
            _stop_registered = True
            atexit.register(_stop_all)
        _live.add(self)

    def add(self, fn: Callable[[Dict[str, Any]], Any]) -> None:
        if not callable(fn):
            raise TypeError(f"steptrace.on_window: expected a function of one window, got {type(fn).__name__}")
        core = self._core()
        with self._lock:
            self._calls.append(fn)
            if core is not None and not self._forked and (self._thread is None or not self._thread.is_alive()):
                self._stopping = False
                core.listen_windows()
                self._thread = threading.Thread(
                    target=self._run, args=(os.getpid(),), name="steptrace-windows", daemon=True
                )
                self._thread.start()

    def add_once(self, fn: Callable[[Dict[str, Any]], Any]) -> None:
        with self._lock:
            if fn in self._calls:
                return
        self.add(fn)

    def holds(self, fn: Callable[[Dict[str, Any]], Any]) -> bool:
        with self._lock:
            return fn in self._calls

    def remove(self, fn: Callable[[Dict[str, Any]], Any]) -> None:
        with self._lock:
            if fn in self._calls:
                self._calls.remove(fn)

    def finish(self) -> None:
        """At the end of the run: the window in progress goes to every listener (however short;
        the last seconds of every run, and a run shorter than one window), then the thread ends.
        A run that sent no window says why, in one line."""
        core = self._core()
        thread = self._thread
        if core is not None and thread is not None and thread.is_alive() and not self._forked:
            core.end_live()
            del core
            self._draining = True
            thread.join(_LAST_S)
            if self.delivered == 0 and self._calls:
                _log.say(
                    "no window reached the listeners (log_to, on_window): the run counted no step "
                    "(steps in warm-up are not counted: warmup_steps)"
                )
        self.stop()

    def stop(self) -> None:
        """No more windows: the thread ends once a call in progress returns (waited for briefly)."""
        with self._lock:
            self._stopping = True
            thread, self._thread = self._thread, None
        core = self._core()
        if core is not None:
            core.stop_listening()
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_S)

    def _run(self, pid: int) -> None:
        # Ends when stopped, when its tracer is freed, or in a child forked by a listener (the
        # child's copy of this loop must not go on: the core's forked copy gives no windows).
        while not self._stopping and os.getpid() == pid:
            core = self._core()
            if core is None:
                return
            got = core.next_window(0 if self._draining else _WAIT_S)
            del core  # held only while waiting: the tracer stays the program's to free
            if got is None:
                if self._draining:
                    return  # the last window was called: nothing more comes
                continue
            self.delivered += 1
            summary, step, at_s, slot = got
            window = figures(json.loads(summary.json()), step, at_s)
            _live_ranks.window(self._core(), summary, window, slot)  # a job's rank windows: rank 0 adds its verdict
            del got, summary
            with self._lock:
                calls = list(self._calls)
            for fn in calls:
                self._call(fn, window, pid)
                if os.getpid() != pid or self._stopping:
                    return

    def _call(self, fn: Callable[[Dict[str, Any]], Any], window: Dict[str, Any], pid: int) -> None:
        """One listener's call: whatever it raises, even SystemExit or KeyboardInterrupt, is
        counted and the loop goes on; a KeyboardInterrupt goes on to the main thread, as Python
        sends Ctrl-C there. In a child the listener forked, this thread is all the child has: it
        ends as the listener left it (sys.exit's status; 1, with the traceback, for anything
        else raised), never in a window loop of its own."""
        try:
            fn(dict(window))
        except BaseException as e:
            if os.getpid() != pid:
                _end_child(e)
            core = self._core()
            if core is not None:
                core.count_window_failure()
            if isinstance(e, KeyboardInterrupt):
                _thread.interrupt_main()
            if not self._failure_said:
                self._failure_said = True
                _log.say(
                    f"a window listener ({getattr(fn, '__qualname__', fn)!s}) raised "
                    f"{type(e).__name__}: {e}; its windows are counted as failed in the summary "
                    "(said once)"
                )

    def after_fork(self) -> None:
        """In a forked child: no thread was copied (or the copy is the listener that forked, and
        ends after it), and the tracer there records nothing, so no thread starts there."""
        self._forked = True
        self._thread = None
        self._calls = []
        self._lock = threading.Lock()


def _end_child(e: BaseException) -> None:
    """A child forked by a listener ends with what its listener raised, as a program's main
    thread would (a thread's SystemExit would otherwise be swallowed, the status lost)."""
    import traceback

    if isinstance(e, SystemExit):
        code = e.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
        status = code if isinstance(code, int) else (0 if code is None else 1)
    else:
        traceback.print_exception(type(e), e, e.__traceback__)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status & 0xFF)


_by_tracer: "weakref.WeakKeyDictionary[_core.Tracer, Listeners]" = weakref.WeakKeyDictionary()
_live: "weakref.WeakSet[Listeners]" = weakref.WeakSet()
_stop_registered = False


def listeners(core: _core.Tracer) -> Listeners:
    """The one Listeners object of a tracer."""
    found = _by_tracer.get(core)
    if found is None:
        found = _by_tracer[core] = Listeners(core)
    return found


def _stop_all() -> None:
    """At exit, before the tracers' own exit reports: each run's last window to its listeners."""
    for each in list(_live):
        each.finish()


def _forget_in_child() -> None:
    for each in list(_live):
        each.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class Latest:
    """The latest live window, kept for a callback that logs it from the training thread (the
    Lightning and Hugging Face callbacks): a window not yet taken when the next one comes is
    superseded by it."""

    def __init__(self, core: _core.Tracer) -> None:
        self._listeners = listeners(core)
        self._window: Optional[Dict[str, Any]] = None
        self._lock = threading.Lock()
        self._listeners.add(self._keep)

    def _keep(self, window: Dict[str, Any]) -> None:
        with self._lock:
            self._window = window

    def take(self) -> Optional[Dict[str, Any]]:
        with self._lock:
            window, self._window = self._window, None
        return window

    def close(self) -> None:
        self._listeners.remove(self._keep)
