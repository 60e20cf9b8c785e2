"""Capture on trouble: when the run turns bad, a profiler trace of just the next few steps, read
back by steptrace and diagnosed (docs/python.md, "Capture on trouble").

    steptrace.configure(capture="slow,label,signal", live=10)   # or STEPTRACE_CAPTURE=slow
    steptrace.capture(steps=5)                                  # or now, from the code

The triggers are the core's rule (``_core.CaptureRule``, steptrace/capture.hpp: ``slow``, ``label``,
``phase=``, ``file=``), weighed here on steptrace's window thread, once a window, never on the
loop's; ``straggler`` (through torch.distributed's store) and ``signal`` (SIGUSR2) are this
module's. A trigger only arms the capture: where the program has imported torch by the next step's
start, torch.profiler starts on the loop's own thread there (``_annotate.hook``; the loop pays
nothing until then), records ``capture_steps`` steps with steptrace's annotations, and stops;
the trace is written to ``capture_dir`` as ``<run>-rank<r>-step<s>.pt.trace.json.gz``, read back,
and its diagnosis said in one block. Without torch the core captures those steps itself (its
flight recorder's records, a Chrome trace). At most ``capture_max`` captures a run, the next
trigger waits ``COOL_DOWN`` windows after each, and none while another torch.profiler session
runs (said once).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import weakref
from typing import Any, Dict, List, Optional, Set, Tuple

from .. import _core
from .._profiler import annotate as _annotate
from .._common import log as _log
from .files import CaptureWriteError, own_folder, run_name, write_trace
from .inflation import inflation
from .plans import COOL_DOWN, PLAN_KEY, StragglerPlans  # noqa: F401  (PLAN_KEY: the tests' name for it)

MAX_STEPS = 1000  # the most steps a capture takes: the capture_steps option's bound (core/config.cpp)


class Capturer(StragglerPlans):
    """One tracer's captures: its triggers, the capture in flight, and those done."""

    def __init__(self, tracer: Any) -> None:
        # Weakly: the listener, the signal handler and the step hook hold this capturer from
        # threads and process-wide tables; a tracer the program drops is freed all the same (a
        # dropped tracer with `capture` set lived on, its collector printing "0 steps").
        self._tracer_ref = weakref.ref(tracer)
        self._lock = threading.RLock()  # RLock: a SIGUSR2 handler runs on the thread it interrupts
        self._rule: Optional[Any] = None  # _core.CaptureRule of the `capture` option
        self.done: List[Dict[str, Any]] = []
        self._pending: Optional[Dict[str, Any]] = None
        self._running: Optional[Dict[str, Any]] = None
        self._listening = False
        self._said_busy = False
        self._said_limit = False
        self._said_store = False
        self._said_plan = False
        self._said_folder = False
        self._waited = 0  # windows a plan's capture has waited for its step
        self._planned = 0  # straggler plans made (rank 0)
        self._captured: Set[int] = set()  # rank 0: the ranks captured as the straggler in this stretch
        self._calm = 0  # rank 0: windows in a row with no straggler
        self._plan_cool = 0  # rank 0: windows before the next plan
        self._plan_seen = 0  # the last plan this rank read
        self._index: Optional[int] = None  # the index of the step beginning, while a capture waits for one
        self.kept: List[int] = []  # the kept steps the last request wrote (the retroactive capture)
        self._kept_wait: Optional[Dict[str, Any]] = None  # a median rank: the straggler's kept steps, awaited
        self._kept_told: Set[str] = set()  # rank 0: the kept steps each rank wrote, said once
        self._plans_made: List[Dict[str, Any]] = []  # rank 0: its plans (capture_max at most)

    @property
    def _tracer(self) -> Any:
        tracer = self._tracer_ref()
        if tracer is None:
            raise ReferenceError("steptrace: this capture's tracer was dropped")
        return tracer

    # -- triggers --------------------------------------------------------------------------

    def configure(self, spec: str) -> None:
        with self._lock:
            self._rule = _core.CaptureRule(spec) if spec else None
        if self._has("signal"):
            self._install_signal()
        if self._rule is not None and not self._listening:
            self._listening = True
            self._tracer.on_window(_weakly(self))

    def _install_signal(self) -> None:
        """SIGUSR2 arms a capture. Python lets only the main thread install a handler: from any
        other thread nothing is installed and that is said, so a `kill -USR2` is not taken for a
        capture. Signals that come while one is handled, or while a capture is armed or running,
        are coalesced: the handler never re-enters itself (a storm of signals once raised
        RecursionError in the program)."""
        if threading.current_thread() is not threading.main_thread():
            _log.say(
                "capture: the `signal` trigger is not installed: configure(capture=...) was called from a "
                "thread other than the main one, where Python cannot install a SIGUSR2 handler; call it "
                "from the main thread (or set STEPTRACE_CAPTURE before the program starts)"
            )
            return
        before = signal.getsignal(signal.SIGUSR2)
        if getattr(before, "_steptrace", False):
            return  # installed already (configure called again)
        busy = [False]

        def on_signal(signum: int, frame: Any) -> None:  # the program's own handler still runs
            if busy[0]:
                return  # a signal inside the handler: coalesced with the one being handled
            busy[0] = True
            try:
                if self._pending is None and self._running is None:
                    self.request("signal SIGUSR2")
                if callable(before) and getattr(before, "_steptrace", False) is False:
                    before(signum, frame)
            finally:
                busy[0] = False

        on_signal._steptrace = True  # type: ignore[attr-defined]
        signal.signal(signal.SIGUSR2, on_signal)

    def on_window(self, window: Dict[str, Any]) -> None:
        """Weighs the triggers on one live window (steptrace's window thread)."""
        with self._lock:
            rule = self._rule
            if rule is None:
                return
            share = window.get(f"{rule.phase}_share") if rule.phase else None
            reason = rule.weigh(
                window.get("step_p50_ms") or 0.0,
                window.get("step_p95_ms") or 0.0,
                window.get("label") or "",
                float("nan") if share is None else float(share),
                window.get("step_max_ms") or 0.0,
            )
            if reason:  # a window's trigger: the window's slowest steps were what tripped it; a file, the last
                self.request(reason, back="recent" if rule.fired == "file" else "window")
        if self._has("straggler"):
            try:
                self._job_window(window)
            except Exception as e:  # a store gone (a rank died): said once, the run goes on
                if not self._said_store:
                    self._said_store = True
                    _log.say(f"capture: the straggler trigger cannot reach torch.distributed's store ({e!r})")

    def _has(self, trigger: str) -> bool:
        return self._rule is not None and self._rule.has(trigger)

    def _cool(self, windows: int = COOL_DOWN) -> None:
        if self._rule is not None:
            self._rule.cool(windows)

    def request(self, reason: str, steps: Optional[int] = None, at: Optional[int] = None, back: str = "recent") -> bool:
        """Arms a capture of ``steps`` steps (capture_steps) from the next step's start (or from
        step ``at``, as the loop counts from 0): whether it did. First the kept steps ``back`` names
        (the core's ring, capture_back: "recent", "window", "slowest" or "none") are written at once: the
        retroactive capture, of the steps that tripped the trigger."""
        with self._lock:
            if self._pending or self._running:
                return False
            if len(self.done) >= int(self._tracer.options()["capture_max"]):
                if not self._said_limit:
                    self._said_limit = True
                    _log.say(f"capture: {reason}, but this run has had its {len(self.done)} captures (capture_max)")
                return False
            n = int(steps if steps is not None else self._tracer.options()["capture_steps"])
            if not 1 <= n <= MAX_STEPS:
                raise ValueError(
                    f"steptrace: capture(steps=...) takes 1 to {MAX_STEPS} steps (as the capture_steps "
                    f"option), not {steps!r}"
                )
            self._tracer._core.set_fact("run.program", run_name())  # the core's capture files named as Python's
            if _torch_absent():  # a process without torch: the core's own capture, from now
                return bool(self._tracer._core.capture(n, reason, back))
            try:  # a folder that is not the user's is refused now, before torch.profiler runs for nothing
                os.close(own_folder(self._tracer.options()["capture_dir"] or "."))
            except CaptureWriteError as e:
                if not self._said_folder:  # once: a trigger asks again every window
                    self._said_folder = True
                    _log.say(f"capture: {reason}, but {e}")
                return False
            self._pending = {"reason": reason, "steps": n, "at": at}
            self._index = None
            _annotate.arm(self._at_step)
        # Written by the core's collector and said there; the steps chosen, for the other ranks.
        self.kept = list(self._tracer._core.capture_kept(reason, back)) if back != "none" else []
        return True

    # -- the capture, on the loop's thread --------------------------------------------------

    def _at_step(self, where: str, owner: Any = None) -> None:
        with self._lock:
            if where == "begin" and self._pending is not None and self._running is None:
                at = self._pending["at"]
                if at is not None:  # a step agreed with the other ranks: counted to it
                    self._index = self._tracer._core.summary().recorded if self._index is None else self._index + 1
                    if self._index < at:
                        return
                    if self._index > at:
                        _log.say(f"capture: {self._pending['reason']}, but this rank was past step {at} already")
                        self._pending = None
                        _annotate.disarm()
                        return
                self._start(self._pending)
                self._pending = None
            elif where == "end" and self._running is not None:
                self._running["left"] -= 1
                if self._running["left"] == 0:
                    self._finish()
            elif where in ("stop", "left") and self._running is not None:  # the loop (or the program) ended first
                if where == "left":  # the loop was left inside a step, which ended with it
                    self._running["left"] -= 1
                self._running["steps"] -= self._running["left"]
                if self._running["steps"] > 0:
                    self._finish()
                else:  # not one step finished: nothing to read
                    run, self._running = self._running, None
                    _annotate.disarm()
                    run["prof"].__exit__(None, None, None)

    def _start(self, pending: Dict[str, Any]) -> None:
        if sys.modules.get("torch") is None:  # the program has not imported torch: the core's capture, from this step
            _annotate.disarm()
            self._tracer._core.capture(
                pending["steps"], pending["reason"], "none"
            )  # the kept steps went at the request
            return
        if _annotate.active:  # another torch.profiler session holds the process's profiler
            if not self._said_busy:
                self._said_busy = True
                _log.say(f"capture: {pending['reason']}, but a torch.profiler session is running: no capture")
            _annotate.disarm()
            return
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                activities.append(ProfilerActivity.CUDA)
            prof = profile(activities=activities)
            started = time.perf_counter()
            prof.__enter__()
        except Exception as e:  # no torch, or a profiler that will not start: said, never raised
            _log.say(f"capture: {pending['reason']}, but torch.profiler could not start ({e!r})")
            _annotate.disarm()
            return
        first = self._tracer._core.summary().recorded  # steps seen so far: this one's index
        self._running = dict(pending, prof=prof, left=pending["steps"], first=first, started=started)

    def _finish(self) -> None:
        run, self._running = self._running, None
        _annotate.disarm()
        assert run is not None
        reason, first, n = run["reason"], run["first"], run["steps"]
        try:
            run["prof"].__exit__(None, None, None)
            path = self._write(run["prof"], first)
            summary = json.loads(_core.read_file(os.fsencode(path), "", path, self._host_facts()).json())
        except CaptureWriteError as e:
            _log.say(f"capture of steps {first}-{first + n - 1} ({reason}) failed: {e}")
            return
        except Exception as e:
            _log.say(f"capture of steps {first}-{first + n - 1} ({reason}) failed: {e!r}")
            return
        finally:
            self._cool()
        diag = summary.get("diagnosis") or {}
        record = {
            "reason": reason,
            "first_step": first,
            "last_step": first + max(n, 1) - 1,
            "steps": n,
            "rank": _rank(),
            "label": diag.get("label"),
            "evidence": inflation(json.loads(self._tracer._core.summary().json()), summary) + diag.get("evidence", ""),
            "advice": (diag.get("advice") or [""])[0],
            "path": path,
            "cost_s": round(time.perf_counter() - run["started"], 3),
            "tool": "torch.profiler",
        }
        self.done.append(record)
        # Kept with the core's captures: the summary, the JSON at exit, the table, the next window.
        _core.note_capture(self._tracer._core, record)
        sys.stderr.write(block(record))
        sys.stderr.flush()
        self._to_jsonl(record)

    def _host_facts(self) -> List[Tuple[str, str]]:
        """What the trace cannot hold and this process knows: its cores and its DataLoader's settings,
        so the capture's advice is the live table's (not "num_workers=4, not above the core count")."""
        facts = json.loads(self._tracer._core.summary().json()).get("facts") or {}
        return [(k, str(v)) for k, v in facts.items() if k == "host.cpus" or k.startswith("dataloader.")]

    def _to_jsonl(self, record: Dict[str, Any]) -> None:
        """The live JSONL gets the capture as a line of its own: {"capture": {...}}."""
        _log.to_jsonl(self._tracer.options()["jsonl_path"], _rank(), {"capture": record}, "capture")

    def _write(self, prof: Any, first: int) -> str:
        return write_trace(prof, self._tracer.options()["capture_dir"] or ".", _rank(), first)


def block(c: Dict[str, Any]) -> str:
    """The capture's lines on stderr (the core's words, whoever captured)."""
    return str(_core.capture_block(c))


def _torch_absent() -> bool:
    """Torch cannot be imported here (not installed, or blocked): decided at once, not at the step."""
    if "torch" in sys.modules:
        return sys.modules["torch"] is None
    import importlib.util

    try:
        return importlib.util.find_spec("torch") is None
    except (ImportError, ValueError):
        return True


def fields(captures: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A live window's capture keys: the newest of ``captures`` (those since the last window)."""
    if not captures:
        return {}
    c = captures[-1]
    return {
        "capture_first_step": c["first_step"],
        "capture_label": c["label"],
        "capture_path": c["path"],
        "capture_reason": c["reason"],
    }


def _rank() -> int:
    dist = sys.modules.get("torch.distributed")
    try:
        return int(dist.get_rank()) if dist is not None and dist.is_available() and dist.is_initialized() else 0
    except Exception:
        return 0


_all: "weakref.WeakSet[Capturer]" = weakref.WeakSet()


def of(tracer: Any) -> Capturer:
    """The tracer's capturer, made at first use."""
    c = getattr(tracer, "_capturer", None)
    if c is None:
        c = tracer._capturer = Capturer(tracer)
        _all.add(c)
    return c


def _weakly(c: Capturer) -> Any:
    """The capturer's window listener, holding it weakly (the listeners hold what they are given)."""
    ref = weakref.ref(c)

    def on_window(window: Dict[str, Any]) -> None:
        found = ref()
        if found is not None and found._tracer_ref() is not None:
            found.on_window(window)

    return on_window


def finish_all() -> None:
    """At exit: a capture still recording is written with the steps it finished."""
    for c in list(_all):
        try:
            c._at_step("stop")
        except Exception:  # never turn a clean exit into a failing one
            pass


def _forget_in_child() -> None:
    """A forked child inherits no capture: the parent's armed or running one is the parent's to
    finish (the child finishing it wrote under the parent's name a block of steps it never ran,
    and its exit hung in torch.profiler's cleanup). The child's capturers start idle."""
    ours = False
    for c in list(_all):
        ours = ours or c._running is not None
        c._lock = threading.RLock()  # a lock some parent thread held at the fork stays held here
        c._pending = c._running = c._index = None
    if ours:
        _annotate.stop()  # the session was the capture's: the child's scopes stop annotating
        _core.exit_skips_destructors()  # torch.profiler's own cleanup would hang the child's exit()
    _annotate.disarm()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
