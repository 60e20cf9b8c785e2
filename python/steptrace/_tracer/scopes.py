"""The scopes a tracer hands out, as Python subclasses of the core's C types: each also decorates
a function (sync or async), and carries the name its range gets in a torch.profiler trace."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from .. import _core
from .._profiler import annotate as _annotate

F = TypeVar("F", bound=Callable[..., Any])


class _Decorates:
    """Lets a context manager also decorate a function; the scope closes on every exit path."""

    __slots__ = ()

    def __call__(self, fn: F) -> F:
        scope = self
        try:
            scope._steptrace_decorates = True  # type: ignore[attr-defined]  # entered when fn runs, not before
        except AttributeError:
            pass
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awaited(*args: Any, **kwargs: Any) -> Any:
                with scope:  # type: ignore[attr-defined]
                    return await fn(*args, **kwargs)

            return awaited  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with scope:  # type: ignore[attr-defined]
                return fn(*args, **kwargs)

        return wrapped  # type: ignore[return-value]


class _StepScope(_Decorates, _core.StepScope):
    _steptrace_annotation = "step"  # its range's name in a torch.profiler trace (_annotate)
    _steptrace_step = True  # a step: an armed capture's hook runs around it (_annotate.hook)

    def __init__(self, core: Any, *stream: Any, **named: Any) -> None:  # the C type took them at __new__
        self._steptrace_core = core  # whose step: told to the hook


class _RequestStepScope(_Decorates, _core.RequestStepScope):
    """A step inside a coroutine: it belongs to its task (a contextvars context), not to the
    thread, so any number are open on one event loop and phases follow them across awaits."""

    _steptrace_annotation = "step"
    _steptrace_step = True

    def __init__(self, core: Any, *args: Any) -> None:
        super().__init__(core, *args)
        self._steptrace_core = core


class _BatchStep(_Decorates):
    """A step that serves ``size`` requests as one batch: counted apart from requests."""

    __slots__ = ("_scope", "_core", "_size")

    def __init__(self, scope: Any, core: _core.Tracer, size: int) -> None:
        self._scope, self._core, self._size = scope, core, size

    def __enter__(self) -> "_BatchStep":
        self._scope.__enter__()
        self._core.set_batch_size(self._size)
        return self

    def __exit__(self, *exc: Any) -> bool:
        self._scope.__exit__(*exc)
        return False


class _PhaseScope(_Decorates, _core.PhaseScope):
    _steptrace_annotation = ""  # set per scope: the phase's name
    _steptrace_step = False


def note_never_entered(tracer: Any) -> None:
    """A phase made and never entered (``steptrace.phase("compute")`` without ``with``): its time is
    `other`, and a step of nothing else reads WAIT-HEAVY. Said once, and the fact
    ``python.phases_never_entered`` lets the diagnosis give the right advice."""
    names = sorted(
        {
            key[0] if isinstance(key, tuple) else key
            for key, scope in list(tracer._phases.items())
            if isinstance(scope, _core.PhaseScope)
            and not scope.entered
            and not getattr(scope, "_steptrace_decorates", False)
        }
    )
    if not names and not tracer._never_entered:
        return
    tracer._never_entered = names
    tracer._core.set_fact("python.phases_never_entered", ", ".join(names[:8]))
    if names and not tracer._said_never_entered:
        tracer._said_never_entered = True
        from .._common import log as _log

        _log.say(
            f"steptrace.phase({names[0]!r}) was made but never entered: it is a context manager or a "
            f"decorator (`with steptrace.phase({names[0]!r}):`); called bare it records nothing, and its time "
            "is `other`"
        )


_annotate.register(_StepScope)
_annotate.register(_RequestStepScope)
_annotate.register(_PhaseScope)


class _ExcludeScope(_Decorates, _core.ExcludeScope):
    pass
