"""The Python face of the C++ tracer. The timing itself happens in C++ (steptrace._core)."""

from __future__ import annotations

import functools
import platform
import inspect
import os
import sys
import weakref
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, TypeVar

from .. import _core
from .._capture import capturer as _capture
from .._ranks import collective as _collective
from .._ranks import marks as _marks
from .._common import stacks as _stacks
from .._live import rank_verdicts as _live_ranks
from .._common import log as _log
from . import loop as _loop
from .._common import paths as _paths
from .._profiler import handover as _profiler
from .._ranks import gather as _ranks
from .._live import trackers as _trackers
from .._live import windows as _windows
from . import flops as _flops
from .allocator import note_allocator
from .thread_facts import note_threads
from .loader_facts import tell_settings
from .scopes import _BatchStep, _ExcludeScope, _PhaseScope, _RequestStepScope, _StepScope, note_never_entered
from .._common.options import OPTIONS, _option_text, _option_value  # noqa: F401  (OPTIONS: re-exported by steptrace)
from .._report.summary import Summary

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

StepError = _core.StepError
_modules = sys.modules
_MAX_CACHED_PHASES = 8192  # phase scopes kept per tracer for reuse (the registry folds past 4096 names)
LABELS = tuple(_core.LABELS)  # every label the diagnosis can give


def _is_data_loader(obj: Any) -> bool:
    """Whether ``obj`` is a torch DataLoader (torch is never imported here: only if the program did)."""
    data = _modules.get("torch.utils.data")
    return data is not None and isinstance(obj, data.DataLoader)


def _in_event_loop() -> bool:
    """Whether this thread runs an asyncio event loop now (a coroutine is calling)."""
    aio = _modules.get("asyncio")
    return aio is not None and aio._get_running_loop() is not None


def _start_rank_windows(core: Any) -> None:
    """Under a job of 2 ranks or more with the live view on, rank 0's live rank verdicts need every
    window to reach the window thread (``keep_running``). Started by whatever tells steptrace of
    the job first: a steps() loop, configure(), a DDP model; a ``with step()`` loop itself runs
    no Python of steptrace's, and the exit says when none of them came (``rank_windows_unstarted``)."""
    if _live_ranks.wanted(core):  # it notices the rank
        _windows.listeners(core).add_once(_live_ranks.keep_running)


def _stream_handle(stream: Any) -> int:
    """The integer handle of a CUDA stream (0 is the default stream); None: torch's current one."""
    if stream is None:
        stream = _modules["torch"].cuda.current_stream()
    handle = getattr(stream, "cuda_stream", stream)
    if not isinstance(handle, int) or isinstance(handle, bool) or handle < 0:
        raise TypeError(f"steptrace: stream must be a CUDA stream handle (int) or have .cuda_stream, not {stream!r}")
    return handle


class Tracer:
    """An independent tracer. The module functions (``steptrace.step`` ...) use the default one,
    which C++ code in the same process shares."""

    def __init__(self, **options: Any) -> None:
        self._init(_core.Tracer())
        if options:
            self.configure(**options)

    @classmethod
    def _wrap(cls, core: _core.Tracer) -> "Tracer":
        self = cls.__new__(cls)
        self._init(core)
        return self

    _made = 0  # Tracer objects made in this process: each rank makes them in the same order

    def _init(self, core: _core.Tracer) -> None:
        self._core = core
        core.capture_triggers_elsewhere()  # Python weighs them (_capture.py): torch.profiler, the job's store
        core.set_fact("python.version", platform.python_version())  # the advice may name Python's tools
        self._gather = _ranks.Gather(core, "default" if core is _core.default_tracer() else f"tracer{Tracer._made}")
        Tracer._made += 1
        self._step = _StepScope(core)
        # step() in C: with no argument, outside an event loop, it is self._step; the rest comes here
        self._step_call = _core.StepCall(self._step, functools.partial(Tracer.step, self))
        self.step = self._step_call.call  # type: ignore[method-assign]
        self._request_step = _RequestStepScope(core)
        self._steps_on: Dict[int, _StepScope] = {}  # by stream handle
        self._phases: Dict[Any, _PhaseScope] = {}  # by name, or by (name, stream handle)
        self._never_entered: List[str] = []  # phases made and never entered, as last noted
        self._said_never_entered = False
        # phase(name) in C: a name seen before is one dict lookup there, the rest comes here
        self._phase_table = _core.Phases(core, functools.partial(Tracer.phase, self))
        self.phase = self._phase_table.phase  # type: ignore[method-assign]
        self._excludes: Dict[str, _ExcludeScope] = {}
        self._feeding: Any = None  # weakref to the loader whose fetches feed the steps
        self._shown_recorded = -1  # steps recorded when the program last printed a summary's table or JSON

    def step(self, fn: Optional[F] = None, *, stream: Any = None, batch: Optional[int] = None) -> Any:
        """One iteration of your loop, or one request: ``with tracer.step():`` or ``@tracer.step``.

        An exception inside propagates unchanged and the step counts as failed. Opening a step
        on a thread that already has one open raises StepError. ``stream`` (as for ``phase``;
        0 is the default stream) also times the whole step on the device with CUDA events.

        Inside a coroutine (an asyncio task) the step belongs to the task: any number are open
        on one event loop, and phases opened in the task, on either side of an ``await``, are
        its own. ``batch=n``: this step serves n requests as one batch (a server's GPU worker);
        batches are counted apart from requests, with their sizes."""
        self._step_call.asked = True  # at exit, a run that asked and recorded nothing says why
        if fn is not None and inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awaited(*args: Any, **kwargs: Any) -> Any:
                with self.step(stream=stream, batch=batch):
                    return await fn(*args, **kwargs)

            return awaited
        if stream is None and _in_event_loop():
            scope: Any = self._request_step
        else:
            scope = self._step if stream is None else self._step_on(_stream_handle(stream))
        if batch is not None:
            if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
                raise ValueError(f"steptrace: batch must be a positive int (requests served), not {batch!r}")
            scope = _BatchStep(scope, self._core, batch)
        return scope if fn is None else scope(fn)

    def _step_on(self, handle: int) -> _StepScope:
        scope = self._steps_on.get(handle)
        if scope is None:
            scope = self._steps_on[handle] = _StepScope(self._core, handle)
        return scope

    def phase(self, name: str, stream: Any = None) -> _PhaseScope:
        """A named scope inside a step: ``with tracer.phase("compute"):`` or as a decorator.

        Built-in names: input, h2d, compute, wait; any other name is a custom phase.
        ``stream`` (a CUDA stream: an int handle or an object with ``.cuda_stream``, such as
        ``torch.cuda.Stream``) also times the phase on the device with CUDA events. Where torch
        has initialised CUDA, a phase defaults to torch's current stream. A disabled tracer gives
        a no-op that records nothing (a function it decorates records once the tracer is enabled)."""
        if not isinstance(name, str):
            raise TypeError(f"steptrace: a phase name must be a str, not {type(name).__name__}")
        if _forked.child:
            _forked.say_phase()
        if stream is None:
            torch = _modules.get("torch")  # never imported here: only used if the program did
            if torch is None or not torch.cuda.is_initialized():
                scope = self._phases.get(name)
                return scope if scope is not None else self._new_phase(name, None)
        handle = _stream_handle(stream)  # 0, the default stream, is timed too
        scope = self._phases.get((name, handle))
        return scope if scope is not None else self._new_phase(name, handle)

    def _new_phase(self, name: str, handle: Optional[int]) -> _PhaseScope:
        scope = _PhaseScope(self._core, _core.register_phase(name), handle)
        scope._steptrace_annotation = name
        if len(self._phases) < _MAX_CACHED_PHASES:  # names built from data must not grow it forever
            self._phases[name if handle is None else (name, handle)] = scope
        if handle is None and type(name) is str:
            self._phase_table.remember(name, scope)
        return scope

    def exclude(self, name: str) -> _ExcludeScope:
        """Sets time aside: ``with tracer.exclude("checkpoint"):`` or as a decorator.

        Time inside is in no step (an open step's window skips it, and any phase, fetch or step
        inside goes with it) and is reported apart under ``name``: calls, total, mean and share
        of the run. For checkpoints, validation and logging inside or between steps."""
        if not isinstance(name, str):
            raise TypeError(f"steptrace: an exclude name must be a str, not {type(name).__name__}")
        scope = self._excludes.get(name)
        if scope is None:
            scope = self._excludes[name] = _ExcludeScope(self._core, _core.register_phase(name))
        return scope

    def steps(self, iterable: Iterable[T], *, stream: Any = None) -> Iterator[T]:
        """Yields the items of ``iterable``; each is one step, and getting it is its ``input``.

        Leaving the loop (break, return, an exception in its body) ends the open step when the
        iterator is closed; Python does not tell an iterator which of these it was, so that step
        counts as completed (use ``with steptrace.step():`` inside the loop for failed steps).
        If getting an item raises, or an interrupt (Ctrl-C) lands inside steptrace, the
        exception propagates unchanged and that step counts as failed. Whatever happens, nothing
        stays open on the thread. ``stream``: as for ``step``."""
        handle = None if stream is None else _stream_handle(stream)
        _start_rank_windows(self._core)
        feeds = getattr(iterable, "_steptrace_feeds_steps", None)
        if feeds is not None:
            feeds()  # this loader's settings are the ones the advice describes
        elif _is_data_loader(iterable):  # a plain DataLoader: its settings too, as instrument() reads them
            self._claim_feeding(iterable, surely=True)
            tell_settings(self, iterable)
        return _loop.steps(self._core, iterable, handle)

    def _claim_feeding(self, loader: Any, surely: bool) -> bool:
        """Whether ``loader`` feeds the steps: the one given to steps(), else the first
        instrumented loader iterated (a validation loader comes later, or inside exclude())."""
        current = self._feeding() if self._feeding is not None else None
        if surely or current is None or current is loader:
            self._feeding = weakref.ref(loader)
            return True
        return False

    def summary(self, *, gather: bool = False) -> Summary:
        """The summary of every step completed so far (safe while other threads record).

        With torch.distributed initialised it says which rank it is from; at exit rank 0 prints
        and writes the job's. ``gather=True``, called on every rank (like a collective), sends
        each rank's to rank 0, which gets the job's at once: its own breakdown, a row per rank,
        the missing ranks and STRAGGLER (it waits at most ``gather_timeout_s`` for the others);
        the other ranks get their own."""
        note_allocator(self._core)
        note_threads(self._core)
        note_never_entered(self)
        job = _ranks.notice(self._core)
        own = self._core.summary()
        return Summary(self._gather(own, job) if job is not None and gather else own, self)

    def window(self) -> Summary:
        """The statistics since the last window (or the start, or reset), and a new window
        starts; the whole-run summary() is left as it is. For a live view or a JSON-lines log;
        a metrics endpoint serves ``metrics().prometheus()``, which no read consumes. Host
        figures only."""
        return Summary(self._core.window())

    def metrics(self) -> Summary:
        """For a server's metrics endpoint: ``metrics().prometheus()``. Counts and sums since the
        start (or reset), which only grow, so Prometheus' ``rate()`` is right; p50/p95/p99 over
        the steps of the last minute (at most the latest 4096). Reading it consumes nothing:
        every scraper sees the same figures. Host figures only."""
        return Summary(self._core.metrics())

    def on_window(self, fn: F) -> F:
        """Calls ``fn(window)`` with each live window's figures (a dict: ``step``, ``step_p50_ms``,
        each built-in phase's ``_ms`` and ``_share``, ``label``, ``gain_share`` ...), every
        ``live`` seconds or every 10 s, on a thread of steptrace's, never the loop's. A slow or
        failing ``fn`` never slows the loop: its windows are dropped and counted in the
        summary's errors. Returns ``fn``, so it works as a decorator."""
        _windows.listeners(self._core).add(fn)
        return fn

    def log_to(self, target: Any) -> None:
        """Sends each live window to an experiment tracker: a TensorBoard ``SummaryWriter``, a
        ``wandb`` run, the ``mlflow`` module, or one of the names ``"tensorboard"``, ``"wandb"``,
        ``"mlflow"``. The figures go under ``steptrace/`` at the loop's step count, as
        ``on_window`` gives them. A tracker that is not installed is said in one line."""
        log = _trackers.adapter(target)
        if log is not None:
            self.on_window(log)

    def reset(self) -> None:
        """Forget everything recorded so far; warm-up starts again."""
        self._core.reset()

    def configure(self, **options: Any) -> None:
        """Set options (``steptrace.OPTIONS`` lists each with its variable, default and meaning).

        An unknown option or a bad value raises ValueError naming it; nothing is changed then."""
        self._core.configure({key: _option_text(key, value) for key, value in options.items()})
        if "capture" in options:
            _capture.of(self).configure(self.options()["capture"])
        if options.get("flops") == "count":
            _flops.arm(self)
        _start_rank_windows(self._core)  # the live view turned on under a job: any loop gets the verdicts

    def capture(self, steps: Optional[int] = None) -> bool:
        """Captures the next ``steps`` steps (``capture_steps``, 5) with torch.profiler (without
        torch, steptrace's own records of them), from the
        next step's start: the trace goes to ``capture_dir``, and steptrace reads it back and says
        its diagnosis in one block (also in ``summary().to_dict()["captures"]``). False when a
        capture is already armed or running, or the run has had ``capture_max``."""
        if steps is not None and (
            not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= _capture.MAX_STEPS
        ):
            raise ValueError(
                f"steptrace: capture(steps=...) takes 1 to {_capture.MAX_STEPS} steps (as the "
                f"capture_steps option), not {steps!r}"
            )
        return _capture.of(self).request("on demand: capture()", steps)

    def options(self) -> Dict[str, Any]:
        """Every option's current value."""
        return {name: _option_value(name, text) for name, text in self._core.options().items()}

    def set_fact(self, key: str, value: Any) -> None:
        """Tells the diagnosis about the setup (integrations use ``dataloader.num_workers`` ...)."""
        self._core.set_fact(key, str(value))


class _Forked:
    """Whether this process is a forked child (a DataLoader worker with fork): its tracers record
    nothing, so a phase opened there is said, once."""

    child = False
    said = False

    def in_child(self) -> None:  # at fork; phase(name) in C then takes the Python path, which says it
        self.child = True
        _core.phases_take_python_path()

    def say_phase(self) -> None:
        if not self.said:
            self.said = True
            _log.say(
                "a phase opened in a forked process (a DataLoader worker?) is not collected: the worker's "
                "tracer records nothing. steps(loader) times each fetch in the parent as `input`; or make a "
                "Tracer in the worker for its own steps"
            )


_forked = _Forked()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked.in_child)


_default = Tracer._wrap(_core.default_tracer())


def default_tracer() -> Tracer:
    """The process-wide tracer the module functions use (shared with C++ code in the process)."""
    return _default


step = _default.step
phase = _default.phase
exclude = _default.exclude
steps = _default.steps
summary = _default.summary
window = _default.window
on_window = _default.on_window
log_to = _default.log_to
metrics = _default.metrics
reset = _default.reset
configure = _default.configure
capture = _default.capture
if os.environ.get("STEPTRACE_CAPTURE"):  # the core read it; the triggers are Python's
    _capture.of(_default).configure(_default.options()["capture"])
if _default.options()["flops"] == "count":  # STEPTRACE_FLOPS=count: the counting is Python's
    _flops.arm(_default)


_core.set_gpu_library_dirs(_paths.cupti_dirs())
_profiler.install()  # hand CUPTI to torch.profiler sessions, whenever torch is imported
_collective.on_model = _start_rank_windows  # a DDP model made: the rank is known, live verdicts start
_collective.install()  # time DDP's all-reduce wait, whenever torch imports DDP
_marks.install()  # number torch.distributed's collectives, for a hang's report and the ranks' rows
_stacks.install()  # Python's stacks in a hang report, where CPython does not export its dump
