"""Many ranks (torch.distributed): which rank this process is, and the gather of every rank's
summary to rank 0 at ``summary()`` and at exit.

The summaries travel through torch.distributed's own key-value store (the one the process
group was set up with), not through a collective: each rank puts its summary under its own key
and returns at once; rank 0 waits for the others' keys up to ``gather_timeout_s``. So a rank
that crashed, or never gets there, costs rank 0 at most the timeout and is named; nothing is
sent over the user's NCCL or gloo group, and no group is created (creating one is itself a
collective, which a dead rank would hang). The store is kept from the moment a process group is
first seen, so the gather at exit still works after ``destroy_process_group()``.

Each payload is bounded whatever the run's length, phases or timeline: the summary's digest
(``_core.rank_digest``: what the rank's row needs) and the waits of the last ``WAITS_KEPT``
collectives, about 5 KB. See cpp/src/report/README.md, "Many ranks".
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _core
from . import collective as _collective
from .._common import ascii as _ascii
from .._common.log import say

_IMPORTED_AT = time.time()


class Job:
    """This process's place in a torch.distributed job, taken while its process group was up."""

    def __init__(self, rank: int, world_size: int, store: Any) -> None:
        self.rank = rank
        self.world_size = world_size
        self.store = store
        local = os.environ.get("LOCAL_RANK", "")
        local_rank = _ascii.number(local)
        self.local_rank = local_rank if local_rank is not None else -1
        self.host = socket.gethostname()
        self.started_at = _process_started_at()


_job: Optional[Job] = None
_unknown = False  # torch.distributed is up but this process's rank could not be read (said once)


def _process_started_at() -> str:
    """When this process started (UTC), from /proc; else when steptrace was imported."""
    started = _IMPORTED_AT
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time after boot
        with open("/proc/stat", encoding="ascii") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        pass
    return datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def notice(core: Any) -> Optional[Job]:
    """The job this process belongs to, told to ``core`` (a ``_core.Tracer``); None in a lone
    process. Cheap: called at summaries, at exit and when a DDP model or a loop starts."""
    global _job, _unknown
    if _job is None:
        dist = sys.modules.get("torch.distributed")
        if _unknown:
            return None
        try:
            if dist is None or not dist.is_available() or not dist.is_initialized():
                return None
            store = dist.distributed_c10d._get_default_store()
            _job = Job(dist.get_rank(), dist.get_world_size(), store)
        except Exception as e:  # a torch without these: one line, and the summary stays this rank's
            _unknown = True
            say(f"could not tell which rank this process is ({type(e).__name__}: {e}); its summary is its own")
            return None
    core.set_rank(_job.rank, _job.world_size, _job.local_rank, _job.host, _job.started_at)
    return _job


class Gather:
    """One tracer's gathers: the k-th gather of every rank meets under the same keys."""

    def __init__(self, core: Any, tag: str) -> None:
        self._core = core
        self._tag = tag
        self._count = 0
        self.last: Optional[Any] = None  # rank 0: the last combined summary
        self.last_steps = -1  # rank 0: the own steps the last combined summary was made at

    def __call__(self, own: Any, job: Job, at_exit: bool = False) -> Any:
        """``own`` (a ``_core.Summary`` of ``core``) sent to rank 0; on rank 0, the combined summary.
        The gather at exit has keys of its own: every rank gets there once."""
        prefix = f"steptrace/{self._tag}/{'exit' if at_exit else self._count}/"
        self._count += 0 if at_exit else 1
        timeout_s = float(self._core.options()["gather_timeout_s"])
        recent, collectives = _collective.recent_waits(self._core)
        if job.rank != 0:
            try:
                job.store.set(prefix + str(job.rank), payload(own, recent, collectives))
            except Exception as e:
                say(f"rank {job.rank} could not send its summary to rank 0 ({type(e).__name__}: {e})")
            return own
        refused: List[Tuple[int, str]] = []
        reports = [(own, list(recent), collectives)] + _collect(job, prefix, timeout_s, refused)
        self.last = _core.combine_ranks(reports, job.world_size, timeout_s, False, refused)
        self.last_steps = own.steps
        return self.last


def payload(own: Any, recent: List[float], collectives: int) -> str:
    """What a rank sends to rank 0: the digest of its summary (what the job's table reads, a few
    KB whatever its phases or timeline) and its recent collective waits."""
    digest = _core.rank_digest(own).json()
    return json.dumps({"summary": digest, "waits": [round(w, 3) for w in recent], "collectives": collectives})


def _collect(
    job: Job, prefix: str, timeout_s: float, refused: List[Tuple[int, str]]
) -> List[Tuple[Any, List[float], int]]:
    """The other ranks' reports that arrive within the timeout; those that arrive but cannot be
    read go to `refused`, with why."""
    keys = {rank: prefix + str(rank) for rank in range(1, job.world_size)}
    if not keys:
        return []
    try:
        job.store.wait(list(keys.values()), timedelta(seconds=timeout_s))
    except Exception:  # the timeout, or a store that is gone: take what arrived
        pass
    reports = []
    for rank, key in keys.items():
        try:
            if not job.store.check([key]):
                continue
            payload: Dict[str, Any] = json.loads(job.store.get(key))
            job.store.delete_key(key)
            summary = _core.rank_digest(_core.Summary.from_json(payload["summary"]))  # checked as it lands
            if summary.rank != rank:
                raise ValueError(f"it says it is rank {summary.rank}")
            waits = [float(w) for w in payload["waits"]][-_collective.WAITS_KEPT :]
            if not all(math.isfinite(w) and w >= 0 for w in waits):
                raise ValueError("its collective waits are not finite, non-negative numbers")
            collectives = int(payload["collectives"])
            if collectives < len(waits):
                raise ValueError(f"it waited at {collectives} collectives but sent {len(waits)} waits")
            reports.append((summary, waits, collectives))
        except Exception as e:  # that rank is named as refused; the others are still combined
            why = f"{type(e).__name__}: {e}"
            say(f"rank {rank}'s summary could not be read ({why})")
            refused.append((rank, why[:200]))
    return reports


def gather_at_exit(gather: Gather) -> Callable[[Any, bool], Tuple[Any, bool]]:
    """The finishing step of the report at exit (between the two halves, ``exit_summary`` and
    ``exit_write``): on rank 0 the job's summary, and whether the program
    has seen it (it asked for it with ``summary(gather=True)`` after its last step); elsewhere
    its own, sent to rank 0. Every rank sends at exit, whatever it sent before."""

    def finish(own: Any, shown: bool) -> Tuple[Any, bool]:
        job = _job
        if job is None:
            return own, shown
        if job.rank == 0 and shown and gather.last is not None and gather.last_steps == own.steps:
            return gather.last, True
        return gather(own, job, at_exit=True), False

    return finish
