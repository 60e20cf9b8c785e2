"""The job's view of a hang, from the ranks' live rows (``_core.window_hang``).

Each rank's row carries its open step (how long, the innermost open phase, its pid and host) and
the last collective of each group it marked (``_ranks/marks.py``). Once a rank's own window says
its step has been open past ``hang_after`` (the core's watch wrote its report already), that rank
reads every rank's two keys (both slots' parities, one ``multi_get``) at each window: a rank
whose newest row is ``GONE_WINDOWS`` slots behind is gone (its process exited, when it ran on
this host and its pid is no longer there; else silent; on this host and still running, its last
row stands), and the rest are judged together: the ranks
waiting in collective k, those that never entered it and the phase each is in, those at k in
another kind of collective. Every live rank adds the view to its own hang report and its JSONL
(``{"hang_job": ...}``), and asks PyTorch's Flight Recorder to dump where it records; the lowest
live rank (rank 0 while it lives) says it on stderr and labels its window HANG. Nothing here
waits on a rank: the store answers with what is there. See cpp/src/report/README.md, "Hangs".
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from .. import _core
from .._common import ascii as _ascii
from .._common import log as _log

_EMPTY = "x "  # a key made before its rank wrote (as rank_verdicts makes them)
_JOB_MARK = "\nThe job's view:\n"
_STACKS_MARK = "\nEvery thread's stack"
GONE_WINDOWS = 3  # windows in a row without a row: gone (as rank_verdicts' MISSING_WINDOWS)
_VIEWS_KEPT = 8
_report_lock = threading.Lock()
_REPORT_MAX = 1 << 20  # the job's views a report keeps (each a change in who is where)


class JobHang:
    """One tracer's view of the job's hangs, on any rank."""

    def __init__(self) -> None:
        self.made = [False, False]  # every rank's key of each parity exists
        self.said: Optional[tuple] = None  # the view last written, with the report: a changed one is written again
        self.dumped: Optional[str] = None  # the hang report the Flight Recorder was dumped for
        self.flight_recorder = ""  # its file
        self.printed: Optional[tuple] = None  # the view last said on stderr (by the judging rank)
        self.moved: Dict[int, Tuple[int, int]] = {}  # a rank far behind: its newest slot, windows unchanged
        self.moving: set = set()  # the ranks far behind whose slot moved: a clock off, not a rank gone

    def window(self, core: Any, job: Any, window: Dict[str, Any], slot: int, key: Any) -> bool:
        """Called on each window of a job's rank after it wrote its row; True when this rank said
        the job's hang (the window then carries ``label`` HANG and the culprits)."""
        if not window.get("hang_s"):
            self.said = self.printed = None
            return False
        rows, gone = self._rows(job, slot, key)
        try:
            hang = _core.window_hang(rows, gone)
        except ValueError:  # a row the core cannot read (rank_verdicts names it): judged without it
            rows = [row for row in rows if _readable(row)]
            gone = [g for g in gone if _readable(g[1])]
            hang = _core.window_hang(rows, gone)
        if hang is None:
            return False
        culprits = [r["rank"] for r in hang["gone"] + hang["culprits"] + hang["mismatched"]]
        live = sorted(_ascii.number(row.split(" ", 2)[1]) or 0 for row in rows)
        judge = bool(live) and job.rank == live[0]
        report = window.get("hang_report") or ""  # the core writes it at its next look: perhaps after this window
        shape = (report, _shape(hang))  # who is where: the seconds in the words change every window
        if shape != self.said:
            self.said = shape
            options = core.options()
            _add_to_report(report, hang["words"])
            _log.to_jsonl(
                options["jsonl_path"],
                job.rank,
                {"hang_job": dict(hang, rank=job.rank, slot=slot, at=time.time())},
                "the job's hang",
            )
            if report and report != self.dumped:  # on a thread of its own: a dump took seconds with gloo
                self.dumped = report
                threading.Thread(
                    target=self._dump,
                    args=(options["capture_dir"], options["jsonl_path"], job.rank, report),
                    name="steptrace-flight-recorder",
                    daemon=True,
                ).start()
        if judge and shape[1] != self.printed:  # said once a view, not again when only its report came
            self.printed = shape[1]
            sys.stderr.write(_log.printable(f"steptrace ranks: {hang['words']}") + "\n")
            sys.stderr.flush()
        if self.flight_recorder:
            window["hang_flight_recorder"] = self.flight_recorder
        if judge:
            window["label"] = "HANG"
            window["label_code"] = 0
            window["hang_ranks"] = culprits
            window["hang_words"] = hang["words"]
        return judge

    def _dump(self, folder: str, jsonl: str, rank: int, report: str) -> None:
        """PyTorch's Flight Recorder asked to dump, off the window thread; its file named in the
        report, the JSONL and the next windows."""
        path = _flight_recorder(folder, rank)
        if path:
            self.flight_recorder = path
            _add_to_report(report, f"PyTorch's Flight Recorder dumped: {path}")
            _log.to_jsonl(
                jsonl, rank, {"hang_job": {"rank": rank, "flight_recorder": path, "at": time.time()}}, "the job's hang"
            )

    def _rows(self, job: Any, slot: int, key: Any) -> Tuple[List[str], List[Tuple[int, str, bool]]]:
        """The newest row of each rank (its keys of both parities), and the ranks gone: their newest
        row ``GONE_WINDOWS`` slots behind (or none at all) and their process not known to run here."""
        keys = [key(r, s) for s in (slot, slot - 1) for r in range(job.world_size)]
        for parity in (slot % 2, (slot - 1) % 2):
            if not self.made[parity]:
                for r in range(job.world_size):
                    job.store.compare_set(key(r, parity), "", _EMPTY)  # a rank's own row, if there, stays
                self.made[parity] = True
        values = job.store.multi_get(keys)
        newest: Dict[int, Tuple[int, str]] = {}
        for i, value in enumerate(values):
            r = i % job.world_size
            slot_text, _, row = value.decode("utf-8", "replace").partition(" ")
            s = _ascii.number(slot_text, signed=True)
            if s is None or not row or not _own(r, row):
                continue
            if r not in newest or s > newest[r][0]:
                newest[r] = (s, row)
        rows, gone = [], []
        for r in range(job.world_size):
            last = newest[r][1] if r in newest else ""
            if r in newest and (newest[r][0] > slot - GONE_WINDOWS or self._moves(r, newest[r][0])):
                rows.append(last)
                continue
            state = _process_state(last)
            if state == "alive":  # its rows lag (a busy machine), but its process is there: its last row holds,
                words = last.split(" ", 4)  # its steps long past: they do not say it moved
                rows.append(" ".join(words[:3] + ["0"] + words[4:]) if len(words) == 5 else last)
            else:
                gone.append((r, last, state == "exited"))
        return rows, gone

    def _moves(self, rank: int, newest: int) -> bool:
        """A rank whose newest slot is far behind this rank's yet still moves (its clock hours off):
        alive, its rows judged as any rank's; one whose slot stays put ``GONE_WINDOWS`` windows is
        gone, as a rank that stopped."""
        last, still = self.moved.get(rank, (None, 0))
        if last is not None and newest != last:
            self.moving.add(rank)
        still = still + 1 if newest == last else 0
        self.moved[rank] = (newest, still)
        return rank in self.moving and still < GONE_WINDOWS


def _shape(hang: Dict[str, Any]) -> tuple:
    """Who is where in a view, without its times."""
    return (hang["group"], hang["kind"], hang["seq"]) + tuple(
        tuple((r["rank"], r["phase"], r.get("seq"), r.get("kind")) for r in hang[part])
        for part in ("gone", "culprits", "mismatched", "waiting")
    )


def _readable(row: str) -> bool:
    try:
        _core.window_hang([row] if row else [])
        return True
    except ValueError:
        return False


def _own(rank: int, row: str) -> bool:
    words = row.split(" ", 2)
    return len(words) > 1 and _ascii.number(words[1]) == rank


def _process_state(row: str) -> str:
    """ "exited" when the process that wrote this row ran on this host (its row's " h PID HOST"
    section says so) and no process has its pid, or only its zombie; "alive" when it is there;
    "unknown" from another host or a row without the section."""
    at = row.find(" h ")
    if at < 0:
        return "unknown"
    parts = row[at + 3 :].split(" ", 2)
    pid = _ascii.number(parts[0]) if parts else None
    if len(parts) < 2 or pid is None or parts[1] != socket.gethostname():
        return "unknown"
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "exited"
    except (OSError, IndexError):
        return "unknown"
    return "exited" if state == "Z" else "alive"  # a zombie: exited, not yet reaped by its launcher


def _add_to_report(path: str, words: str) -> None:
    """The job's view, added to this process's hang report with the time it was taken: the first
    view of a hang stays (the ranks killed after it, by torchrun or the scheduler, change the later
    ones), at most ``_VIEWS_KEPT`` in all."""
    if not path:
        return
    with _report_lock:  # the window thread and the Flight Recorder's
        _add_to_report_locked(path, words)


def _add_to_report_locked(path: str, words: str) -> None:
    folder, name = os.path.split(path)
    folder = folder or "."
    try:
        fd = _core.open_report_folder(folder)  # the core's rule for capture_dir, and the folder held open
        try:
            report = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            with open(report, encoding="utf-8", errors="replace") as f:
                text = f.read(_REPORT_MAX)  # ours: a header, 64 KB of stacks and the views; more is not ours
        finally:
            os.close(fd)
        if len(text) == _REPORT_MAX or _STACKS_MARK not in text:
            _log.say(f"the hang report {path} is not steptrace's as written: the job's view is not added to it")
            return
        head, _, rest = text.partition(_STACKS_MARK)
        head, _, views = head.partition(_JOB_MARK)
        kept = [v for v in views.strip("\n").split("\n\n") if v][: _VIEWS_KEPT - 1]
        # other ranks' words (phase names, hosts) reach the file as they reach stderr: no escape sequence
        kept.append(time.strftime("at %H:%M:%S: ") + "\n".join(_log.printable(line) for line in words.split("\n")))
        text = head.rstrip("\n") + "\n" + _JOB_MARK + "\n\n".join(kept) + "\n" + _STACKS_MARK + rest
        _core.write_report(folder, name, text.encode("utf-8", "surrogateescape"))
    except OSError as e:
        _log.say(f"could not add the job's view to the hang report {path}: {e}")


def _flight_recorder(folder: str, rank: int) -> str:
    """PyTorch's Flight Recorder, asked to dump where it records (TORCH_FR_BUFFER_SIZE or
    TORCH_NCCL_TRACE_BUFFER_SIZE set): its file, or "" when it records nothing here."""
    size = os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or "0"
    if _ascii.number(size) in (None, 0) or "torch" not in sys.modules:
        return ""
    try:
        c10d = sys.modules["torch"]._C._distributed_c10d
        dump = getattr(c10d, "_dump_fr_trace", None) or getattr(c10d, "_dump_nccl_trace", None)
        if dump is None:
            return ""
        data = dump()
    except Exception as e:  # torch's own: said, the job goes on
        _log.say(f"PyTorch's Flight Recorder could not dump: {type(e).__name__}: {e}")
        return ""
    try:  # capture_dir's rule: the operator runs pickle.load on it, so only into a folder of this user's
        return str(
            _core.write_report(
                folder or ".",
                f"flight-recorder-rank{rank}-pid{os.getpid()}.pkl",
                data if isinstance(data, bytes) else str(data).encode(),
                fresh=True,
            )
        )
    except OSError as e:
        _log.say(f"PyTorch's Flight Recorder's dump is not written: {e.filename}: {e.strerror}")
        return ""
