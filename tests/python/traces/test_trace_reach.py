"""Every trace a user has: public traces steptrace was not developed on (one-step profiles from
TraceLens' H100 and MI300 suites, a B200 server trace without steps) against an independent
reading of each (tests/python/trace_truth.py), traces from a pipe or standard input, and CPU
loops profiled with and without a schedule and with and without steptrace."""

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import steptrace
import trace_truth
from conftest import TRACES  # noqa: E402

DATA = TRACES
QWEN_H100 = DATA / "tracelens_h100_qwen1.5-0.5b.json.gz"
QWEN_MI300 = DATA / "tracelens_mi300_qwen1.5-0.5b.json.gz"
OWLV2 = DATA / "tracelens_h100_owlv2.json.gz"
B200 = DATA / "tracelens_b200_eager.json.gz"
PLAIN_BLOCK = DATA / "resnet50_autograd_api_num_workers_0.json.gz"


def cli(*args, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "steptrace", *map(str, args)], capture_output=True, timeout=120, input=stdin
    )


def idle_in(d: dict, phase: str) -> float:
    """GPU idle time while the host was in `phase`, as a share of step time."""
    g = d["gpu"]
    share = (
        dict((name, s) for name, s in g["idle_by_phase"])
        if isinstance(g["idle_by_phase"], list)
        else g["idle_by_phase"]
    )
    return share.get(phase, 0.0) * g["idle_ms"]["mean"] / d["step_ms"]["mean"]


@pytest.mark.parametrize("path", [QWEN_H100, QWEN_MI300])
def test_a_one_step_qwen_profile_is_compute_bound_with_the_host_blocked_in_syncs(path):
    """The step is counted (not warm-up), the GPU is ~91% busy, and the host's 30% blocked in
    cudaDeviceSynchronize (hipDeviceSynchronize on the MI300) is wait while the GPU works: the
    call an expert makes is COMPUTE-BOUND, not WAIT-HEAVY."""
    truth = trace_truth.read(path)
    d = steptrace.load(path).to_dict()
    assert (d["steps"], d["warmup_steps"]) == (1, 0)
    assert d["step_ms"]["mean"] == pytest.approx(truth["window_ms"], abs=1e-3)
    assert d["gpu"]["busy_share"] == pytest.approx(truth["busy"], abs=0.001)
    assert truth["busy"] > 0.9 and truth["sync"] > 0.29
    # wait holds every blocking sync (and the .item() and device-to-host copy calls beside them)
    wait = d["phases"]["wait"]["share"]
    assert truth["sync"] - 0.001 <= wait <= truth["sync"] + 0.02
    assert idle_in(d, "wait") == pytest.approx(truth["idle_in_sync"], abs=0.002)
    assert d["diagnosis"]["label"] == "COMPUTE-BOUND"
    assert "would not make the GPU faster" in d["diagnosis"]["evidence"]


def test_a_one_step_owlv2_profile_is_input_bound():
    """Half the step the GPU idles while the host is in the DataLoader."""
    truth = trace_truth.read(OWLV2)
    d = steptrace.load(OWLV2).to_dict()
    assert d["steps"] == 1
    assert d["gpu"]["busy_share"] == pytest.approx(truth["busy"], abs=0.001)
    assert truth["idle_in_dataloader"] > 0.5
    assert idle_in(d, "input") == pytest.approx(truth["idle_in_dataloader"], abs=0.002)
    assert d["phases"]["input"]["share"] == pytest.approx(truth["dataloader"], abs=0.002)
    assert d["diagnosis"]["label"] == "INPUT-BOUND"


def test_a_trace_without_steps_is_one_window():
    """A B200 server trace with no ProfilerStep#N: the whole trace, diagnosed and called a window."""
    truth = trace_truth.read(B200)
    s = steptrace.load(B200)
    d = s.to_dict()
    assert d["windows"] is True and d["steps"] == 1
    # less its first `aten::linear` (1.7 ms against 0.1 ms later: cuBLAS's first call), set aside
    aside_ms, aside_busy_ms = trace_truth.set_aside_truth(B200)
    assert [name for name, *_ in trace_truth.first_calls(B200)] == ["aten::linear"]
    assert d["step_ms"]["mean"] == pytest.approx(truth["window_ms"] - aside_ms, abs=1e-3)
    busy_ms = truth["busy"] * truth["window_ms"] - aside_busy_ms
    assert d["gpu"]["busy_share"] == pytest.approx(busy_ms / (truth["window_ms"] - aside_ms), abs=0.001)
    assert d["rank"]["rank"] == 0 and d["rank"]["world_size"] == 8  # its distributedInfo
    assert "1 window of a trace without steps" in str(s)
    assert steptrace.load(B200, step="nccl:_all_gather_base").to_dict()["windows"] is False
    assert "1 window of a trace without steps (the whole trace)" in s.to_html()


def test_a_plain_profile_block_around_a_loop_reads_as_its_iterations():
    """The TensorBoard plugin's ResNet-50 (V100, num_workers=0) under a plain profile block: six
    iterations and no ProfilerStep, 4.5 s of start-up in the first. Its iterations are the steps,
    the first is warm-up, and the figures equal the independent reading's over the same
    iterations; read as one window, the start-up made it LAUNCH-BOUND (CUDA graphs first), where
    its scheduled twin is INPUT-BOUND."""
    truth = trace_truth.read(PLAIN_BLOCK)
    d = steptrace.load(PLAIN_BLOCK).to_dict()
    assert (d["steps"], d["warmup_steps"], d["windows"]) == (truth["windows"], 1, False) == (5, 1, False)
    assert d["facts"]["trace.steps_from"] == "training loop"
    assert d["step_ms"]["mean"] == pytest.approx(truth["window_ms"], abs=1e-3)
    assert d["gpu"]["busy_share"] == pytest.approx(truth["busy"], abs=0.001)
    assert d["phases"]["input"]["share"] == pytest.approx(truth["dataloader"], abs=0.002)
    assert idle_in(d, "input") == pytest.approx(truth["idle_in_dataloader"], abs=0.002)
    assert d["diagnosis"]["label"] == "INPUT-BOUND"
    assert "num_workers" in d["diagnosis"]["advice"][0]
    assert "the first iteration is left out as warm-up: it lasted 4490 ms" in d["backend"]["reason"]


@pytest.mark.parametrize(
    "name",
    [
        "resnet50_2021_num_workers_0.pt.trace.json.gz",
        "resnet50_2021_num_workers_4.pt.trace.json.gz",
        "resnet50_num_workers_0.pt.trace.json.gz",
        "resnet50_num_workers_4.pt.trace.json.gz",
        "hta_trace_diff_control.json.gz",
        "hta_trace_diff_test.json.gz",
        "hta_nccl_data.json.gz",
        "tracelens_mi300_resnet_act_checkpoint.json.gz",
        "hta_negative_queue_rank0.json.gz",
        "hta_ns_resolution_rank0.json.gz",
    ],
)
def test_a_loops_iterations_read_as_its_profiler_steps_do(name, tmp_path):
    """Real training traces with their ProfilerStep ranges taken out (what a plain profile block
    around the same loop writes): the loop's iterations, by its fetches or optimizer steps, give
    the same steps, warm-up and diagnosis as the ProfilerStep ranges, and the same typical step to
    within 1% (an iteration starts at the fetch, a ProfilerStep at `prof.step()` just before it)."""
    with gzip.open(DATA / name, "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    stripped = tmp_path / name.replace(".gz", "")
    stripped.write_text(json.dumps(doc))
    steps, loop = steptrace.load(DATA / name).to_dict(), steptrace.load(stripped).to_dict()
    assert loop["facts"]["trace.steps_from"] == "training loop"
    assert (loop["steps"], loop["warmup_steps"]) == (steps["steps"], steps["warmup_steps"])
    assert loop["step_ms"]["p50"] == pytest.approx(steps["step_ms"]["p50"], rel=0.01)
    assert loop["diagnosis"]["label"] == steps["diagnosis"]["label"]
    assert loop["diagnosis"]["advice"][0].split(" (up to")[0] == steps["diagnosis"]["advice"][0].split(" (up to")[0]


def test_a_jobs_folder_leaves_out_the_execution_traces_kept_beside_its_traces(tmp_path, capfd):
    """HTA keeps each rank's PyTorch execution trace beside its profiler trace: a folder of both is
    read as its traces, each execution trace left out in one line; one named alone, or a folder of
    nothing else, is refused naming it."""
    import shutil

    et = json.dumps({"schema": "1.0.1", "pid": 5, "time": "2023-07-14", "start_ts": 6, "nodes": [{"name": "x"}]})
    shutil.copy(B200, tmp_path / "rank-0.json.gz")
    (tmp_path / "rank-0_et.json").write_text(et)
    alone = steptrace.load(B200).to_dict()
    capfd.readouterr()
    d = steptrace.load(tmp_path).to_dict()
    said = capfd.readouterr().err
    assert d["step_ms"] == alone["step_ms"] and d["diagnosis"]["label"] == alone["diagnosis"]["label"]
    assert said.count("\n") == 1 and "left out of the job" in said and "rank-0_et.json" in said
    assert "execution trace" in said
    with pytest.raises(ValueError, match="rank-0_et.json: a PyTorch execution trace"):
        steptrace.load(tmp_path / "rank-0_et.json")
    (tmp_path / "rank-0.json.gz").unlink()
    (tmp_path / "rank-1_et.json").write_text(et)
    with pytest.raises(ValueError, match="_et.json: a PyTorch execution trace"):
        steptrace.load(tmp_path)


def test_a_trace_from_a_pipe_or_standard_input_reads_as_the_file(tmp_path):
    expected = steptrace.load(QWEN_H100).to_dict()["step_ms"]
    piped = subprocess.run(
        f"{sys.executable} -m steptrace show --json <(zcat {QWEN_H100})",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["step_ms"] == expected
    assert "steptrace-pipe" not in piped.stdout  # named as given, not by its temporary copy
    stdin = cli("show", "-", stdin=gzip.decompress(QWEN_H100.read_bytes()))
    assert stdin.returncode == 0, stdin.stderr
    assert b"COMPUTE-BOUND" in stdin.stdout
    bad = cli("show", "-", stdin=b"not json")
    assert bad.returncode == 2 and b"<stdin>" in bad.stderr and b"Traceback" not in bad.stderr
    # devices and folders that hold no rank files stay refused, in one line
    for path, words in (("/dev/zero", b"not a regular file, a pipe or a folder"), (tmp_path, b"holds no .json")):
        out = cli("show", path)
        assert out.returncode == 2 and words in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr


def test_a_folder_of_saved_rank_summaries_is_a_job(tmp_path):
    """Summaries a job wrote with json_path=run-{rank}.json, read afterwards: the live gather's view."""
    for rank, fetch in ((0, 1), (1, 30)):  # rank 1's loader is slow; rank 0 waits for it
        doc = {"compute": 10, "input": fetch, "wait": 31 - fetch}
        t = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
        t._core.set_rank(rank, 2, rank, "node", "2026-11-24T00:00:00Z")
        for _ in range(4):
            with t.step():
                for phase, ms in doc.items():
                    with t.phase(phase):
                        time.sleep(ms / 1000)
        t.summary().to_json(tmp_path / f"run-{rank}.json")
    d = steptrace.load(tmp_path).to_dict()
    assert d["ranks"]["from_files"] and [r["rank"] for r in d["ranks"]["rows"]] == [0, 1]
    assert d["ranks"]["straggler"]["rank"] == 1 and d["ranks"]["straggler"]["phase"] == "input"
    assert d["diagnosis"]["gains"] and list(d["diagnosis"]["gains"])[0] == "rank 1"
    # a summary written before these fields existed still loads, as it was
    old = json.loads(json.dumps(d))
    old.pop("windows")
    old["diagnosis"].pop("gains")
    old["ranks"].pop("from_files")
    old["ranks"].pop("refused")
    for row in old["ranks"]["rows"]:
        row.pop("gain")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "job.json").write_text(json.dumps(old))
    back = steptrace.load(tmp_path / "old" / "job.json").to_dict()
    assert back["windows"] is False and back["diagnosis"]["gains"] == {} and not back["ranks"]["from_files"]
    assert back["ranks"]["straggler"] == d["ranks"]["straggler"] and back["step_ms"] == d["step_ms"]


torch = pytest.importorskip("torch")


def _cpu_loop(trace: Path, with_steptrace: bool, scheduled: bool, steps: int = 6) -> list:
    """A CPU loop under torch.profiler: each step a 15 ms fetch (sleep) then a ~5 ms compute.
    Returns the fetch times stamped beside it (ms)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    tracer = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
    fetched = []

    def loader():
        for _ in range(steps):
            start = time.perf_counter()
            time.sleep(0.015)
            fetched.append(1000 * (time.perf_counter() - start))
            yield torch.randn(64, 64)

    kwargs = {"schedule": schedule(wait=1, warmup=1, active=1, repeat=1)} if scheduled else {}
    with profile(activities=[ProfilerActivity.CPU], **kwargs) as prof:
        for x in tracer.steps(loader()) if with_steptrace else loader():
            with tracer.phase("compute"):
                end = time.perf_counter() + 0.005
                while time.perf_counter() < end:
                    x = (x @ x) / 64
            if scheduled:
                prof.step()
    prof.export_chrome_trace(str(trace))
    return fetched


def test_a_plain_profile_block_uses_steptraces_annotations(tmp_path):
    path = tmp_path / "annotated.json"
    fetched = _cpu_loop(path, with_steptrace=True, scheduled=False)
    d = steptrace.load(path).to_dict()
    assert "steptrace's own annotations" in d["backend"]["reason"]
    assert d["steps"] == 6 and not d["windows"]  # no device, so no evidence of warm-up: all count
    assert min(fetched) - 0.5 <= d["phases"]["input"]["p50_ms"] <= max(fetched) + 2
    assert d["diagnosis"]["label"] == "INPUT-BOUND"


def test_a_plain_profile_block_without_steptrace_is_one_window(tmp_path):
    path = tmp_path / "plain.json"
    fetched = _cpu_loop(path, with_steptrace=False, scheduled=False)
    s = steptrace.load(path)
    d = s.to_dict()
    assert d["windows"] is True and d["steps"] == 1
    # the window opens at the main thread's first op (the first compute), so it holds every
    # compute and the fetches after the first; the fetches are in no op: `other`
    assert d["step_ms"]["mean"] >= sum(fetched[1:]) + 6 * 5
    assert "1 window of a trace without steps" in str(s)
    assert 0.98 * sum(fetched[1:]) <= d["phases"]["other"]["mean_ms"] <= sum(fetched) + 5


def test_a_one_step_schedule_counts_its_step(tmp_path):
    path = tmp_path / "active1.json"
    _cpu_loop(path, with_steptrace=False, scheduled=True)
    d = steptrace.load(path).to_dict()
    assert (d["steps"], d["warmup_steps"], d["windows"]) == (1, 0, False)
    assert d["step_ms"]["mean"] >= 15


def test_a_jobs_folder_leaves_out_a_list_of_no_trace_events_and_trace_writes_the_job(tmp_path, capfd):
    """A job's folder with a program's own truth beside the traces (a JSON list of its steps): `show`,
    `load` and `trace` read the traces and say the other file in one line, rather than stop on it."""
    import shutil

    shutil.copy(B200, tmp_path / "rank-0.json.gz")
    (tmp_path / "truth-0.json").write_text(json.dumps([{"step": i, "ms": 10.0 + i} for i in range(5)]))
    alone = steptrace.load(B200).to_dict()
    capfd.readouterr()
    d = steptrace.load(tmp_path).to_dict()
    said = capfd.readouterr().err
    assert d["step_ms"] == alone["step_ms"], said
    assert (
        said.count("\n") == 1
        and "left out of the job: " in said
        and "truth-0.json: a JSON list of no trace events" in said
    )
    out = tmp_path / "job.trace.json"
    done = subprocess.run(
        [sys.executable, "-m", "steptrace", "trace", str(tmp_path), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and out.exists(), done.stderr
    assert "truth-0.json" in done.stderr and "no host events" not in done.stderr, done.stderr
    with pytest.raises(ValueError, match="truth-0.json: a JSON list of no trace events"):
        steptrace.load(tmp_path / "truth-0.json")
