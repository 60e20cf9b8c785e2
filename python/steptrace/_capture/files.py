"""Where a torch capture is written, and how: only into a folder of the user's own, through a
private folder torch.profiler's own temporary files cannot be redirected out of, under a name
unique to the process, whole or not at all."""

from __future__ import annotations

import gzip
import os
import shutil
import stat
import sys
import tempfile
from typing import Any


def write_trace(prof: Any, capture_dir: str, rank: int, first: int) -> str:
    """Writes a stopped torch.profiler session's trace into ``capture_dir`` as
    ``<run>-rank<r>-step<s>-pid<p>.pt.trace.json.gz`` and returns its path; raises
    CaptureWriteError, leaving nothing, when it cannot."""
    folder = own_folder(capture_dir)
    # The process id makes the name unique: two runs sharing a folder each keep their capture.
    path = os.path.join(folder, f"{run_name()}-rank{rank}-step{first}-pid{os.getpid()}.pt.trace.json.gz")
    # torch.profiler writes its own temporary files beside the name it is given, following
    # links: it is given a name in a folder made new, that only this user can write (0700),
    # and the gzip is renamed from there into place whole (a rename replaces a link, never
    # follows it). On any failure nothing is left, and the message names the path and why.
    private = tempfile.mkdtemp(dir=folder, prefix=".steptrace-capture-")
    try:
        raw, packed = os.path.join(private, "trace.json"), os.path.join(private, "trace.json.gz")
        prof.export_chrome_trace(raw)
        _whole(raw)
        with open(raw, "rb") as src, open(packed, "xb") as out, gzip.GzipFile(fileobj=out, mode="wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(packed, path)
    except Exception as e:
        why = str(e) if isinstance(e, CaptureWriteError) else e.strerror if isinstance(e, OSError) and e.strerror else repr(e)
        raise CaptureWriteError(f"could not write {path}: {why}") from e
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return path


def run_name() -> str:
    """The run's name in capture file names: its script's (a package's for ``python -m``). The
    core's own captures (the kept steps) take it from the fact ``run.program``."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "run"
    run = os.path.splitext(os.path.basename(script))[0]
    if run == "__main__":  # python -m package: the package's name
        run = os.path.basename(os.path.dirname(script))
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run) or "run"


def _whole(raw: str) -> None:
    """torch.profiler's writer says nothing when a write fails (a full disk, a file-size limit):
    its trace, a JSON object, is then empty or cut short, which its last bytes tell."""
    size = os.path.getsize(raw) if os.path.isfile(raw) else 0
    with open(raw, "rb") as f:
        f.seek(max(0, size - 64))
        end = f.read().rstrip()
    if not end.endswith(b"}"):
        raise CaptureWriteError(f"torch.profiler's trace was cut short at {size} bytes (a full disk or a file-size "
                                f"limit?)")


class CaptureWriteError(Exception):
    """A capture that could not be written: the message names the path and the reason."""


def own_folder(folder: str) -> str:
    """``capture_dir``, made if missing, and only if this user owns it:
    a folder another user made first (a shared location) or a link another user planted there is
    refused by name, as the core's capture refuses it."""
    try:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError:
        pass  # something not a folder: said below
    except OSError as e:
        raise CaptureWriteError(f"could not make capture_dir {folder}: {e.strerror}") from e
    me = os.geteuid()
    link = os.lstat(folder)
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (me, 0):
        raise CaptureWriteError(f"capture_dir {folder} is a link of another user's (uid {link.st_uid}): not followed")
    st = os.stat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise CaptureWriteError(f"capture_dir {folder} is not a folder")
    if st.st_uid != me:
        raise CaptureWriteError(f"capture_dir {folder} belongs to another user (uid {st.st_uid}): steptrace writes "
                                f"captures only into a folder of its own user's; set capture_dir to one")
    return folder
