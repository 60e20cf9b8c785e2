"""The public Python surface and its defined behaviour on misuse and faults."""

import json

import time

import pytest

import steptrace
from conftest import spin


def test_step_and_phase_work_as_decorators(tracer):
    @tracer.phase("compute")
    def compute():
        return 42

    @tracer.step
    def train_step():
        return compute()

    for _ in range(5):
        assert train_step() == 42
    d = tracer.summary().to_dict()
    assert d["steps"] == 5
    assert d["phases"]["compute"]["calls"] == 5


def test_a_decorated_step_closes_on_exception_and_counts_as_failed(tracer):
    class UserError(Exception):
        pass

    error = UserError("boom")

    @tracer.step()
    @tracer.phase("compute")
    def fails():
        raise error

    with pytest.raises(UserError) as caught:
        fails()
    assert caught.value is error  # the user's exception, unchanged
    with tracer.step():  # nothing was left open
        pass
    s = tracer.summary()
    assert s.to_dict()["failed_steps"] == 1
    assert s.steps == 1


def test_an_exception_inside_a_with_step_propagates_unchanged(tracer):
    with pytest.raises(KeyError, match="missing"):
        with tracer.step():
            with tracer.phase("input"):
                raise KeyError("missing")
    d = tracer.summary().to_dict()
    assert d["failed_steps"] == 1
    assert d["steps"] == 0


def test_a_nested_step_is_a_clear_error(tracer):
    with tracer.step():
        with pytest.raises(steptrace.StepError, match="already open on this thread"):
            with tracer.step():
                pass
    d = tracer.summary().to_dict()
    assert d["errors"]["nested_steps"] == 1
    assert (d["steps"], d["failed_steps"]) == (1, 0)  # the outer step went on and completed


def test_steps_with_a_step_already_open_is_a_clear_error(tracer):
    with tracer.step():
        with pytest.raises(steptrace.StepError):
            for _ in tracer.steps(range(3)):
                pass


def test_leaving_steps_early_leaves_nothing_open(tracer):
    for i in tracer.steps(range(100)):
        if i == 3:
            break
    with tracer.step():  # would raise StepError if the abandoned step were still open
        pass
    assert tracer.summary().steps == 5


def test_a_failing_iterable_propagates_and_counts_a_failed_step(tracer):
    def broken():
        yield 1
        raise OSError("worker died")

    with pytest.raises(OSError, match="worker died"):
        for _ in tracer.steps(broken()):
            pass
    d = tracer.summary().to_dict()
    assert d["steps"] == 1
    assert d["failed_steps"] == 1


def test_zero_steps_says_so(tracer):
    s = tracer.summary()
    assert s.label is None
    assert s.steps == 0
    assert "no steps counted" in str(s)


def test_a_phase_outside_a_step_is_kept_apart(tracer):
    start = time.perf_counter()
    with tracer.step():
        spin(0.001)
    step_truth_ms = (time.perf_counter() - start) * 1e3  # stamped around the step: it holds it
    with tracer.phase("checkpoint"):
        spin(0.003)
    d = tracer.summary().to_dict()
    assert "checkpoint" not in d["phases"]
    assert d["unscoped_phases"]["checkpoint"]["calls"] == 1
    # The checkpoint (3 ms or more) absorbed would put the step past its own stamped length.
    assert d["step_ms"]["max"] <= step_truth_ms


@pytest.mark.parametrize(
    "options, message",
    [
        ({"warmup": 3}, "unknown option 'warmup'"),
        ({"warmup_steps": -1}, "bad value '-1' for option 'warmup_steps'"),
        ({"warmup_steps": 2.5}, "option 'warmup_steps' takes an int, not 2.5"),
        ({"warmup_steps": True}, "option 'warmup_steps' takes an int, not True"),
        ({"json_path": b"run.json"}, "option 'json_path' takes a str or os.PathLike path, not b'run.json'"),
        ({"print_at_exit": "sometimes"}, "auto, always, never"),
        ({"enabled": "maybe"}, "option 'enabled'"),
        ({"log_level": "loud"}, "option 'log_level'"),
        ({"ring_records": 1000}, "power of two"),
    ],
)
def test_configure_rejects_bad_input_by_name(tracer, options, message):
    before = tracer.options()
    with pytest.raises(ValueError, match=message):
        tracer.configure(**options)
    assert tracer.options() == before


def test_phase_names_are_checked(tracer):
    with pytest.raises(TypeError, match="must be a str"):
        tracer.phase(3)
    with pytest.raises(ValueError, match="reserved"):
        tracer.phase("other")
    with pytest.raises(ValueError, match="empty"):
        tracer.phase("")


def test_warmup_steps_are_kept_out():
    t = steptrace.Tracer(print_at_exit=False)  # default warm-up: 5
    for _ in range(8):
        with t.step():
            pass
    d = t.summary().to_dict()
    assert (d["steps"], d["warmup_steps"]) == (3, 5)


def test_reset_forgets(tracer):
    for _ in range(3):
        with tracer.step():
            pass
    tracer.reset()
    assert tracer.summary().steps == 0


def test_disabled_tracer_is_a_no_op(tracer):
    tracer.configure(enabled=False)
    with tracer.step():
        with tracer.step():  # not even the nested check: nothing is recorded
            pass
    assert tracer.summary().steps == 0


def test_summary_json_round_trip(tracer, tmp_path):
    for _ in range(4):
        with tracer.step():
            with tracer.phase("h2d"):
                spin(0.001)
    s = tracer.summary()
    path = tmp_path / "run.json"
    text = s.to_json(path)
    assert json.loads(path.read_text()) == json.loads(text) == s.to_dict()
    assert s.to_dict()["schema"] == "steptrace.summary/1"
    back = steptrace.load(path)
    assert str(back) == str(s)
    assert back.label == s.label == "H2D-BOUND"


def test_loading_something_else_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad.json: not a steptrace summary: not valid JSON \(at byte \d+\)$"):
        steptrace.load(bad)
    bad.write_text('{"schema": "chrome-trace"}')
    with pytest.raises(ValueError, match="unsupported summary schema"):
        steptrace.load(bad)
    with pytest.raises(FileNotFoundError):
        steptrace.load(tmp_path / "missing.json")


def test_module_functions_use_the_default_tracer():
    steptrace.configure(warmup_steps=0, print_at_exit=False)
    steptrace.reset()
    for _ in steptrace.steps(range(3)):
        with steptrace.phase("compute"):
            pass
    assert steptrace.summary().steps == 3
    steptrace.reset()


def test_the_type_stub_names_what_the_module_has():
    import pathlib
    import re

    from steptrace import _core

    stub = (pathlib.Path(steptrace.__file__).parent / "_core.pyi").read_text()
    for name in re.findall(r"^(?:class|def) (\w+)|^(\w+): int", stub, flags=re.M):
        name = name[0] or name[1]
        assert hasattr(_core, name), name


def test_without_a_gpu_the_summary_is_host_only_and_says_why(tracer):
    import os

    for _ in tracer.steps(range(3)):
        pass
    d = tracer.summary().to_dict()
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present")
    assert d["backend"]["cuda"] is False and d["backend"]["cupti"] is False
    assert d["backend"]["reason"].startswith("host only:")
    assert d["gpu"] is None
    assert d["backend"]["host_clock"] in ("tsc", "clock_monotonic")


def test_a_phase_with_a_stream_is_still_a_phase_without_a_gpu(tracer):
    class FakeStream:
        cuda_stream = 0x1234

    with tracer.step():
        with tracer.phase("compute", stream=FakeStream()):
            pass
        with tracer.phase("h2d", stream=0x5678):
            pass
    d = tracer.summary().to_dict()
    assert d["phases"]["compute"]["calls"] == 1 and d["phases"]["h2d"]["calls"] == 1
    assert "device_ms" not in d["phases"]["compute"]  # no GPU here: no events were recorded
    with pytest.raises(TypeError, match="CUDA stream handle"):
        tracer.phase("compute", stream="default")


def test_steps_and_the_default_stream_take_device_timing_without_breaking_anything(tracer):
    # 0 is CUDA's default stream (torch.cuda.default_stream().cuda_stream), not "no stream".
    for _ in range(3):
        with tracer.step(stream=0):
            with tracer.phase("compute", stream=0):
                pass
    for _ in tracer.steps(range(2), stream=0):
        pass

    @tracer.step(stream=0)
    def one_step():
        pass

    one_step()
    d = tracer.summary().to_dict()
    assert d["steps"] == 6
    assert d["phases"]["compute"]["calls"] == 3
    assert "step_device_ms" not in d  # no GPU here: no events were recorded
    with pytest.raises(TypeError, match="CUDA stream handle"):
        tracer.step(stream=-1)
