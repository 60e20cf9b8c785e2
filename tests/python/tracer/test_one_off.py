"""A one-off stall is not the steady state: a loop whose loader stalls once is labelled by its
typical step, and the stall is named apart, held to the stall's length stamped by the test's own
clock beside the records."""

import time

from conftest import spin


def loop(tracer, steps, stall_at=None, stall_s=0.0, input_s=0.0001, compute_s=0.002):
    """`steps` steps of `input_s` in `input` and `compute_s` in `compute`; step `stall_at` waits
    `stall_s` more in `input`. Returns the stall's length as the test's clock measured it (ms)."""
    stamped = 0.0
    for i in range(steps):
        with tracer.step():
            with tracer.phase("input"):
                if i == stall_at:
                    t0 = time.perf_counter()
                    time.sleep(stall_s)
                    stamped = (time.perf_counter() - t0) * 1000
                spin(input_s)
            with tracer.phase("compute"):
                spin(compute_s)
    return stamped


def test_a_one_off_stall_is_named_and_the_typical_step_labels_the_run(tracer):
    stamped = loop(tracer, 200, stall_at=120, stall_s=0.4)
    d = tracer.summary().to_dict()
    diag = d["diagnosis"]
    # the mean step carries the stall: read as is, `input` would hold over a third of step time
    assert d["phases"]["input"]["share"] > 0.3
    assert diag["label"] != "INPUT-BOUND"
    assert diag["gains"].get("input", 0.0) < 0.15
    # the stall, named as what it is: its step, its phase and its length (the recorded phase holds
    # the stamped sleep and at most a preemption's worth more)
    evidence = diag["evidence"]
    assert evidence.startswith("Read from the typical step, the one-off stall below left out of the label and gains: ")
    said = evidence.split("The one-off: step 120: ", 1)[1]
    ms = float(said.split(" ms in `input`, once")[0].replace(",", ""))
    assert stamped <= ms + 0.01 and ms < stamped + 100
    assert any("capture on trouble" in a and "step 120" in a for a in diag["advice"])


def test_a_steady_cause_is_not_called_a_one_off(tracer):
    # every step waits for its input: the steady state, whatever the slowest step
    loop(tracer, 60, input_s=0.004, compute_s=0.001)
    diag = tracer.summary().to_dict()["diagnosis"]
    assert diag["label"] == "INPUT-BOUND"
    assert "one-off" not in diag["evidence"]
