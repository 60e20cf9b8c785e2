"""A job read from its ranks' files (torch.profiler traces or saved summaries): a folder, several
paths or a glob. Each file is read as the rank it names (a trace's ``distributedInfo``, a
summary's rank), else as the next rank in file order, and the job view is built by the same
``combine_ranks`` as a live gather (cpp/src/report/README.md, "Many ranks").

Trace files one process wrote (the same pid, ``host_name`` and rank: a repeating schedule's
``tensorboard_trace_handler`` cycles) are that process's cycles, read as one run by the core's
``read_cycles``: all of a folder's files one process's is one run, never a job of ranks.

A file of another kind that steptrace knows (PyTorch's execution trace, which HTA keeps beside
each rank's trace) is left out, said in one line; a job of nothing else is refused.

Files are read in parallel on the available cores (the trace reader releases the GIL); what is
kept of a rank is its summary, never its trace. In a trace a rank's wait at the collectives is
its host ``wait`` (a collective on another thread is ``wait``) plus its collective kernels' time
that no other kernel hid.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Optional, Tuple

from .. import _core
from .._common import ascii as _ascii
from .._common.log import say
from .read import read_one, shown


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _ranked(read: List[Tuple[str, Any]]) -> Tuple[List[Tuple[str, Any]], int]:
    """Each summary with its rank: the one it names, else the lowest rank no file names, in
    file order. Two files naming one rank are an error naming both."""
    taken = {}
    for name, s in read:
        if s.rank is not None:
            if s.rank in taken:
                raise ValueError(
                    f"{shown(taken[s.rank])} and {shown(name)} are both rank {s.rank}: give one job's files"
                )
            taken[s.rank] = name
    world = max(
        [len(read)]
        + [s.world_size for _, s in read if s.world_size is not None]
        + [s.rank + 1 for _, s in read if s.rank is not None]
    )
    free = (r for r in range(world) if r not in taken)
    out = [(name, s if s.rank is not None else s.with_rank(next(free), world)) for name, s in read]
    return out, world


def _writer(name: str, s: Any) -> Optional[Tuple[Optional[str], str, Optional[int]]]:
    """Who wrote a trace: (host_name, pid, rank); None for a saved summary, and for a pipe or
    standard input, which the cycles' second reading could not read again (it would wait for a
    writer that is gone)."""
    pid = s.fact("trace.pid")
    if pid is None or name == "-" or not os.path.isfile(name):
        return None
    return (s.fact("trace.host"), pid, s.rank)


def _span(s: Any) -> Optional[Tuple[int, int]]:
    """When a trace's records ran (its first and last tick, the ``trace.span_ns`` fact)."""
    numbers = [_ascii.number(w) for w in (s.fact("trace.span_ns") or "").split()]
    if len(numbers) != 2 or None in numbers:
        return None  # none, or a saved summary's that is not two numbers: the core's reading decides
    return numbers[0], numbers[1]


def _overlap(files: List[Tuple[str, Any]]) -> bool:
    """Whether two of these traces' times overlap: then they are no one process's cycles (the
    core's read_cycles would say so after reading them all again)."""
    spans = sorted(span for span in (_span(s) for _, s in files) if span is not None)
    return any(a[1] > b[0] for a, b in zip(spans, spans[1:]))


def _by_process(read: List[Tuple[str, Any]], step: Optional[str]) -> List[Tuple[str, Any]]:
    """One entry per process: a process's several trace files (its cycles) read as one run,
    named by its first file. Files whose times overlap are no one process's cycles: kept apart."""
    groups: dict = {}
    for name, s in read:
        key = _writer(name, s)
        groups.setdefault(key if key is not None else ("file", name), []).append((name, s))
    out = []
    for files in groups.values():
        if len(files) > 1 and not _overlap(files):  # copies of one file overlap: never read a second time
            try:
                files = [(files[0][0], _core.read_cycles([os.fsencode(n) for n, _ in files], step or ""))]
            except ValueError as e:
                if "not cycles of one process" not in str(e):
                    raise
        out.extend(files)
    return out


def _read_or_other(name: str, step: Optional[str]) -> Any:
    """The file's summary, or the error that says it is a file of another kind."""
    try:
        return read_one(name, step)
    except _core.OtherFileKind as e:
        return e


def _read_ranks(names: List[str], step: Optional[str]) -> Tuple[List[Tuple[str, Any]], int]:
    """Each file read, its cycles joined, and each with its rank, by rank; a world of 0 for one
    process's cycles (one run, the only entry)."""
    seen = {}
    for n in names:  # a link and its target, or a path given twice
        real = os.path.realpath(n)
        if real in seen:
            raise ValueError(
                f"{shown(seen[real])} and {shown(n)} are the same file given twice: give each rank's file once"
            )
        seen[real] = n
    workers = min(len(names), _cores())
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="steptrace-read") as pool:
            read = list(zip(names, pool.map(lambda n: _read_or_other(n, step), names)))
    else:
        read = [(n, _read_or_other(n, step)) for n in names]
    others = [(n, e) for n, e in read if isinstance(e, _core.OtherFileKind)]
    if len(others) == len(read):
        raise others[0][1]
    for name, e in others:
        say(f"left out of the job: {str(e).removeprefix('steptrace: ')}")
    read = _by_process([(n, s) for n, s in read if not isinstance(s, _core.OtherFileKind)], step)
    if len(read) == 1:  # one process's cycles: one run
        return read, 0
    ranked, world = _ranked(read)
    ranked.sort(key=lambda item: item[1].rank)
    return ranked, world


def load_job(names: List[str], step: Optional[str] = None) -> Any:
    """The job's summary (a ``_core.Summary``): the lowest rank's own figures, a row per rank,
    the ranks with no file, the worst rank and STRAGGLER."""
    ranked, world = _read_ranks(names, step)
    if not world:
        return ranked[0][1]
    reports = []
    for i, (name, s) in enumerate(ranked):
        device_wait = s.nccl_exposed_ms
        # The lowest rank's summary is the job's own table; of the others, what a row reads.
        try:
            # the trace's own summary last: its collective calls, for the ranks' arrival at them
            reports.append((s if i == 0 else _core.rank_digest(s), [], 0, device_wait, s))
        except ValueError as e:  # its figures do not hold together: the file is named
            raise ValueError(f"{shown(name)}: {str(e).removeprefix('steptrace: ')}") from None
    return _core.combine_ranks(reports, world, 0.0, True)


def job_trace(
    names: List[str], step: Optional[str] = None, slowest_per_rank: int = 3
) -> Tuple[str, int, Optional[int]]:
    """One Chrome trace of the job's slow steps (``_core.JobTimeline``, cpp/src/report/README.md, "Many
    ranks"): each rank's slowest steps and the same steps on the median rank, aligned on their
    collectives' ends. Returns (the trace, the ranks read, the median rank); one process's
    cycles are one run, whose own timeline it is."""
    ranked, world = _read_ranks(names, step)
    if not world:
        return ranked[0][1].trace(), 1, None
    job = _core.JobTimeline(slowest_per_rank)
    for name, s in ranked:
        job.add(s)
    median = job.reference_rank()
    if median is not None:
        job.set_reference(next(s for _, s in ranked if s.rank == median))
    return job.trace(), len(ranked), median
