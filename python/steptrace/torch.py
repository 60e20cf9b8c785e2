"""PyTorch integration. Importing this module does not import torch; using it does.

    import steptrace, steptrace.torch as st

    loader = st.instrument(DataLoader(ds, batch_size=64, num_workers=0))
    for batch in steptrace.steps(loader):          # or: for batch in loader: with steptrace.step():
        batch = st.to_device(batch, "cuda")        # an `h2d` phase
        with steptrace.phase("compute"):
            train_step(batch)

``instrument`` times how long the training thread blocks in ``next()`` as ``input`` (a loader
with workers is charged only the wait, not the workers' time) and tells the diagnosis the
loader's settings, so the advice can name them: those of the loader given to
``steptrace.steps()``, else of the first instrumented loader iterated, never of a validation
loader iterated later. Fetches between steps are claimed by the step that follows; iterate a
validation loader inside ``steptrace.exclude("validation")`` to keep it out of the steps.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, MutableMapping
from typing import Any, Iterator, Optional

from ._tracer.api import Tracer, default_tracer
from ._tracer.loader_facts import tell_settings


class InstrumentedLoader:
    """Wraps a DataLoader (or any iterable of batches); everything else passes through."""

    _steptrace_times_input = True  # steptrace.steps() leaves the fetch timing to us

    def __init__(self, loader: Any, tracer: Tracer, phase: str) -> None:
        self._loader = loader
        self._tracer = tracer
        self._phase_name = phase
        self._phase = tracer.phase(phase)

    # A tracer is of its process: copies share it, a pickled loader re-attaches to the default
    # tracer of the process that unpickles it (a spawned worker, a checkpoint read back).
    def __copy__(self) -> "InstrumentedLoader":
        return InstrumentedLoader(self._loader, self._tracer, self._phase_name)

    def __deepcopy__(self, memo: dict) -> "InstrumentedLoader":
        import copy

        return InstrumentedLoader(copy.deepcopy(self._loader, memo), self._tracer, self._phase_name)

    def __reduce__(self) -> Any:
        return (_reattached, (self._loader, self._phase_name))

    def __iter__(self) -> Iterator[Any]:
        if self._tracer._claim_feeding(self, surely=False):
            self._tell_settings()
        return _FetchTimer(iter(self._loader), self._phase)

    def _steptrace_feeds_steps(self) -> None:
        """steptrace.steps() iterates this loader: its settings are the ones the advice names."""
        self._tracer._claim_feeding(self, surely=True)
        self._tell_settings()

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        loader = self.__dict__.get("_loader")  # absent while copy or pickle builds the object
        if loader is None:
            raise AttributeError(name)
        return getattr(loader, name)

    @property
    def loader(self) -> Any:
        """The wrapped loader."""
        return self._loader

    def _tell_settings(self) -> None:
        tell_settings(self._tracer, self._loader)


def _reattached(loader: Any, phase: str) -> InstrumentedLoader:
    return InstrumentedLoader(loader, default_tracer(), phase)


class _FetchTimer:
    __slots__ = ("_it", "_phase")

    def __init__(self, it: Iterator[Any], phase: Any) -> None:
        self._it = it
        self._phase = phase

    def __iter__(self) -> "_FetchTimer":
        return self

    def __next__(self) -> Any:
        with self._phase:
            return next(self._it)


def instrument(loader: Any, tracer: Optional[Tracer] = None, phase: str = "input") -> InstrumentedLoader:
    """Times the training thread's wait for each batch as the ``input`` phase.

    Instrumenting an instrumented loader returns it unchanged (no double counting). Give a
    validation loader ``phase="val_input"`` to name its fetches apart."""
    if isinstance(loader, InstrumentedLoader):
        return loader
    return InstrumentedLoader(loader, tracer or default_tracer(), phase)


def to_device(batch: Any, device: Any, non_blocking: bool = True, tracer: Optional[Tracer] = None) -> Any:
    """Moves every tensor in a nested batch (any mapping: dict, defaultdict, OrderedDict, a
    UserDict such as Hugging Face's BatchEncoding; lists, tuples, named tuples, dataclasses) to
    ``device`` inside an ``h2d`` phase. Containers keep their type."""
    import torch

    def move_mapping(obj: Mapping) -> Any:
        moved = {k: move(v) for k, v in obj.items()}
        if isinstance(obj, MutableMapping):
            try:
                out = copy.copy(obj)  # keeps what the type carries: a defaultdict's factory
                out.update(moved)
                return out
            except Exception:  # a mapping that will not copy: rebuilt below
                pass
        try:
            return type(obj)(moved)
        except Exception:  # a read-only view (mappingproxy) or an odd constructor: a plain dict
            return moved

    def move(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return obj.to(device, non_blocking=non_blocking)
        if isinstance(obj, Mapping):
            return move_mapping(obj)
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # named tuple
            return type(obj)(*(move(v) for v in obj))
        if isinstance(obj, (list, tuple)):
            return type(obj)(move(v) for v in obj)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return dataclasses.replace(
                obj, **{f.name: move(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
            )
        return obj

    with (tracer or default_tracer()).phase("h2d"):
        return move(batch)
