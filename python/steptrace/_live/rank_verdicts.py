"""Live rank windows (torch.distributed, the live view on): a straggler verdict every window.

Live windows end at the wall clock's multiples of the period on every process (the core's
``slot``), so the ranks' windows cover the same instants. Each window, every rank puts its row of
the window (``_core.live_row``: its rank, steps, step times and built-in phases, about 100 bytes,
then up to 16 named phases with their group) with the slot under one of its two keys in
torch.distributed's store (by the slot's parity), and returns. At its window of slot s, rank 0
judges slot s-1, which every rank wrote a period ago: it reads every rank's key of that parity in
one batch (``multi_get``; each key made beforehand with ``compare_set``, so the read never waits
for a rank that has not written), and names the straggler among the rows of that slot with the
exit's STRAGGLER rule (``_core.window_straggler``), and the named phase inside its phase that
holds most of its excess (``within``). A rank with no row of that slot is late; for
``MISSING_WINDOWS`` windows in a row, missing. Nothing waits on a slow or dead rank. The count of
each rank's straggler windows lives in the core (``note_rank_window``), so the exit table, the
JSON and Prometheus have it; the window gets ``straggler_rank`` and friends
(``straggler_within``), rank 0's stderr a line, and the JSONL a ``{"ranks": ...}`` line. See
cpp/src/report/README.md, "Many ranks".
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Dict, List, Optional, Tuple

from .. import _core
from .._common import ascii as _ascii
from .._common import log as _log
from .._ranks import collective as _collective
from .._ranks import gather as _ranks
from . import rank_hangs as _hangs

MISSING_WINDOWS = 3  # windows in a row without a new row: missing (ranks.hpp's missing_windows)
SKEW_WINDOWS = 2  # a rank's slot this far from rank 0's: its clock is off, not its rows late
ROW_WAITS = 8  # the most DDP all-reduce waits a row carries (summary.hpp's nccl_stats::recent_collectives)
_EMPTY = "x "  # a key made by rank 0 before its rank wrote: no slot, no row


class LiveRanks:
    """One tracer's live rank windows: this rank's sequence, and on rank 0 what it last saw."""

    def __init__(self) -> None:
        self.own: Optional[tuple] = None  # rank 0: (slot, row) of its last window
        self.waits_seen = 0  # DDP all-reduce waits already sent in a row
        self.stale: Dict[int, int] = {}  # rank 0: windows in a row without that slot's row
        self.made = [False, False]  # rank 0: every rank's key of each parity exists
        self.said = False
        self.refused: set = set()  # rank 0: the ranks whose row was refused (said once each)
        self.hangs = _hangs.JobHang()  # any rank: the job's view once its own step is past hang_after
        self.skew: Dict[int, int] = {}  # rank 0: a rank's newest slot less the slot judged, for a clock far off
        self.seen: Dict[int, int] = {}  # rank 0: the newest slot read of each such rank
        self.top: Dict[int, int] = {}  # rank 0: each rank's newest slot read (one that stopped stays put)

    def window(self, core: Any, summary: Any, window: Dict[str, Any], slot: int) -> None:
        """Called on the window thread with each live window (``summary``: the core's; ``slot``:
        the wall-clock period it covers) before the listeners get ``window``, to which rank 0 adds
        its verdict on the slot before."""
        job = _ranks.notice(core)
        if job is None or job.world_size < 2:
            return
        try:
            self._window(core, job, summary, window, slot)
        except Exception as e:  # a store gone (a rank died, the job ended): said once, the run goes on
            if not self.said:
                self.said = True
                _log.say(f"live rank windows: torch.distributed's store cannot be reached ({type(e).__name__}: {e})")

    def _window(self, core: Any, job: Any, summary: Any, window: Dict[str, Any], slot: int) -> None:
        # a row when it counted steps, or has a step open (the job's view of a hang reads it)
        own = self._row(core, summary) if window.get("steps") or window.get("open_step_s") else ""
        # Two keys a rank, by the slot's parity: rank 0 reads the slot before while each rank
        # writes the one just ended.
        job.store.set(key(job.rank, slot), f"{slot} {own}")
        said_hang = self.hangs.window(core, job, window, slot, key)  # its own step open past hang_after
        if job.rank != 0:
            return
        if said_hang:  # the window's verdict is the hang: no straggler is judged on stuck rows
            self.own = (slot, own)
            return
        judged, mine = slot - 1, self.own
        self.own = (slot, own)
        if mine is None or mine[0] != judged:  # rank 0 has no window of that slot (the first): nothing to judge
            return
        others = [r for r in range(job.world_size) if r != job.rank]
        keys = [key(r, judged) for r in others]
        if not self.made[judged % 2]:
            for k in keys:
                job.store.compare_set(k, "", _EMPTY)  # a rank's own row, if already there, stays
            self.made[judged % 2] = True
        rows: List[str] = [mine[1]] if mine[1] else []
        late: List[int] = []
        missing: List[int] = []
        skewed: List[int] = []
        for r, value in zip(others, job.store.multi_get(keys)):
            slot_text, _, row = value.decode("utf-8", "replace").partition(" ")
            at = _ascii.number(slot_text, signed=True)
            before = self.top.get(r)
            if at is not None:
                self.top[r] = at if before is None else max(at, before)
            if at == judged:
                self.stale[r] = 0
                if row and self._own_rank(r, row):
                    rows.append(row)
                continue
            # Its clock far from rank 0's, its slots never match: a slot ahead of rank 0's, or one
            # behind that still moves (a rank that stopped leaves a slot behind that does not).
            far = at is not None and abs(at - judged) > SKEW_WINDOWS
            if far and (r in self.skew or at > judged or (before is not None and at > before)):
                skewed.append(r)
                continue
            self.stale[r] = self.stale.get(r, 0) + 1
            (missing if self.stale[r] >= MISSING_WINDOWS else late).append(r)
        for r, row in self._skewed_rows(core, job, skewed, judged):
            self.stale[r] = 0 if row is not None else self.stale.get(r, 0) + 1
            if row is None:
                (missing if self.stale[r] >= MISSING_WINDOWS else late).append(r)
            elif row and self._own_rank(r, row):
                rows.append(row)
        short = _too_short(rows)
        straggler = self._straggler(rows) if len(rows) >= 2 and not short else None
        count = core.note_rank_window(straggler, late, missing) if not short else {"windows": 0}
        window["straggler_rank"] = straggler["rank"] if straggler else -1
        window["ranks_late"], window["ranks_missing"] = len(late), len(missing)
        if short:  # a partial window (start-up): one rank's noise would read as a straggler
            window["ranks_too_short"] = short
        if straggler:
            window["straggler_excess_ms"] = straggler["excess_ms"]
            window["straggler_phase"], window["straggler_median_rank"] = straggler["phase"], straggler["median_rank"]
            if "within" in straggler:  # the named phase inside it that holds most of the excess
                window["straggler_within"], window["straggler_within_ms"] = straggler["within"], straggler["within_ms"]
            if "arrivals_last" in straggler:  # it arrived last at the rows' last collectives
                window["straggler_arrivals_last"] = straggler["arrivals_last"]
                window["straggler_arrivals_compared"] = straggler["arrivals_compared"]
                window["straggler_late_ms"], window["straggler_before"] = (
                    straggler["arrival_late_ms"],
                    straggler["before"],
                )
            if "node" in straggler:  # its node's readings that depart from the median rank's
                window["straggler_node"] = straggler["node"]
        options = core.options()
        record = {
            "slot": judged,
            "rows": len(rows),
            "straggler": straggler,
            "late": late,
            "missing": missing,
            "straggler_windows": count["windows"] if straggler else 0,
            "too_short": short,
        }
        _log.to_jsonl(options["jsonl_path"], job.rank, {"ranks": record}, "live rank windows")
        if int(options["live"]) > 0:
            sys.stderr.write(
                line(window.get("at_s") or 0.0, len(rows), job.world_size, straggler, count, late, missing, short)
            )
            sys.stderr.flush()

    def _skewed_rows(self, core: Any, job: Any, ranks: List[int], judged: int) -> List[Tuple[int, Optional[str]]]:
        """The ranks whose clock is far from rank 0's (hours off: their slots never match rank
        0's): each one's newest row, read under both its keys, when it is new since the last
        window judged (else None: late, then missing, as any rank). It covers the rank's last
        window, up to one window apart from the slot judged; said once a rank."""
        if not ranks:
            return []
        keys = [key(r, s) for r in ranks for s in (judged, judged + 1)]
        for r in ranks:
            if r not in self.skew:
                job.store.compare_set(key(r, judged + 1), "", _EMPTY)  # the other key, before a read
        values = job.store.multi_get(keys)
        out: List[Tuple[int, Optional[str]]] = []
        for i, r in enumerate(ranks):
            newest: Optional[Tuple[int, str]] = None
            for value in values[2 * i : 2 * i + 2]:
                slot_text, _, row = value.decode("utf-8", "replace").partition(" ")
                at = _ascii.number(slot_text, signed=True)
                if at is not None and (newest is None or at > newest[0]):
                    newest = (at, row)
            if newest is None:
                out.append((r, None))
                continue
            if r not in self.skew:
                period = int(core.options()["live"]) or 10
                _log.say(
                    f"live rank windows: rank {r}'s clock is about {_hours((newest[0] - judged) * period)} "
                    f"rank 0's: its windows are judged by their order, each beside rank 0's nearest, up to one "
                    "window apart"
                )
            self.skew[r] = newest[0] - judged
            fresh = newest[0] > self.seen.get(r, newest[0] - 1)
            self.seen[r] = newest[0]
            out.append((r, newest[1] if fresh else None))
        return out

    def _row(self, core: Any, summary: Any) -> str:
        """This rank's row: the window's figures, and its waits at DDP's all-reduce measured since
        its last row (the last ``_core`` allows), numbered as every rank numbers them."""
        waits, measured = _collective.recent_waits(core)
        new = min(measured - self.waits_seen, len(waits), ROW_WAITS)
        self.waits_seen = measured
        if new <= 0:
            return _core.live_row(summary)
        return _core.live_row(summary, waits[-new:], measured - new)

    def _own_rank(self, rank: int, row: str) -> bool:
        """A row is believed only about the rank whose key it came from: one that claims another
        rank (rank 2 writing rank 1's row would make the healthy rank 1 the straggler) is refused,
        said once for that rank."""
        words = row.split(" ", 2)
        claimed = words[1] if len(words) > 1 else ""
        if _ascii.number(claimed) == rank:
            return True
        self._refuse(rank, f"it claims to be rank {_log.printable(claimed[:20]) or '(none)'}")
        return False

    def _straggler(self, rows: List[str]) -> Optional[Dict[str, Any]]:
        """The rule on the rows; a row the core cannot read is refused (its rank named, once) and
        the verdict taken on the others, so one bad row stops no later verdict."""
        try:
            return _core.window_straggler(rows)
        except ValueError:
            good = []
            for row in rows:
                try:
                    _core.window_straggler([row])
                    good.append(row)
                except ValueError as e:  # its rank was checked against its key (_own_rank)
                    self._refuse(_ascii.number(row.split(" ", 2)[1]) or 0, str(e))
            return _core.window_straggler(good) if len(good) >= 2 else None

    def _refuse(self, rank: int, why: str) -> None:
        if rank not in self.refused:
            self.refused.add(rank)
            _log.say(f"live rank windows: rank {rank}'s row refused ({why}); its windows are judged without it")


def _hours(seconds: float) -> str:
    """ "3.0 h ahead of", "40 s behind"."""
    way = "ahead of" if seconds > 0 else "behind"
    seconds = abs(seconds)
    return (
        (
            f"{seconds / 3600:.1f} h"
            if seconds >= 3600
            else f"{seconds / 60:.0f} min"
            if seconds >= 60
            else f"{seconds:.0f} s"
        )
        + " "
        + way
    )


def _too_short(rows: List[str]) -> List[int]:
    """The ranks whose row holds fewer counted steps than a window needs to be judged."""
    short = []
    least = _core.MIN_WINDOW_STEPS
    for row in rows:  # "r2 RANK WORLD STEPS ...": found, not split (rank 0 reads 1,024 rows a window)
        at = row.find(" ", 3)
        world_end = row.find(" ", at + 1)
        steps_end = row.find(" ", world_end + 1)
        if at < 0 or world_end < 0 or steps_end < 0:
            continue  # not a row: the rule refuses it, naming it
        steps, rank = _ascii.number(row[world_end + 1 : steps_end]), _ascii.number(row[3:at])
        if steps is not None and rank is not None and steps < least:
            short.append(rank)
    return short


def line(
    at_s: float,
    rows: int,
    world: int,
    straggler: Optional[Dict[str, Any]],
    count: Dict[str, Any],
    late: List[int],
    missing: List[int],
    short: Optional[List[int]] = None,
) -> str:
    """Rank 0's line for one window, after the live line: its verdict on the window before."""
    if straggler and "arrivals_last" in straggler:
        verdict = (
            f"rank {straggler['rank']} is the straggler (last at {straggler['arrivals_last']} of "
            f"{straggler['arrivals_compared']} collectives, {_core.format_ms(straggler['arrival_late_ms'])} ms "
            f"late, after `{straggler['before']}`; "
            f"{count['windows']} window{'s' if count['windows'] != 1 else ''} so far)"
        )
    elif straggler:
        verdict = (
            f"rank {straggler['rank']} is the straggler (`{straggler['phase']}` "
            f"+{_core.format_ms(straggler['excess_ms'])} ms a step over the median rank"
            f"{straggler.get('within_words', '')}; "
            f"{count['windows']} window{'s' if count['windows'] != 1 else ''} so far)"
        )
    elif short:
        verdict = (
            f"too short to judge (fewer than {_core.MIN_WINDOW_STEPS} steps on rank"
            f"{'s' if len(short) > 1 else ''} {_ranks_words(short)})"
        )
    else:
        verdict = "no straggler"
    if straggler and straggler.get("node"):
        verdict += f"; its node: {straggler['node']}"
    text = f"steptrace ranks, the window before {at_s:.1f} s: {verdict}; {rows} of {world} ranks' rows"
    if late:
        text += f"; late: {_ranks_words(late)}"
    if missing:
        text += f"; missing: {_ranks_words(missing)}"
    # phase names and node words come from the program and the rows: no escape sequence reaches the terminal
    return _log.printable(text) + "\n"


def _ranks_words(ranks: List[int], listed: int = 16) -> str:
    words = ", ".join(str(r) for r in ranks[:listed])
    return words + (f" ... ({len(ranks)} in all)" if len(ranks) > listed else "")


def key(rank: int, slot: int) -> str:
    return f"steptrace/live/{rank}/{slot % 2}"


_by_core: "weakref.WeakKeyDictionary[Any, LiveRanks]" = weakref.WeakKeyDictionary()


def window(core: Any, summary: Any, figures: Dict[str, Any], slot: int) -> None:
    """The window thread, for each window: the tracer's live rank windows, if a job runs."""
    if core is None or _ranks.notice(core) is None:
        return
    found = _by_core.get(core)
    if found is None:
        found = _by_core[core] = LiveRanks()
    found.window(core, summary, figures, slot)


def keep_running(window: Dict[str, Any]) -> None:
    """A listener that keeps the window thread running for the rank windows alone."""


def wanted(core: Any) -> bool:
    """A loop starts: under a job of 2 ranks or more with the live view on (``live`` or
    ``jsonl_path``) or the ``straggler`` capture trigger (which is this verdict), the window
    thread must run (``keep_running``), so every window reaches rank 0. It notices the job."""
    job = _ranks.notice(core)
    if job is None or job.world_size < 2:
        return False
    options = core.options()
    return int(options["live"]) > 0 or bool(options["jsonl_path"]) or "straggler" in options["capture"]
