"""The `straggler` trigger's plan across ranks: rank 0, reading the live rank windows' verdict,
plans a capture of the straggler and the median rank from one step and puts the plan in
torch.distributed's store; every rank reads it and the ranks it names arm for that step. A plan
that is not one steptrace wrote is ignored (said once), and a plan's step that this rank does not
reach is let go, so it blocks no later capture."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from .. import _core
from .._common import log as _log
from .._profiler import annotate as _annotate

COOL_DOWN = _core.CAPTURE_COOL_DOWN  # windows a trigger waits after a capture ends
PLAN_KEY = "steptrace/capture/plan"  # rank 0's choice, in torch.distributed's store
PLAN_WAIT = 4 * COOL_DOWN  # windows a plan's capture waits for its step before it is let go


class StragglerPlans:
    """The plan half of a Capturer (capturer.py), which owns the state these methods read."""

    def _job_window(self, window: Dict[str, Any]) -> None:
        """Rank 0 plans a capture when the live rank windows (``_live_ranks``: the STRAGGLER rule
        on every rank's window) name a new straggler: it and the median rank, from the same step;
        each rank named arms its capture for that step."""
        from .._ranks import gather as _ranks

        job = _ranks.notice(self._tracer._core)
        if job is None or job.world_size < 2:
            return
        if job.rank == 0 and "straggler_rank" in window and self._planned < int(self._tracer.options()["capture_max"]):
            slow = int(window["straggler_rank"])
            lagging = slow >= 0
            # Once per straggler a stretch: a rank is captured again only after COOL_DOWN windows in
            # a row that were judged on every rank's row and named no straggler. The windows while
            # a plan's capture runs, and the usual wait after it, neither plan nor count: a rank
            # stalled by its own capture (torch.profiler takes seconds) is named meanwhile, or none.
            self._plan_cool = max(0, self._plan_cool - 1)
            if self._plan_cool == 0:
                if lagging:
                    self._calm = 0
                elif not window.get("ranks_late") and not window.get("ranks_missing"):
                    self._calm += 1
                if self._calm >= COOL_DOWN:
                    self._captured.clear()
            new = lagging and slow not in self._captured and self._plan_cool == 0
            if new:
                self._captured.add(slow)
                self._planned += 1
                self._plan_cool = COOL_DOWN + 2
                self._cool(COOL_DOWN + 2)  # the plan's own capture, then the usual wait
                at = int(window.get("step", 0)) + max(10, 2 * int(window.get("steps") or 0))
                median_rank = int(window["straggler_median_rank"])
                plan = {
                    "id": self._planned,
                    "step": at,
                    "ranks": [slow, median_rank],
                    "reason": f"straggler: rank {slow}, `{window['straggler_phase']}` "
                    f"+{_core.format_ms(window['straggler_excess_ms'])} ms a step over the median "
                    f"rank {median_rank}",
                }
                job.store.set(PLAN_KEY, json.dumps(plan))
                self._plans_made.append(plan)
        if job.store.check([PLAN_KEY]):
            plan = _plan(job.store.get(PLAN_KEY))
            if plan is None:
                if not self._said_plan:
                    self._said_plan = True
                    _log.say(
                        f"capture: the plan under {PLAN_KEY} in torch.distributed's store is not one steptrace "
                        f"wrote (not JSON, or a field missing): ignored"
                    )
            elif plan["id"] != self._plan_seen:
                self._plan_seen = plan["id"]
                if job.rank in plan["ranks"]:
                    straggler = job.rank == plan["ranks"][0]
                    role = "the straggler" if straggler else "a median rank, for contrast"
                    reason = f"{plan['reason']}; rank {job.rank} is {role}"
                    # The straggler writes its slowest kept steps, and names them in the store; a
                    # median rank writes the same step numbers once they are there.
                    armed = self.request(reason, at=plan["step"], back="slowest" if straggler else "none")
                    if straggler and armed and self.kept:
                        job.store.set(_kept_key(plan["id"], job.rank), json.dumps(self.kept))
                    elif not straggler:
                        self._kept_wait = {"id": plan["id"], "from": plan["ranks"][0], "reason": reason, "windows": 0}
        self._kept_steps(job)
        self._expire(window)

    def _kept_steps(self, job: Any) -> None:
        """A median rank writes the steps the straggler kept (a retroactive capture of the same step
        numbers); rank 0 says, once each, which kept steps each rank wrote."""
        wait = self._kept_wait
        if wait is not None:
            key = _kept_key(wait["id"], wait["from"])
            if job.store.check([key]):
                self._kept_wait = None
                steps = _indices(job.store.get(key))
                chosen = list(self._tracer._core.capture_kept(wait["reason"], "numbered", steps)) if steps else []
                if chosen:
                    job.store.set(_kept_key(wait["id"], job.rank), json.dumps(chosen))
                else:
                    _log.say(f"capture: {wait['reason']}, but this rank no longer kept steps {steps} (capture_back)")
            else:
                wait["windows"] += 1
                if wait["windows"] > PLAN_WAIT:
                    self._kept_wait = None
        for plan in self._plans_made if job.rank == 0 else []:  # each of its plans, a later one replacing it or not
            self._say_kept(job, plan)

    def _say_kept(self, job: Any, plan: Dict[str, Any]) -> None:
        for r in plan["ranks"]:
            key = _kept_key(plan["id"], r)
            if key in self._kept_told or not job.store.check([key]):
                continue
            self._kept_told.add(key)
            steps = _indices(job.store.get(key)) or []
            role = "the straggler" if r == plan["ranks"][0] else "the median rank"
            folder = self._tracer.options()["capture_dir"] or "."
            _log.say(
                f"capture: rank {r} ({role}) wrote its kept steps {', '.join(map(str, steps))} from before the "
                f"trigger: {folder}/*-rank{r}-back-step*.trace.json"
            )

    def _expire(self, window: Dict[str, Any]) -> None:
        """A plan's capture waits for its step; one whose step this rank has not reached
        PLAN_WAIT windows on (a step no run reaches) is let go, said, so it blocks no later capture."""
        with self._lock:
            if self._pending is None or self._pending["at"] is None:
                self._waited = 0
                return
            self._waited += 1
            if self._waited <= PLAN_WAIT:
                return
            pending, self._pending, self._waited = self._pending, None, 0
            _annotate.disarm()
        _log.say(
            f"capture: {pending['reason']}, but this rank did not reach step {pending['at']} within "
            f"{PLAN_WAIT} windows: let go"
        )


def _kept_key(plan_id: int, rank: int) -> str:
    """Where a rank named by plan ``plan_id`` puts the kept steps it wrote."""
    return f"{PLAN_KEY}/{plan_id}/kept/{rank}"


def _indices(text: Any) -> Optional[List[int]]:
    """Step numbers read from the store, or None when they are not a list of them."""
    try:
        steps = json.loads(text)
    except (ValueError, TypeError):
        return None
    ok = isinstance(steps, list) and len(steps) <= 1000 and all(isinstance(s, int) and s >= 0 for s in steps)
    return steps if ok else None


def _plan(text: Any) -> Optional[Dict[str, Any]]:
    """A capture plan read from the store, or None when it is not one steptrace wrote."""
    try:
        plan = json.loads(text)
        ok = (
            isinstance(plan, dict)
            and isinstance(plan.get("id"), int)
            and isinstance(plan.get("step"), int)
            and isinstance(plan.get("ranks"), list)
            and all(isinstance(r, int) for r in plan["ranks"])
            and plan["ranks"]
            and isinstance(plan.get("reason"), str)
        )
        return plan if ok else None
    except (ValueError, TypeError):
        return None
