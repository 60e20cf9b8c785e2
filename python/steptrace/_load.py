"""steptrace.load: a saved summary or a torch.profiler trace, told apart by content."""

from __future__ import annotations

import os
import stat
from typing import Union

from . import _core
from ._api import Summary

_MAX_SUMMARY_BYTES = 256 << 20  # a summary with a 1,024-step timeline is ~18 MB


def _is_profiler_trace(path: Union[str, "os.PathLike[str]"]) -> bool:
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


def load(path: Union[str, "os.PathLike[str]"]) -> Summary:
    """Reads a summary written by ``Summary.to_json`` (or the json_path option), or a
    torch.profiler trace (``export_chrome_trace``, ``tensorboard_trace_handler``; ``.json`` or
    ``.json.gz``), found by its content: the trace is read through the same analysis as a live
    run, and gives the same table, JSON, diagnosis, timeline and report."""
    name = os.fspath(path)
    if not stat.S_ISREG(os.stat(name).st_mode):  # a FIFO, a device (/dev/zero): it could never end
        raise ValueError(f"{name}: not a regular file")
    if _is_profiler_trace(name):
        return Summary(_core.read_profiler_trace(name))
    with open(name, "rb") as f:
        data = f.read(_MAX_SUMMARY_BYTES + 1)
    if len(data) > _MAX_SUMMARY_BYTES:
        raise ValueError(f"{name}: larger than any steptrace summary ({_MAX_SUMMARY_BYTES >> 20} MB at most)")
    try:
        return Summary(_core.Summary.from_json(data.decode("utf-8")))
    except UnicodeDecodeError as e:
        raise ValueError(f"{name}: not a steptrace summary: not UTF-8 text (byte {e.start})") from None
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
