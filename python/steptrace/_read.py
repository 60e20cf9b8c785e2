"""Reading one summary or torch.profiler trace, told apart by content: a regular file, a pipe, or
``-`` (standard input), which are copied to a temporary file as they come. steptrace.load (``_load``)
and a job's reader (``_job``) use it."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from typing import Optional

from . import _core

_MAX_SUMMARY_BYTES = 256 << 20  # a summary with a 1,024-step timeline is ~18 MB


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
    if not data:
        raise ValueError(f"{name}: the file is empty")
    if data[:2] == b"\x1f\x8b":  # a gzip file: a summary or a trace inside, or nothing
        import gzip
        import io

        try:  # bounded: a small file may unpack to gigabytes
            data = gzip.GzipFile(fileobj=io.BytesIO(data)).read(_MAX_SUMMARY_BYTES + 1)
        except (OSError, EOFError) as e:
            raise ValueError(f"{name}: a damaged gzip file ({e})") from None
        if not data:
            raise ValueError(f"{name}: a gzip file of nothing (empty once decompressed)")
    if len(data) > _MAX_SUMMARY_BYTES:
        raise ValueError(f"{name}: larger than any steptrace summary ({_MAX_SUMMARY_BYTES >> 20} MB at most)")
    try:
        return _core.Summary.from_json(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{name}: not a steptrace summary: not UTF-8 text (byte {e.start})") from None
    except ValueError as e:
        raise ValueError(f"{name}: {str(e).removeprefix('steptrace: ')}") from None


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


def read_one(name: str, step: Optional[str] = None) -> _core.Summary:
    """One summary, trace, pipe or ``-`` (standard input); a folder is refused (a job's folder
    is _load's to read)."""
    if name == "-":
        return _load_stream("<stdin>", sys.stdin.buffer, step)
    mode = os.stat(name).st_mode
    if stat.S_ISDIR(mode):
        raise ValueError(f"{name}: a folder inside a job: give each rank's file, or one folder")
    if stat.S_ISFIFO(mode):  # `steptrace show <(zcat run.json.gz)`
        with open(name, "rb") as stream:
            return _load_stream(name, stream, step)
    if not stat.S_ISREG(mode):  # a device (/dev/zero): it could never end
        raise ValueError(f"{name}: not a regular file, a pipe or a folder of rank traces")
    return _load_file(name, step)
