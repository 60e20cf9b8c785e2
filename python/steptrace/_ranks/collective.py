"""The wait at DistributedDataParallel's gradient all-reduce, timed as the built-in `wait` phase
of the default tracer with the phase `collective` inside it (the host blocked on the other ranks:
communication, which the diagnosis weighs as COMM-BOUND, not a sync), with no change to what DDP computes and no comm hook taken from the user.

How: every DDP model gets a forward hook (``register_forward_hook``, beside any of the user's).
It puts a gradient hook on the model's outputs; when backward starts (the first of them fires)
it queues an autograd final callback. Final callbacks run in order once every node of the
backward has run, and DDP queues its own (it waits for the all-reduce of each gradient bucket)
later, when its last bucket is ready. So ours runs first, when backward's own work is done, and
opens `wait`; it queues a second one, which runs after DDP's and closes `wait`. The phase is
opened on the thread that ran the forward only: on a GPU, where autograd's device threads run
the callbacks and NCCL makes the stream wait rather than the host, nothing is recorded.

Each measured wait (ms) is also kept for the last ``WAITS_KEPT`` backward passes: the k-th
all-reduce of one rank is the k-th of every rank, so rank 0 can say which rank was the slowest
in each step (the one that waited least). Installed at ``import steptrace`` on torch's DDP
class, when torch imports it; ``collective_wait=False`` turns it off for models built after.
See cpp/src/report/README.md, "Many ranks".
"""

from __future__ import annotations

import collections
import functools
import sys
import threading
import time
from typing import Any, Callable, Deque, Iterator, List, Tuple

from .. import _core
from .._common.when_imported import when_imported

_DDP_MODULE = "torch.nn.parallel.distributed"
WAITS_KEPT = 256
_MAX_OUTPUTS = 8  # output tensors given a gradient hook per forward


class _Backward:
    """The one backward in flight (DDP runs one per process at a time)."""

    def __init__(self) -> None:
        self.armed = False  # its first gradient hook has queued the callback
        self.open = False  # `wait` is open
        self.thread = 0  # the thread that ran the forward
        self.began_ns = 0
        self.seq = 0  # the open wait's number among DDP's all-reduce waits (_core.collective_entered)
        self.waits: Deque[float] = collections.deque(maxlen=WAITS_KEPT)
        self.measured = 0
        self.phase = _core.PhaseScope(_core.default_tracer(), _core.WAIT)  # host time only, no stream
        # inside `wait`: the host blocked on the other ranks, communication rather than a sync
        self.collective = _core.PhaseScope(_core.default_tracer(), _core.register_phase(_core.COLLECTIVE_PHASE))


_state = _Backward()


def install() -> None:
    when_imported(_DDP_MODULE, _wrap)


def recent_waits(core: Any) -> Tuple[List[float], int]:
    """The last waits (ms, oldest first) and how many were measured: the default tracer's only."""
    if core is not _core.default_tracer():
        return [], 0
    return list(_state.waits), _state.measured


def _wrap(module: Any) -> None:
    cls = module.DistributedDataParallel
    original = cls.__init__
    if getattr(original, "_steptrace", False):
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            _watch(self)
        except Exception:  # the model works as before, without the wait timed
            pass

    __init__._steptrace = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


# Called with the default tracer's core when a DDP model is made (the process group is up: this
# process's rank is known from here on). Set by _api to _ranks.notice, so that this module and
# _ranks, which reads the waits kept here, do not import each other.
on_model: Callable[[Any], Any] = lambda core: None


def _watch(model: Any) -> None:
    core = _core.default_tracer()
    on_model(core)
    if core.options()["collective_wait"] == "1":
        model.register_forward_hook(_after_forward)


def _tensors(output: Any, depth: int = 0) -> Iterator[Any]:
    """Tensors in a model's output that need a gradient: the output itself, or inside tuples,
    lists and dicts (a Hugging Face ModelOutput is a dict), two levels deep."""
    torch = sys.modules["torch"]
    if isinstance(output, torch.Tensor):
        if output.requires_grad:
            yield output
    elif depth < 2 and isinstance(output, (tuple, list)):
        for item in output:
            yield from _tensors(item, depth + 1)
    elif depth < 2 and isinstance(output, dict):
        for item in output.values():
            yield from _tensors(item, depth + 1)


def _after_forward(module: Any, inputs: Any, output: Any) -> None:
    if not sys.modules["torch"].is_grad_enabled():
        return
    if _state.open:  # the last backward raised inside DDP's wait: its `wait` ends here, unmeasured
        _state.open = False
        _state.collective.__exit__(None, None, None)
        _state.phase.__exit__(None, None, None)
    _state.armed = False
    _state.thread = threading.get_ident()
    for n, tensor in enumerate(_tensors(output)):
        if n == _MAX_OUTPUTS:
            break
        tensor.register_hook(_backward_started)


def _engine() -> Any:
    return sys.modules["torch"].autograd.Variable._execution_engine


def _backward_started(grad: Any) -> None:
    if not _state.armed:
        _state.armed = True
        _engine().queue_callback(_work_done)
    # returns None: the gradient goes on unchanged


def _work_done() -> None:
    """Every node of the backward has run; DDP's wait for its all-reduce comes next."""
    if threading.get_ident() != _state.thread:
        _state.armed = False
        return
    _state.open = True
    _state.seq = _core.collective_entered("ddp", "all_reduce")  # numbered as every rank numbers DDP's
    _state.began_ns = time.perf_counter_ns()
    _state.phase.__enter__()
    _state.collective.__enter__()
    _engine().queue_callback(_wait_done)


def _wait_done() -> None:
    if not _state.open:
        return
    _state.collective.__exit__(None, None, None)
    _state.phase.__exit__(None, None, None)
    _core.collective_left("ddp", _state.seq)
    _state.open = False
    _state.armed = False
    _state.waits.append((time.perf_counter_ns() - _state.began_ns) / 1e6)
    _state.measured += 1
