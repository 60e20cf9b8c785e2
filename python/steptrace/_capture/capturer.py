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

import gzip
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Dict, List, Optional, Set

from .. import _core
from .._profiler import annotate as _annotate
from .._common import log as _log

COOL_DOWN = _core.CAPTURE_COOL_DOWN  # windows a trigger waits after a capture ends
PLAN_KEY = "steptrace/capture/plan"  # rank 0's choice, in torch.distributed's store


class Capturer:
    """One tracer's captures: its triggers, the capture in flight, and those done."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer
        self._lock = threading.RLock()  # RLock: a SIGUSR2 handler runs on the thread it interrupts
        self._rule: Optional[Any] = None  # _core.CaptureRule of the `capture` option
        self.done: List[Dict[str, Any]] = []
        self._unsent: List[Dict[str, Any]] = []  # done, not yet in a live window
        self._pending: Optional[Dict[str, Any]] = None
        self._running: Optional[Dict[str, Any]] = None
        self._listening = False
        self._said_busy = False
        self._said_limit = False
        self._said_store = False
        self._planned = 0  # straggler plans made (rank 0)
        self._captured: Set[int] = set()  # rank 0: the ranks captured as the straggler in this stretch
        self._calm = 0  # rank 0: windows in a row with no straggler
        self._plan_cool = 0  # rank 0: windows before the next plan
        self._plan_seen = 0  # the last plan this rank read
        self._index: Optional[int] = None  # the index of the step beginning, while a capture waits for one

    # -- triggers --------------------------------------------------------------------------

    def configure(self, spec: str) -> None:
        with self._lock:
            self._rule = _core.CaptureRule(spec) if spec else None
        if self._has("signal") and threading.current_thread() is threading.main_thread():
            before = signal.getsignal(signal.SIGUSR2)

            def on_signal(signum: int, frame: Any) -> None:  # the program's own handler still runs
                self.request("signal SIGUSR2")
                if callable(before) and getattr(before, "_steptrace", False) is False:
                    before(signum, frame)

            on_signal._steptrace = True  # type: ignore[attr-defined]
            signal.signal(signal.SIGUSR2, on_signal)
        if self._rule is not None and not self._listening:
            self._listening = True
            self._tracer.on_window(self.on_window)

    def on_window(self, window: Dict[str, Any]) -> None:
        """Weighs the triggers on one live window (steptrace's window thread)."""
        with self._lock:
            rule = self._rule
            if rule is None:
                return
            share = window.get(f"{rule.phase}_share") if rule.phase else None
            reason = rule.weigh(window.get("step_p50_ms") or 0.0, window.get("step_p95_ms") or 0.0,
                                window.get("label") or "", float("nan") if share is None else float(share))
            if reason:
                self.request(reason)
        if self._has("straggler"):
            try:
                self._job_window(window)
            except Exception as e:  # a store gone (a rank died): said once, the run goes on
                if not self._said_store:
                    self._said_store = True
                    _log.say(f"capture: the straggler trigger cannot reach torch.distributed's store ({e!r})")

    def _job_window(self, window: Dict[str, Any]) -> None:
        """Rank 0 plans a capture when the live rank windows (``_live_ranks``: the STRAGGLER rule
        on every rank's window) name a new straggler: it and the median rank, from the same step;
        each rank named arms its capture for that step."""
        from .._ranks import gather as _ranks

        job = _ranks.notice(self._tracer._core)
        if job is None or job.world_size < 2:
            return
        if job.rank == 0 and "straggler_rank" in window and self._planned < int(self._tracer.options()["capture_max"]):
            slow = int(window["straggler_rank"])
            lagging = slow >= 0
            # Once per straggler a stretch: a rank is captured again only after COOL_DOWN windows in
            # a row that were judged on every rank's row and named no straggler. The windows while
            # a plan's capture runs, and the usual wait after it, neither plan nor count: a rank
            # stalled by its own capture (torch.profiler takes seconds) is named meanwhile, or none.
            self._plan_cool = max(0, self._plan_cool - 1)
            if self._plan_cool == 0:
                if lagging:
                    self._calm = 0
                elif not window.get("ranks_late") and not window.get("ranks_missing"):
                    self._calm += 1
                if self._calm >= COOL_DOWN:
                    self._captured.clear()
            new = lagging and slow not in self._captured and self._plan_cool == 0
            if new:
                self._captured.add(slow)
                self._planned += 1
                self._plan_cool = COOL_DOWN + 2
                self._cool(COOL_DOWN + 2)  # the plan's own capture, then the usual wait
                at = int(window.get("step", 0)) + max(10, 2 * int(window.get("steps") or 0))
                median_rank = int(window["straggler_median_rank"])
                plan = {"id": self._planned, "step": at, "ranks": [slow, median_rank],
                        "reason": f"straggler: rank {slow}, `{window['straggler_phase']}` "
                                  f"+{_core.format_ms(window['straggler_excess_ms'])} ms a step over the median "
                                  f"rank {median_rank}"}
                job.store.set(PLAN_KEY, json.dumps(plan))
        if job.store.check([PLAN_KEY]):
            plan = json.loads(job.store.get(PLAN_KEY))
            if plan["id"] != self._plan_seen:
                self._plan_seen = plan["id"]
                if job.rank in plan["ranks"]:
                    role = "the straggler" if job.rank == plan["ranks"][0] else "a median rank, for contrast"
                    self.request(f"{plan['reason']}; rank {job.rank} is {role}", at=plan["step"])

    def _has(self, trigger: str) -> bool:
        return self._rule is not None and self._rule.has(trigger)

    def _cool(self, windows: int = COOL_DOWN) -> None:
        if self._rule is not None:
            self._rule.cool(windows)

    def request(self, reason: str, steps: Optional[int] = None, at: Optional[int] = None) -> bool:
        """Arms a capture of ``steps`` steps (capture_steps) from the next step's start (or from
        step ``at``, as the loop counts from 0): whether it did."""
        with self._lock:
            if self._pending or self._running:
                return False
            if len(self.done) >= int(self._tracer.options()["capture_max"]):
                if not self._said_limit:
                    self._said_limit = True
                    _log.say(f"capture: {reason}, but this run has had its {len(self.done)} captures (capture_max)")
                return False
            n = int(steps if steps is not None else self._tracer.options()["capture_steps"])
            if n < 1:
                raise ValueError(f"steptrace: capture(steps=...) takes a positive int, not {steps!r}")
            if _torch_absent():  # a process without torch: the core's own capture, from now
                return bool(self._tracer._core.capture(n, reason))
            self._pending = {"reason": reason, "steps": n, "at": at}
            self._index = None
            _annotate.arm(self._at_step)
            return True

    # -- the capture, on the loop's thread --------------------------------------------------

    def _at_step(self, where: str) -> None:
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
            self._tracer._core.capture(pending["steps"], pending["reason"])
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
            from .._traces.load import load

            summary = load(path).to_dict()
        except Exception as e:
            _log.say(f"capture of steps {first}-{first + n - 1} ({reason}) failed: {e!r}")
            return
        finally:
            self._cool()
        diag = summary.get("diagnosis") or {}
        record = {"reason": reason, "first_step": first, "last_step": first + max(n, 1) - 1, "steps": n,
                  "rank": _rank(), "label": diag.get("label"), "evidence": diag.get("evidence", ""),
                  "advice": (diag.get("advice") or [""])[0], "path": path,
                  "cost_s": round(time.perf_counter() - run["started"], 3), "tool": "torch.profiler"}
        self.done.append(record)
        self._unsent.append(record)
        sys.stderr.write(block(record))
        sys.stderr.flush()
        self._to_jsonl(record)

    def _to_jsonl(self, record: Dict[str, Any]) -> None:
        """The live JSONL gets the capture as a line of its own: {"capture": {...}}."""
        _log.to_jsonl(self._tracer.options()["jsonl_path"], _rank(), {"capture": record}, "capture")

    def window_fields(self) -> Dict[str, Any]:
        """For the next live window (listeners, trackers): the newest capture since the last."""
        with self._lock:
            unsent, self._unsent = self._unsent, []
        return fields(unsent)

    def _write(self, prof: Any, first: int) -> str:
        folder = self._tracer.options()["capture_dir"] or "."
        os.makedirs(folder, exist_ok=True)
        script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "run"
        run = os.path.splitext(os.path.basename(script))[0]
        if run == "__main__":  # python -m package: the package's name
            run = os.path.basename(os.path.dirname(script))
        run = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run) or "run"
        path = os.path.join(folder, f"{run}-rank{_rank()}-step{first}.pt.trace.json.gz")
        # Temporary files made new (O_EXCL: nothing planted at a guessable name is followed), the
        # gzip renamed into place whole.
        fd_raw, raw = tempfile.mkstemp(dir=folder, suffix=".json.tmp")
        fd_gz, packed = tempfile.mkstemp(dir=folder, suffix=".gz.tmp")
        os.close(fd_raw)
        try:
            prof.export_chrome_trace(raw)
            with open(raw, "rb") as src, os.fdopen(fd_gz, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb") as dst:
                fd_gz = -1  # the file object owns it now
                shutil.copyfileobj(src, dst)
            os.replace(packed, path)
        finally:
            if fd_gz >= 0:
                os.close(fd_gz)
            for leftover in (raw, packed):
                if os.path.exists(leftover):
                    os.remove(leftover)
        return path


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
    return {"capture_first_step": c["first_step"], "capture_label": c["label"], "capture_path": c["path"],
            "capture_reason": c["reason"]}


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


def window_fields(core: Any) -> Dict[str, Any]:
    """The capture fields for a live window of the tracer whose core is ``core``."""
    for c in list(_all):
        if c._tracer._core is core:
            return c.window_fields()
    return {}


def finish_all() -> None:
    """At exit: a capture still recording is written with the steps it finished."""
    for c in list(_all):
        try:
            c._at_step("stop")
        except Exception:  # never turn a clean exit into a failing one
            pass
