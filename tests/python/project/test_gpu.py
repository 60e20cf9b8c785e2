"""Scenario labels on a real GPU (skipped without CUDA; scripts/gpu runs them on a GPU machine)."""

import pytest

torch = pytest.importorskip("torch")

from steptrace import demo  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def gpu_scenarios():
    return [(demo.run(b, rb), demo.run(a, ra)) for b, a, rb, ra in demo.gpu_pairs(steps=40)]


def test_every_gpu_scenario_gets_its_label(gpu_scenarios):
    for before, after in gpu_scenarios:
        assert before.summary.to_dict()["backend"]["cupti"], before.summary.to_dict()["backend"]["reason"]
        assert before.summary.label == before.label_expected, (before.name, str(before.summary))


def test_pinned_copies_and_fused_kernels_are_better(gpu_scenarios):
    (pageable, pinned), (tiny, fused), _ = gpu_scenarios
    assert pinned.share("h2d") < pageable.share("h2d")
    assert pinned.summary.to_dict()["gpu"]["h2d"]["pageable_share"] == 0
    assert pageable.summary.to_dict()["gpu"]["h2d"]["pageable_share"] == 1
    assert fused.step_ms() < tiny.step_ms()


def test_the_default_stream_gives_device_time_to_steps_and_phases():
    import steptrace

    torch.cuda.init()
    tracer = steptrace.Tracer(print_at_exit=False, warmup_steps=1)
    x = torch.ones(1, device="cuda")
    cycles = 10_000_000  # GPU clock cycles: a few milliseconds of device time at 1.5 to 2 GHz
    for _ in range(6):
        with tracer.step(stream=torch.cuda.default_stream()):
            with tracer.phase("compute"):  # torch's current stream: the default one, handle 0
                torch.cuda._sleep(cycles)
                x += 1
        torch.cuda.synchronize()
    d = tracer.summary().to_dict()
    assert torch.cuda.current_stream().cuda_stream == 0
    assert d["phases"]["compute"]["device_calls"] == 5, d["phases"]["compute"]
    assert d["step_device_steps"] == 5
    assert d["phases"]["compute"]["device_ms"]["mean"] > 1.0
    assert d["step_device_ms"]["mean"] >= d["phases"]["compute"]["device_ms"]["mean"] * 0.98


def test_device_sample_gives_the_same_labels_from_its_recorded_windows():
    """device_sample=2 with 1 s windows: each scenario runs 4 s, so CUPTI leaves windows out; the
    label comes from the recorded windows' steps and matches the full mode's expectation."""
    import time

    import steptrace

    for before, _after, body, _ in demo.gpu_pairs(steps=40):
        tracer = steptrace.Tracer(print_at_exit=False, warmup_steps=5, device_sample=2, live=1)
        began = time.perf_counter()
        while time.perf_counter() - began < 4.0:
            body(tracer)
        tracer.configure(live=0, device_sample=1)  # CUPTI is the process's: every window again for the next
        d = tracer.summary().to_dict()
        gpu = d["gpu"]
        assert gpu["sample_every"] == 2 and gpu["steps_sampled_out"] > 0 and gpu["steps_viewed"] > 0, gpu
        assert d["diagnosis"]["label"] == before.label_expected, (before.name, str(tracer.summary()))
        assert "device_sample=2" in d["diagnosis"]["evidence"]
