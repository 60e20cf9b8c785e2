"""steptrace.load: a saved summary or a torch.profiler trace, told apart by content (``_read``); a
pipe or standard input (``-``); and a job's rank files (a folder, several paths, a glob) as one
job (``_job``)."""

from __future__ import annotations

import glob
import os
from typing import List, Optional, Sequence, Union

from .._report.summary import Summary
from .job import load_job
from .read import read_one, shown

_RANK_FILE_ENDINGS = (".json", ".json.gz")

PathArg = Union[str, "os.PathLike[str]"]


def rank_files(folder: str) -> List[str]:
    """The rank files of a folder: its regular `.json` and `.json.gz` files, in natural order."""
    names = []
    for entry in os.scandir(folder):
        if entry.name.endswith(_RANK_FILE_ENDINGS) and entry.is_file():
            names.append(entry.path)
    if not names:
        raise ValueError(f"{shown(folder)}: a folder, and not one of rank traces: it holds no .json or .json.gz files")
    return sorted(names, key=natural_key)


def natural_key(name: str) -> list:
    """`rank2` before `rank10`."""
    import re

    return [int(part) if part.isascii() and part.isdigit() else part for part in re.split(r"([0-9]+)", name)]


def expand(paths: Sequence[PathArg]) -> List[str]:
    """Paths as given, a glob pattern that names no file expanded (quoted on a shell line)."""
    out: List[str] = []
    for p in paths:
        name = os.fspath(p)
        if name != "-" and not os.path.lexists(name) and glob.has_magic(name):
            found = sorted(glob.glob(name), key=natural_key)
            if not found:
                raise ValueError(f"{shown(name)}: no file matches")
            out.extend(found)
        else:
            out.append(name)
    return out


def _named(path: Union[PathArg, Sequence[PathArg]]) -> List[str]:
    names = expand([path]) if isinstance(path, (str, os.PathLike)) else expand(list(path))
    if not names:
        raise ValueError("load: no paths given")
    return names


def job_files(path: Union[PathArg, Sequence[PathArg]]) -> Optional[List[str]]:
    """The rank files when `path` names a job (a folder of rank files, several paths, a glob of
    several); None for one file."""
    names = _named(path)
    if len(names) == 1:
        return rank_files(names[0]) if os.path.isdir(names[0]) else None
    return names


def load(path: Union[PathArg, Sequence[PathArg]], step: Optional[str] = None) -> Summary:
    """Reads a summary written by ``Summary.to_json`` (or the json_path option), or a
    torch.profiler trace (``export_chrome_trace``, ``tensorboard_trace_handler``; ``.json`` or
    ``.json.gz``), found by its content: the trace is read through the same analysis as a live
    run, and gives the same table, JSON, diagnosis, timeline and report. ``-`` or a pipe is read
    as it comes.

    A folder of rank files, several paths or a glob (``"traces/*.json.gz"``) is one job: each file
    read as the rank it names (else in file order), combined as a live job's gather is.

    ``step``: for a trace, a host range whose occurrences are the steps (``"execute_model"``, a
    ``record_function`` range); without it, a trace with no ``ProfilerStep#N`` is read as its
    training loop's iterations (by its DataLoader fetches or optimizer steps), else as one window."""
    names = job_files(path)
    if names is None:
        return Summary(read_one(_named(path)[0], step))
    return Summary(load_job(names, step))
