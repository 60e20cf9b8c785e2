"""A job read from its ranks' traces: a real 3-rank DDP job on CPU (gloo) profiled with
torch.profiler on every rank (tests/python/trace_job.py, no steptrace in it), one rank's loader
slowed by a sleep far beyond any preemption; an even job; and a GPU job written by hand with
NCCL kernels, whose straggler shows only on the device."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import steptrace
from conftest import HERE  # noqa: E402

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

JOB = HERE / "trace_job.py"
DELAY_MS = 40


def run_job(tmp_path: Path, slow_rank: int, world: int = 3) -> Path:
    """Runs the job; returns the folder of its rank traces."""
    (tmp_path / "traces").mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(world):
        env = {
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
            "PATH": "/usr/bin:/bin",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(JOB), str(slow_rank), str(DELAY_MS), str(tmp_path)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    errors = [p.communicate(timeout=180)[1] for p in procs]  # gloo's teardown may abort after the files are written
    assert len(list((tmp_path / "traces").iterdir())) == world, [e[-1000:] for e in errors]
    return tmp_path / "traces"


def test_a_folder_of_rank_traces_names_the_slow_ranks_loader(tmp_path):
    folder = run_job(tmp_path, slow_rank=2)
    slept = json.loads((tmp_path / "truth-2.json").read_text())
    s = steptrace.load(folder)
    d = s.to_dict()
    ranks = d["ranks"]
    assert ranks["from_files"] and [r["rank"] for r in ranks["rows"]] == [0, 1, 2] and not ranks["missing"]
    assert d["diagnosis"]["label"] == "STRAGGLER"
    assert ranks["straggler"]["rank"] == 2 and ranks["straggler"]["phase"] == "input"
    rows = {r["rank"]: r["phase_ms"] for r in ranks["rows"]}
    # the slow rank's fetch is its sleep; the fast ranks wait for it in gloo's all-reduce (on
    # gloo's thread, the main thread in no op): wait, most of their step
    assert min(slept) - 1 <= rows[2]["input"] <= max(slept) + 5
    for fast in (0, 1):
        assert rows[fast]["wait"] >= 0.6 * DELAY_MS, rows[fast]
        assert rows[fast]["wait"] > 10 * rows[fast]["compute"]
    assert rows[2]["wait"] < 0.3 * DELAY_MS
    first = d["diagnosis"]["advice"][0]  # from its arrival at gloo's all-reduces, and its extra time in `input`
    assert "rank 2 arrives last" in first and "more in `input`" in first and "data loader" in first, first
    late = ranks["straggler"]["arrivals"]
    assert late["last"] >= 0.9 * late["compared"] and min(slept) - 5 <= late["late_ms"] <= max(slept) + 5, late
    assert "read from files" in str(s)
    # several files and a glob give the same job; so does each command
    files = sorted(str(p) for p in folder.iterdir())
    assert steptrace.load(files).to_dict()["ranks"]["straggler"]["rank"] == 2
    assert steptrace.load(str(folder / "rank-*.pt.trace.json")).to_dict()["ranks"]["straggler"]["rank"] == 2
    for args in (
        ("show", folder),
        ("show", *files),
        ("report", folder, "-o", tmp_path / "r.html"),
        ("trace", str(folder / "rank-*"), "-o", tmp_path / "t.json"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "steptrace", *map(str, args)], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, (args, out.stderr)
    assert "STRAGGLER" in (tmp_path / "r.html").read_text()
    # a job before and after: compare takes a folder a side
    cmp = subprocess.run(
        [sys.executable, "-m", "steptrace", "compare", folder, folder], capture_output=True, text=True, timeout=120
    )
    assert cmp.returncode == 0, cmp.stderr


def test_an_even_job_names_no_straggler(tmp_path):
    folder = run_job(tmp_path, slow_rank=-1)  # every rank's loader sleeps the same
    d = steptrace.load(folder).to_dict()
    assert d["ranks"]["straggler"] is None
    assert d["diagnosis"]["label"] != "STRAGGLER"
    assert len(d["ranks"]["rows"]) == 3


def _gpu_rank(rank: int, world: int, input_ms: float, exposed_ms: float) -> dict:
    """A rank's trace by hand: 4 steps of a fetch, a compute kernel, then an NCCL all-reduce
    kernel `exposed_ms` long that no other kernel overlaps (it waits for the slowest rank's
    data), the host never blocking. Times in us."""
    events, corr = [], 0

    def x(cat, name, pid, tid, ts, dur, **args):
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})

    step_us = 40_000
    for i in range(4):
        at = 1_000_000 + i * step_us
        x("user_annotation", f"ProfilerStep#{i}", 10, 10, at, step_us)
        x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 10, 10, at, input_ms * 1000)
        launch = at + input_ms * 1000 + 10
        for name, start, dur in (
            ("gemm", launch + 20, 15_000),
            ("ncclDevKernel_AllReduce_Sum_f32", launch + 15_100, exposed_ms * 1000),
        ):
            corr += 1
            x("cpu_op", "aten::mm" if name == "gemm" else "nccl:all_reduce", 10, 10, launch, 10)
            x("cuda_runtime", "cudaLaunchKernel", 10, 10, launch + 2, 5, correlation=corr)
            x(
                "kernel",
                name,
                0,
                7 if name == "gemm" else 9,
                start,
                dur,
                device=0,
                context=1,
                stream=7,
                correlation=corr,
            )
            launch += 12
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "deviceProperties": [{"id": 0, "name": "Hand-made GPU"}],
        "traceEvents": events,
    }


def test_a_gpu_job_names_its_straggler_from_the_nccl_kernels_exposed_time(tmp_path):
    # Rank 1 fetches 12 ms a step more; ranks 0 and 2 wait for it on the device, their NCCL
    # kernels exposed 12 ms longer. No host waits anywhere: only the device shows who waits.
    folder = tmp_path / "gpu"
    folder.mkdir()
    for rank, (input_ms, exposed_ms) in enumerate(((3, 12.5), (15, 0.5), (3, 12.5))):
        (folder / f"r{rank}.json").write_text(json.dumps(_gpu_rank(rank, 4, input_ms, exposed_ms)))
    d = steptrace.load(folder).to_dict()
    ranks = d["ranks"]
    assert ranks["missing"] == [3]  # distributedInfo says a world of 4
    rows = {r["rank"]: r for r in ranks["rows"]}
    # the exposed NCCL time is the rank's GPU wait, a column beside its host phases (no host waits)
    assert rows[0]["device_wait_ms"] == pytest.approx(12.5, abs=0.01)
    assert rows[1]["device_wait_ms"] == pytest.approx(0.5, abs=0.01)
    for r in rows.values():
        assert r["phase_ms"]["wait"] == pytest.approx(0, abs=0.01)
        assert sum(r["phase_ms"].values()) == pytest.approx(r["step_ms"]["mean"], rel=1e-6)
    assert ranks["straggler"]["rank"] == 1 and ranks["straggler"]["phase"] == "input"
    assert ranks["straggler"]["excess_ms"] == pytest.approx(12, abs=0.01)
    assert "no file among those read" in str(steptrace.load(folder))
    # two files that say they are the same rank are refused, naming both
    (folder / "r9.json").write_text(json.dumps(_gpu_rank(0, 4, 3, 12.5)))
    with pytest.raises(ValueError, match="r0.json and .*r9.json are both rank 0"):
        steptrace.load(folder)
