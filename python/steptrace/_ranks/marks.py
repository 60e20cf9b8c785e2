"""torch.distributed's collectives marked as entered and left, per process group, for a hang's
report and the ranks' live rows (``_core.collective_entered``/``collective_left``): the k-th call
of a group on one rank is the k-th on every rank of it, so where the ranks' numbers part is where
the job stopped. The module's functions are wrapped when torch imports ``torch.distributed``
(calls through a name bound before that are not marked); a wrapper adds two calls into the core
(under a microsecond each) and changes nothing the call does or raises. "Left" is the return of
the call: for an ``async_op`` call or NCCL, that is its launch, not its completion. See
cpp/src/report/README.md, "Hangs".
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, Optional

from .. import _core
from .._common.when_imported import when_imported

_MODULE = "torch.distributed"
# The collectives marked: every rank of the group calls each, in the same order.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "monitored_barrier",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
)
_names: Dict[int, str] = {}  # a process group's name, by id(group): looked up once a group
_MAX_NAMES = 256


def install() -> None:
    when_imported(_MODULE, _wrap_all)


def group_name(dist: Any, group: Any) -> str:
    """The group's name as torch names it (the default group's too), else its place in this process."""
    key = id(group)
    found = _names.get(key)
    if found is not None:
        return found
    name = ""
    try:
        pg = group if group is not None else dist.distributed_c10d._get_default_group()
        name = str(getattr(pg, "group_name", "") or dist.distributed_c10d._get_process_group_name(pg))
    except Exception:  # not initialised, or another torch: one name for the default group
        name = ""
    name = name or ("0" if group is None else f"group{len(_names)}")
    if len(_names) < _MAX_NAMES:
        _names[key] = name
    return name


def _wrap_all(dist: Any) -> None:
    for name in COLLECTIVES:
        fn = getattr(dist, name, None)
        if fn is None or getattr(fn, "_steptrace", False):
            continue
        setattr(dist, name, _wrapped(dist, name, fn))


def _group_index(fn: Callable[..., Any]) -> Optional[int]:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return params.index("group") if "group" in params else None


def _wrapped(dist: Any, kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    at = _group_index(fn)
    entered, left = _core.collective_entered, _core.collective_left

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        group = kwargs.get("group") if "group" in kwargs else (args[at] if at is not None and len(args) > at else None)
        name = group_name(dist, group)
        seq = entered(name, kind)
        try:
            return fn(*args, **kwargs)
        finally:
            left(name, seq)

    call._steptrace = True  # type: ignore[attr-defined]
    return call
