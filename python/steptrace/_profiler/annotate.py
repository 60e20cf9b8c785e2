"""steptrace's steps and phases in torch.profiler's trace: while a profiler session runs, each
step and phase is also a ``record_function`` range named ``steptrace:step`` or
``steptrace:<phase>``, so ``steptrace show`` reads the trace with the exact phases instead of
op-name rules. Outside a session nothing is added: the scopes' ``__enter__``/``__exit__`` are the
C++ ones, and the annotating versions are put on their classes only while a session runs.

``hook`` (a capture armed, ``_capture``; ``flops="count"``): called with "begin" before each step
opens and "end" after it closes ("left" or "stop" when a steps() loop ends), and the core tracer
whose step it is, on the step's thread; the annotating versions are on the classes while it is
set, and annotate only while a session runs."""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple

from .. import _core

PREFIX = "steptrace:"
_local = threading.local()
active = False  # read by the steps() loop, which opens its step and fetch without scopes
hook: Optional[Callable[[str], None]] = None
watched = False  # active or hook: the one flag the steps() loop reads on its fast path
_classes: List[type] = []


def _stack() -> List[Tuple[Any, Any]]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def begin(owner: Any, name: str) -> None:
    """Opens the range ``steptrace:<name>`` on this thread, owned by ``owner``."""
    try:
        from torch.autograd.profiler import record_function

        rf = record_function(PREFIX + name)
        rf.__enter__()
    except Exception:  # an annotation must never break the traced program
        return
    _stack().append((owner, rf))


def end(owner: Any) -> None:
    """Closes the range ``owner`` opened last on this thread, if it is the innermost one."""
    stack = _stack()
    if stack and stack[-1][0] is owner:
        _, rf = stack.pop()
        try:
            rf.__exit__(None, None, None)
        except Exception:
            pass


def _annotated(cls: type) -> Tuple[Any, Any]:
    base = super(cls, cls)

    # The range encloses steptrace's own scope, so that a phase's figures leave out what the
    # profiler's range costs to open and close (tens of microseconds under a CUDA profiler) and
    # the trace's range is the phase's time plus steptrace's own two timestamps.
    def __enter__(self: Any) -> Any:
        if self._steptrace_step and hook is not None:
            hook("begin", getattr(self, "_steptrace_core", None))
        if active:
            begin(self, self._steptrace_annotation)
        try:
            base.__enter__(self)  # type: ignore[misc]
        except BaseException:
            end(self)
            raise
        return self

    def __exit__(self: Any, *exc: Any) -> Any:
        try:
            result = base.__exit__(self, *exc)  # type: ignore[misc]
        finally:
            end(self)
        if self._steptrace_step and hook is not None:
            hook("end", getattr(self, "_steptrace_core", None))
        return result

    return __enter__, __exit__


def register(cls: type) -> None:
    """A scope class whose instances carry ``_steptrace_annotation`` (the name after the prefix)."""
    _classes.append(cls)


def _install() -> None:
    for cls in _classes:
        cls.__enter__, cls.__exit__ = _annotated(cls)  # type: ignore[method-assign]


def _uninstall() -> None:
    for cls in _classes:
        for name in ("__enter__", "__exit__"):
            if name in cls.__dict__:
                delattr(cls, name)


def _watch(on: bool) -> None:
    """`watched`, here and in the steps() loop (_core.StepLoop), which reads it once an item."""
    global watched
    watched = on
    _core.set_loop_watched(on)


def arm(fn: Callable[[str], None]) -> None:
    """Calls ``fn`` at each step's start and end from now on (a capture is armed)."""
    global hook
    hook = fn
    _watch(True)
    _install()


def disarm() -> None:
    global hook
    hook = None
    _watch(active)
    if not active:
        _uninstall()


def start() -> None:
    """A profiler session starts: scopes annotate from now on."""
    global active
    active = True
    _watch(True)
    _install()


def stop() -> None:
    """The session stopped: the scopes are the C++ ones again (unless a capture is armed)."""
    global active
    active = False
    _watch(hook is not None)
    if hook is None:
        _uninstall()
