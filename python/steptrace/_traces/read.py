"""Reading one summary or torch.profiler trace: a regular file, a pipe, or ``-`` (standard
input). The core's ``read_file`` tells them apart by the document's top-level keys and reads
each once, as it comes, within its bounds; nothing is copied aside. steptrace.load (``_load``) and
a job's reader (``_job``) use it. Paths are handed over as bytes, so a name that is not UTF-8
(legal on Linux) is read like any other and shown escaped."""

from __future__ import annotations

import os
import stat
from typing import Optional

from .. import _core


def shown(path: str) -> str:
    """A path as messages show it: a name's bytes outside UTF-8 as ``\\xHH``, never a crash."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def read_one(name: str, step: Optional[str] = None) -> _core.Summary:
    """One summary, trace, pipe or ``-`` (standard input); a folder is refused (a job's folder
    is _load's to read)."""
    if name == "-":
        return _core.read_file(b"/dev/stdin", step or "", "<stdin>")
    mode = os.stat(name).st_mode
    if stat.S_ISDIR(mode):
        raise ValueError(f"{shown(name)}: a folder inside a job: give each rank's file, or one folder")
    if not stat.S_ISREG(mode) and not stat.S_ISFIFO(mode):  # a device (/dev/zero): it could never end
        raise ValueError(f"{shown(name)}: not a regular file, a pipe or a folder of rank traces")
    return _core.read_file(os.fsencode(name), step or "", shown(name))
