"""Where a torch capture is written, and how: only into a folder of the user's own, through a
private folder torch.profiler's own temporary files cannot be redirected out of, under a name
unique to the process, whole or not at all."""

from __future__ import annotations

import errno
import gzip
import os
import shutil
import secrets
import sys
from typing import Any

from .. import _core


def write_trace(prof: Any, capture_dir: str, rank: int, first: int) -> str:
    """Writes a stopped torch.profiler session's trace into ``capture_dir`` as
    ``<run>-rank<r>-step<s>-pid<p>.pt.trace.json.gz`` and returns its path; raises
    CaptureWriteError, leaving nothing, when it cannot."""
    # The process id makes the name unique: two runs sharing a folder each keep their capture.
    name = f"{run_name()}-rank{rank}-step{first}-pid{os.getpid()}.pt.trace.json.gz"
    path = os.path.join(capture_dir or ".", name)
    folder = own_folder(capture_dir)  # the core's rule, and the folder held open: a swap moves nothing
    # torch.profiler writes its own temporary files beside the name it is given, following
    # links: it is given a name in a folder made new inside the one checked, that only this user
    # can write (0700), reached through the descriptor (/proc/self/fd), and the gzip is renamed
    # from there into place whole (a rename replaces a link, never follows it). On any failure
    # nothing is left, and the message names the path and why.
    private = f".steptrace-capture-{os.getpid()}-{secrets.token_hex(6)}"
    made = False
    try:
        os.mkdir(private, 0o700, dir_fd=folder)
        made = True
        inside = os.open(private, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        try:
            raw = f"/proc/self/fd/{inside}/trace.json"
            prof.export_chrome_trace(raw)
            _whole(raw)
            with (
                open(raw, "rb") as src,
                open(f"/proc/self/fd/{inside}/trace.json.gz", "xb") as out,
                gzip.GzipFile(fileobj=out, mode="wb") as dst,
            ):
                shutil.copyfileobj(src, dst)
            path = os.path.join(capture_dir or ".", _link_new(inside, name, folder))
        finally:
            _empty(inside)
            os.close(inside)
    except Exception as e:
        why = (
            str(e)
            if isinstance(e, CaptureWriteError)
            else e.strerror
            if isinstance(e, OSError) and e.strerror
            else repr(e)
        )
        raise CaptureWriteError(f"could not write {path}: {why}") from e
    finally:
        if made:
            try:
                os.rmdir(private, dir_fd=folder)
            except OSError:
                pass
        os.close(folder)
    return path


def _link_new(inside: int, name: str, folder: int) -> str:
    """The gzip linked into ``folder`` as ``name``, or ``<stem>-2.pt.trace.json.gz`` and on when
    that is taken (a second capture of the same step keeps the first); never replaces a file,
    never follows a link. Its name."""
    suffix = ".pt.trace.json.gz" if name.endswith(".pt.trace.json.gz") else ""
    stem = name[: len(name) - len(suffix)]  # a run's own dots ("my.script") stay in the stem
    for n in range(1, 1000):
        chosen = name if n == 1 else f"{stem}-{n}{suffix}"
        try:
            os.link("trace.json.gz", chosen, src_dir_fd=inside, dst_dir_fd=folder, follow_symlinks=False)
            return chosen
        except FileExistsError:
            continue
        except OSError as e:  # a file system without hard links: renamed, which replaces a file there
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            os.replace("trace.json.gz", chosen, src_dir_fd=inside, dst_dir_fd=folder)
            return chosen
    raise CaptureWriteError(f"{name}: a thousand captures of this step already")


def _empty(folder: int) -> None:
    """What torch.profiler left in the private folder open at ``folder``, removed."""
    for entry in os.listdir(folder):
        try:
            os.unlink(entry, dir_fd=folder)
        except OSError:
            pass


def run_name() -> str:
    """The run's name in capture file names: its script's (a package's for ``python -m``). The
    core's own captures (the kept steps) take it from the fact ``run.program``."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "run"
    run = os.path.splitext(os.path.basename(script))[0]
    if run == "__main__":  # python -m package: the package's name
        run = os.path.basename(os.path.dirname(script))
    # the core's rule (safe_name): never a leading `-` (read as an option: `python -c` is "c") or `.`
    return "".join(ch if ch.isascii() and ch.isalnum() or ch in "-_." else "_" for ch in run).lstrip("-.") or "run"


def _whole(raw: str) -> None:
    """torch.profiler's writer says nothing when a write fails (a full disk, a file-size limit):
    its trace, a JSON object, is then empty or cut short, which its last bytes tell."""
    size = os.path.getsize(raw) if os.path.isfile(raw) else 0
    with open(raw, "rb") as f:
        f.seek(max(0, size - 64))
        end = f.read().rstrip()
    if not end.endswith(b"}"):
        raise CaptureWriteError(
            f"torch.profiler's trace was cut short at {size} bytes (a full disk or a file-size limit?)"
        )


class CaptureWriteError(Exception):
    """A capture that could not be written: the message names the path and the reason."""


def own_folder(folder: str) -> int:
    """``capture_dir``, made if missing, held to the core's rule for the folders steptrace writes
    its reports into (``steptrace::write_report``: this user's own, no other user may change it,
    a link only of this user's): its descriptor, which the caller closes. A folder another user made
    first (a shared location) or a link another user planted there is refused by name."""
    try:
        return int(_core.open_report_folder(folder or "."))
    except OSError as e:
        raise CaptureWriteError(f"capture_dir {e.filename}: {e.strerror}") from e
