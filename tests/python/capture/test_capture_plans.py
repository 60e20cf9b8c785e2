"""The capture triggers' decisions on synthetic windows (no clock, no processes): the cool-down
after a capture, and rank 0's straggler plans (tests/python/capture/test_capture.py runs them for real)."""

import json
import os

from steptrace._capture import capturer as _capture

from fake_store import Store


def test_the_cool_down_holds(tmp_path):
    """Synthetic windows (no clock): after a capture, a trigger waits COOL_DOWN windows."""

    class FakeTracer:
        def options(self):
            return {"capture_max": 3, "capture_steps": 5}

        def on_window(self, fn):
            pass

    flag = tmp_path / "flag"
    fake = FakeTracer()  # held here: a capturer holds its tracer weakly
    c = _capture.Capturer(fake)
    c.configure(f"file={flag}")
    asked = []

    def request(reason, steps=None, at=None, back="recent"):  # a capture that ends at once, as _finish leaves it
        asked.append(reason)
        c._cool()  # as _finish does
        return True

    c.request = request
    window = {"steps": 10, "step_p95_ms": 1.0, "label": "BALANCED"}
    touched = []
    for n in range(8):
        flag.touch()
        os.utime(flag, (1000 + n, 1000 + n))  # a later time each window: each window sees a touch
        c.on_window(window)
        touched.append(len(asked))
    # captured at window 0; windows 1-2 wait (the 3rd after the capture is free), then again
    assert touched == [1, 1, 1, 2, 2, 2, 3, 3], touched


def test_a_straggler_is_planned_once_a_stretch_and_not_for_a_rank_stalled_by_its_own_capture(monkeypatch):
    """Rank 0's plans on synthetic windows (no clock, a dict for the store): rank 2 lags; during
    the plan's capture the median rank 0 stalls and is named; rank 2 named again is the same
    stretch; after COOL_DOWN windows without a straggler it is news again. (In CI, under load,
    the median rank's torch.profiler capture took seconds and rank 2 was captured twice.)"""
    from steptrace._ranks import gather as _ranks

    class FakeTracer:
        _core = None

        def options(self):
            return {"capture_max": 10, "capture_steps": 5}

    store = Store()
    job = type("Job", (), {"rank": 0, "world_size": 3, "store": store})()
    monkeypatch.setattr(_ranks, "notice", lambda core: job)
    fake = FakeTracer()  # held here: a capturer holds its tracer weakly
    c = _capture.Capturer(fake)
    c.request = lambda reason, steps=None, at=None, back="recent": True
    calm = [-1] * _capture.COOL_DOWN
    # rank 2 named; during its plan's capture rank 0, then none (no calm: the capture's windows),
    # then rank 2 again; then calm windows and rank 2: a new stretch
    named = [2, 0, -1, -1, -1, 2, 2, 2, 2] + calm + [2]
    ids = []
    for straggler in named:
        c._job_window(
            {
                "step": 100,
                "steps": 10,
                "straggler_rank": straggler,
                **(
                    {
                        "straggler_median_rank": 0 if straggler else 1,
                        "straggler_phase": "compute",
                        "straggler_excess_ms": 28.0,
                    }
                    if straggler >= 0
                    else {}
                ),
            }
        )
        ids.append(json.loads(store.data[_capture.PLAN_KEY])["id"] if _capture.PLAN_KEY in store.data else 0)
    # Plan 1 at once; rank 0 named while that plan's capture runs, and rank 2 again, plan nothing;
    # a new stretch after the calm windows plans rank 2 again.
    assert ids == [1] * (len(named) - 1) + [2], ids
    assert json.loads(store.data[_capture.PLAN_KEY])["ranks"] == [2, 0]
