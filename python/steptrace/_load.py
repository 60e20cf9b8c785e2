"""steptrace.load: a saved summary or a torch.profiler trace, told apart by content; a pipe or
standard input (``-``); and a job's rank files (a folder, several paths, a glob) as one job."""

from __future__ import annotations

import glob
import os
import shutil
import stat
import sys
import tempfile
from typing import List, Optional, Sequence, Union

from . import _core
from ._api import Summary

_MAX_SUMMARY_BYTES = 256 << 20  # a summary with a 1,024-step timeline is ~18 MB
_RANK_FILE_ENDINGS = (".json", ".json.gz")

PathArg = Union[str, "os.PathLike[str]"]


def _is_profiler_trace(path: str) -> bool:
    """Whether a file holds a Chrome trace (torch.profiler's), by its content: its first bytes,
    inflated when it is gzip, name `traceEvents` or open a bare event array."""
    import gzip

    try:
        with open(path, "rb") as f:
            head = f.read(2)
            f.seek(0)
            raw = gzip.GzipFile(fileobj=f) if head == b"\x1f\x8b" else f
            start = raw.read(1 << 16)
    except (OSError, EOFError):
        return False  # the reader that follows names the problem
    text = start.lstrip()
    return text.startswith(b"[") or b'"traceEvents"' in start or b'"schemaVersion"' in start


def _load_file(name: str, step: Optional[str], shown: str = "") -> _core.Summary:
    """One regular file: a trace through the analysis, or a summary read back. `shown`: what
    messages call it (the pipe a copy was made of)."""
    if _is_profiler_trace(name):
        return _core.read_profiler_trace(name, step or "", shown)
    if step:
        raise ValueError(f"{name}: step={step!r} names a range of a torch.profiler trace, and this is a summary")
    with open(name, "rb") as f:
        data = f.read(_MAX_SUMMARY_BYTES + 1)
    if len(data) > _MAX_SUMMARY_BYTES:
        raise ValueError(f"{name}: larger than any steptrace summary ({_MAX_SUMMARY_BYTES >> 20} MB at most)")
    try:
        return _core.Summary.from_json(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{name}: not a steptrace summary: not UTF-8 text (byte {e.start})") from None
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def _load_stream(name: str, stream, step: Optional[str]) -> _core.Summary:
    """A pipe or standard input, which can be read once: copied to a temporary file as it comes
    (never held in memory), then read as a file."""
    with tempfile.NamedTemporaryFile(prefix="steptrace-pipe-", suffix=".json") as copy:
        shutil.copyfileobj(stream, copy, 1 << 20)
        copy.flush()
        try:
            return _load_file(copy.name, step, name)
        except ValueError as e:  # name what the user gave, not the temporary copy
            raise ValueError(str(e).replace(copy.name, name)) from None


def load_one(path: PathArg, step: Optional[str] = None) -> _core.Summary:
    """One summary, trace, pipe or ``-`` (standard input), or one folder of rank files."""
    name = os.fspath(path)
    if name == "-":
        return _load_stream("<stdin>", sys.stdin.buffer, step)
    mode = os.stat(name).st_mode
    if stat.S_ISDIR(mode):
        from ._job import load_job

        return load_job(rank_files(name), step)
    if stat.S_ISFIFO(mode):  # `steptrace show <(zcat run.json.gz)`
        with open(name, "rb") as stream:
            return _load_stream(name, stream, step)
    if not stat.S_ISREG(mode):  # a device (/dev/zero): it could never end
        raise ValueError(f"{name}: not a regular file, a pipe or a folder of rank traces")
    return _load_file(name, step)


def rank_files(folder: str) -> List[str]:
    """The rank files of a folder: its regular `.json` and `.json.gz` files, in natural order."""
    names = []
    for entry in os.scandir(folder):
        if entry.name.endswith(_RANK_FILE_ENDINGS) and entry.is_file():
            names.append(entry.path)
    if not names:
        raise ValueError(f"{folder}: a folder, and not one of rank traces: it holds no .json or .json.gz files")
    return sorted(names, key=natural_key)


def natural_key(name: str) -> list:
    """`rank2` before `rank10`."""
    import re

    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def expand(paths: Sequence[PathArg]) -> List[str]:
    """Paths as given, a glob pattern that names no file expanded (quoted on a shell line)."""
    out: List[str] = []
    for p in paths:
        name = os.fspath(p)
        if name != "-" and not os.path.lexists(name) and glob.has_magic(name):
            found = sorted(glob.glob(name), key=natural_key)
            if not found:
                raise ValueError(f"{name}: no file matches")
            out.extend(found)
        else:
            out.append(name)
    return out


def load(path: Union[PathArg, Sequence[PathArg]], step: Optional[str] = None) -> Summary:
    """Reads a summary written by ``Summary.to_json`` (or the json_path option), or a
    torch.profiler trace (``export_chrome_trace``, ``tensorboard_trace_handler``; ``.json`` or
    ``.json.gz``), found by its content: the trace is read through the same analysis as a live
    run, and gives the same table, JSON, diagnosis, timeline and report. ``-`` or a pipe is read
    as it comes.

    A folder of rank files, several paths or a glob (``"traces/*.json.gz"``) is one job: each file
    read as the rank it names (else in file order), combined as a live job's gather is.

    ``step``: for a trace, a host range whose occurrences are the steps (``"execute_model"``, a
    ``record_function`` range); without it, a trace with no ``ProfilerStep#N`` is one window."""
    if isinstance(path, (str, os.PathLike)):
        names = expand([path])
    else:
        names = expand(list(path))
        if not names:
            raise ValueError("load: no paths given")
    if len(names) == 1:
        return Summary(load_one(names[0], step))
    from ._job import load_job

    return Summary(load_job(names, step))
