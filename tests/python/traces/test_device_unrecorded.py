"""A GPU process traced without the GPU's records (issue: the right cause on real traces): a
host view of a process that put work on a GPU must say so, and must not advise on the host's
compute as if it were a CPU job's. Real: HTA's CUPTI range-profiler benchmark (the runtime calls
recorded, no kernel record). Made from a real trace here: the ResNet-50 sample with its device
records taken out (CUPTI's activity off), and with its runtime calls taken out too (what
activities=[ProfilerActivity.CPU] writes). The counts are held to a plain reading of the JSON."""

import gzip
import json
import re
from pathlib import Path

import pytest

import steptrace
from conftest import TRACES  # noqa: E402

DATA = TRACES
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
WORK_CALL = re.compile(r"^(__)?(cu|hip)\w*(Launch|Memcpy|Memset)")  # launches, copies, memsets


def events(path: Path) -> dict:
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as f:
        return json.load(f)


def work_calls(trace: dict) -> int:
    return sum(1 for e in trace["traceEvents"] if e.get("cat") in RUNTIME and WORK_CALL.match(e.get("name", "")))


def without(trace: dict, cats: set, path: Path) -> Path:
    kept = [e for e in trace["traceEvents"] if e.get("cat") not in cats and e.get("ph") not in ("s", "f")]
    path.write_text(json.dumps({**trace, "traceEvents": kept}))
    return path


def test_a_range_profiler_trace_asks_for_the_gpu_records_first_not_cpu_advice():
    path = DATA / "hta_cupti_profiler_benchmark.json.gz"
    d = steptrace.load(path).to_dict()
    calls = work_calls(events(path))
    assert calls == 104  # 77 launches, 17 copies, 10 memsets: the plain reading
    assert d["gpu"] is None and d["facts"]["trace.device_unrecorded"] == f"{calls} calls"
    assert f"yet its host put work on a GPU ({calls} runtime calls" in d["backend"]["reason"]
    diag = d["diagnosis"]
    assert diag["label"] == "COMPUTE-BOUND"
    assert diag["advice"][0].startswith("record the GPU's activity too")
    advice = " ".join(diag["advice"])
    assert "the CPU supports" not in advice and "set_num_threads" not in advice
    assert "one-time initialisation" in diag["evidence"]  # still set aside, as before


def test_device_records_taken_out_keep_the_host_cause_and_say_what_is_unseen(tmp_path):
    whole = events(DATA / "resnet50_num_workers_0.pt.trace.json.gz")
    before = steptrace.load(DATA / "resnet50_num_workers_0.pt.trace.json.gz").to_dict()
    no_device = steptrace.load(without(whole, DEVICE, tmp_path / "no_device.json")).to_dict()
    assert no_device["gpu"] is None
    assert no_device["facts"]["trace.device_unrecorded"] == f"{work_calls(whole)} calls"
    # the host's figures are the host's, with or without the device
    assert no_device["phases"]["input"]["share"] == pytest.approx(before["phases"]["input"]["share"], abs=1e-9)
    assert no_device["diagnosis"]["label"] == "INPUT-BOUND"  # proven by the host alone: its fix stays first
    assert "num_workers" in no_device["diagnosis"]["advice"][0]
    assert no_device["diagnosis"]["advice"][-1].startswith("record the GPU's activity too")

    cpu_only = steptrace.load(without(whole, DEVICE | RUNTIME, tmp_path / "cpu_only.json")).to_dict()
    assert cpu_only["facts"]["trace.device_unrecorded"] == "op aten::cudnn_convolution"
    assert cpu_only["diagnosis"]["advice"][-1].startswith("record the GPU's side too: add ProfilerActivity.CUDA")


@pytest.mark.parametrize(
    "name",
    [
        "hta_cpu_only_rank34.json.gz",
        "resnet50_num_workers_4.pt.trace.json.gz",
        "tracelens_mi300_resnet_act_checkpoint.json.gz",
    ],
)
def test_cpu_jobs_and_traces_with_their_device_say_nothing_of_it(name):
    d = steptrace.load(DATA / name).to_dict()
    assert "trace.device_unrecorded" not in d["facts"]
    assert not any(line.startswith("record the GPU") for line in d["diagnosis"]["advice"])


def test_an_mtia_trace_is_named_an_accelerator_steptrace_does_not_read_not_a_cpu_job():
    """HTA's MTIA inference trace: its device is Meta's MTIA (records of categories `mtia_*`), which
    steptrace does not read. It says so, counted as a plain reading counts them, and gives no CPU
    job's advice (bf16 on the CPU, torch.set_num_threads) nor a GPU's (TF32, recording CUDA)."""
    path = DATA / "hta_mtia_inference.json.gz"
    records = sum(1 for e in events(path)["traceEvents"] if str(e.get("cat", "")).startswith("mtia_"))
    d = steptrace.load(path).to_dict()
    assert records > 0 and d["facts"]["trace.device_unrecorded"] == f"{records} mtia"
    assert f"{records} records of an MTIA accelerator, which steptrace does not read" in d["backend"]["reason"]
    assert f"The trace holds {records} records of an MTIA accelerator" in d["diagnosis"]["evidence"]
    advice = " ".join(d["diagnosis"]["advice"])
    assert "HTA reads MTIA traces" in d["diagnosis"]["advice"][0]
    for wrong in ("CPU supports", "set_num_threads", "TF32", "ProfilerActivity.CUDA"):
        assert wrong not in advice
