"""Figures against ground truth: spins of known length, timed independently."""

import gc
import statistics
import threading
import time

import pytest

from conftest import spin


@pytest.fixture(autouse=True)
def no_gc_pauses():
    """A collection of the (large, after the torch tests) heap can start on any allocation just
    outside a measured spin: steptrace rightly counts it, the spin's ground truth cannot."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


class Stamped:
    """Enters and leaves steptrace scopes with a perf_counter reading right beside each
    boundary, so the ground truth covers the same intervals steptrace measures (including any
    time the thread was descheduled), up to the sub-microsecond gap between the two clocks."""

    def __init__(self):
        self.totals = {}
        self.open = []

    def enter(self, name, scope):
        scope.__enter__()
        self.open.append((name, time.perf_counter()))

    def leave(self, scope):
        now = time.perf_counter()
        scope.__exit__(None, None, None)
        name, start = self.open.pop()
        self.totals[name] = self.totals.get(name, 0.0) + now - start
        return now - start


def test_phase_means_match_spin_waits_within_2_percent(tracer):
    steps = 30
    stamped = Stamped()
    per_step = []  # each step's own truth, name -> seconds
    for _ in range(steps):
        before = dict(stamped.totals)
        stamped.enter("step", tracer.step())
        stamped.enter("input", tracer.phase("input"))
        spin(0.002)
        stamped.leave(tracer.phase("input"))
        stamped.enter("compute", tracer.phase("compute"))
        spin(0.003)
        stamped.enter("preprocess", tracer.phase("preprocess"))
        spin(0.0005)
        pre = stamped.leave(tracer.phase("preprocess"))
        stamped.totals["compute"] = stamped.totals.get("compute", 0.0) - pre  # exclusive time
        stamped.leave(tracer.phase("compute"))
        spin(0.001)  # untraced: `other`
        stamped.leave(tracer.step())
        one = {name: total - before.get(name, 0.0) for name, total in stamped.totals.items()}
        one["other"] = one.pop("step") - one["input"] - one["compute"] - one["preprocess"]
        per_step.append(one)
    truth = dict(stamped.totals)
    truth["other"] = truth.pop("step") - truth["input"] - truth["compute"] - truth["preprocess"]
    step_truth = sum(truth.values())
    d = tracer.summary().to_dict()
    assert d["steps"] == steps
    # Each phase's median step within 2% of the truth's: the truth is stamped right beside each
    # boundary, but a preemption in the sliver between a stamp and steptrace's own clock read
    # lengthens one step (a 2.5% miss on the 0.5 ms phase in CI's quiet run), so the mean is held
    # to 10%, which a phase counted twice or not made exclusive still fails.
    for name, total_s in truth.items():
        want = statistics.median(one[name] for one in per_step) * 1000
        assert d["phases"][name]["p50_ms"] == pytest.approx(want, rel=0.02), name
        assert d["phases"][name]["mean_ms"] == pytest.approx(total_s * 1000 / steps, rel=0.10), name
    assert sum(p["share"] for p in d["phases"].values()) == pytest.approx(1.0, abs=1e-9)
    assert d["step_ms"]["p50"] == pytest.approx(
        statistics.median(sum(one.values()) for one in per_step) * 1000, rel=0.02
    )
    assert d["step_ms"]["mean"] == pytest.approx(step_truth * 1000 / steps, rel=0.10)


def test_steps_charges_the_fetch_to_input(tracer):
    fetch = []

    def slow_items(n):
        for i in range(n):
            fetch.append(spin(0.002))
            yield i

    body = []
    for _ in tracer.steps(slow_items(20)):
        with tracer.phase("compute"):
            body.append(spin(0.001))
    d = tracer.summary().to_dict()
    assert d["steps"] == 20
    # The truths are stamped inside the spins, not beside steptrace's boundaries: a preemption in
    # the few microseconds between them (a busy machine) lengthens one call, so medians are
    # compared, and the means only where steptrace cannot be short (it measures a superset).
    for name, truth in (("input", fetch), ("compute", body)):
        phase = d["phases"][name]
        assert phase["p50_ms"] == pytest.approx(statistics.median(truth) * 1000, rel=0.03), name
        assert phase["mean_ms"] >= 0.98 * sum(truth) * 1000 / 20, name
    assert d["phases"]["input"]["calls"] == 20
    assert d["diagnosis"]["label"] == "INPUT-BOUND"


def test_input_fetched_before_the_step_is_claimed_by_it(tracer):
    fetched = []
    for _ in range(10):
        with tracer.phase("input"):
            fetched.append(spin(0.002))
        with tracer.step():
            spin(0.001)
    d = tracer.summary().to_dict()
    assert d["steps"] == 10
    # Medians: a preemption just outside a spin lengthens one call (as in the test above).
    assert d["phases"]["input"]["p50_ms"] == pytest.approx(statistics.median(fetched) * 1000, rel=0.03)
    assert d["phases"]["input"]["mean_ms"] >= 0.98 * sum(fetched) * 100
    assert d["unscoped_phases"] == {}


def test_steps_from_eight_threads_are_all_counted(tracer):
    def work():
        for _ in range(500):
            with tracer.step():
                with tracer.phase("compute"):
                    pass

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    d = tracer.summary().to_dict()
    assert d["steps"] == 8 * 500
    assert d["phases"]["compute"]["calls"] == 8 * 500
