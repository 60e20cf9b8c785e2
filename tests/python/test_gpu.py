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
