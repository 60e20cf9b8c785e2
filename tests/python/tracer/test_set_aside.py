"""Time set aside with exclude(): in no step, reported apart. Truth is stamped by
time.perf_counter beside the records; bounds separate "set aside" from "charged to a step"."""

import time

import pytest

from conftest import spin


def test_a_checkpoint_inside_the_loop_is_set_aside_and_reported_apart(tracer):
    spun = 0.0
    start = time.perf_counter()
    for i in tracer.steps(range(30)):
        with tracer.phase("compute"):
            spin(0.002)
        if i % 10 == 9:
            with tracer.exclude("checkpoint"):
                spun += spin(0.02)
    loop_ms = (time.perf_counter() - start) * 1000
    d = tracer.summary().to_dict()
    ckpt = d["set_aside"]["checkpoint"]
    assert ckpt["calls"] == 3
    assert ckpt["total_ms"] >= spun * 1000 * 0.99  # at least what was spun inside it
    assert ckpt["mean_ms"] == pytest.approx(ckpt["total_ms"] / 3)
    # The run spans the steps and the set-aside time between the loop's own stamps.
    assert d["run_ms"] <= loop_ms * 1.01
    assert d["run_ms"] >= (d["step_ms"]["total"] + ckpt["total_ms"]) * 0.99
    assert ckpt["run_share"] == pytest.approx(ckpt["total_ms"] / d["run_ms"])
    # Charged to the steps, the 60 ms would be in their total; set aside, it is not.
    assert d["step_ms"]["total"] <= loop_ms - 0.99 * ckpt["total_ms"]
    assert sum(p["share"] for p in d["phases"].values()) == pytest.approx(1.0)
    assert "set aside" in str(tracer.summary()) and "checkpoint" in str(tracer.summary())


def test_validation_steps_and_fetches_inside_exclude_are_set_aside_with_it(tracer):
    def validate():
        for _ in tracer.steps(range(5)):  # a loop of its own: not training steps
            with tracer.phase("compute"):
                spin(0.001)

    for i in tracer.steps(range(12)):
        with tracer.phase("compute"):
            spin(0.001)
        if i == 5:
            with tracer.exclude("validation"):
                validate()
    d = tracer.summary().to_dict()
    assert d["steps"] == 12
    assert d["set_aside"]["validation"]["calls"] == 1
    assert set(d["errors"].values()) == {0}, d["errors"]  # no error of any kind


def test_exclude_decorates_and_propagates_the_exception(tracer):
    @tracer.exclude("save")
    def save():
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        with tracer.step():
            save()
    assert tracer.summary().to_dict()["set_aside"]["save"]["calls"] == 1


def test_a_framework_object_that_refuses_patching_is_left_alone(tracer):
    from steptrace._frameworks.hooks import LoopMarks

    class Slotted:
        __slots__ = ()

        def save_checkpoint(self):
            return "saved"

    marks = LoopMarks(tracer)
    obj = Slotted()
    marks.set_aside_calls(obj, "save_checkpoint", "checkpoint")  # no error: just not set aside
    assert obj.save_checkpoint() == "saved"
    marks.restore()


def test_an_exclude_name_must_be_a_str(tracer):
    with pytest.raises(TypeError, match="exclude name must be a str, not list"):
        tracer.exclude(["checkpoint"])
