"""`steptrace trace DIR` on a real 4-process gloo job profiled by torch.profiler: one file holding
each rank's slowest steps and the median rank's same steps, aligned on the collectives. The truth is
the job itself (tests/python/profiled_job.py): rank 2 sleeps 300 ms before the all-reduce of step
6, and each rank timed its own all-reduce waits by perf_counter beside the profiler."""

import json
import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from steptrace._cli.main import main  # noqa: E402
from conftest import HERE, TRACES  # noqa: E402

JOB = str(HERE / "profiled_job.py")
SLOW_RANK, SLOW_STEP = 2, 6


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    procs = [
        subprocess.Popen(
            [sys.executable, JOB, str(folder)],
            cwd=folder,
            env={
                **env,
                "OMP_NUM_THREADS": "1",
                "RANK": str(r),
                "WORLD_SIZE": "4",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
    truth = {r: json.loads((folder / f"truth-{r}.json").read_text()) for r in range(4)}
    traces = folder / "traces"
    traces.mkdir()
    for r in range(4):
        os.replace(folder / f"rank{r}.pt.trace.json", traces / f"rank{r}.pt.trace.json")
    return traces, truth


def read_merged(traces, tmp_path, capsys):
    out = tmp_path / "job.trace.json"
    assert main(["trace", str(traces), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    doc = json.loads(out.read_text())
    steps, spans = {}, []
    for e in doc["traceEvents"]:
        if e["ph"] != "X":
            continue
        rank = (e["pid"] - 1) // 2
        if e["cat"].startswith("step"):
            steps[(rank, e["args"]["index"])] = (e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3)
        elif e["name"] == "collective":
            spans.append((rank, e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3))

    def collective(rank, index):  # the step's last collective span
        b, e = steps[(rank, index)]
        inside = [s for s in spans if s[0] == rank and b - 1e-6 <= s[1] and s[2] <= e + 1e-6]
        return max(inside, key=lambda s: s[2])[1:]

    return doc, steps, collective, said, out


def test_one_file_holds_the_slow_rank_and_the_median_rank_aligned_on_the_collective(job, tmp_path, capsys):
    traces, truth = job
    doc, steps, collective, said, out = read_merged(traces, tmp_path, capsys)
    other = doc["otherData"]
    median = other["median_rank"]
    assert f"on rank {median} (the median)" in said
    assert other["ranks_read"] == 4 and other["ranks_left_out"] == 0
    # The job's slowest step is first, on the slow rank and on the median rank.
    assert other["steps"][0] == SLOW_STEP
    assert (SLOW_RANK, SLOW_STEP) in steps and (median, SLOW_STEP) in steps
    assert other["median_rank_lacks"] == []
    rows = {row["rank"]: row for row in other["ranks"]}
    assert all(rows[r]["aligned_on"] in ("host collectives", "the median rank") for r in rows)
    # Every rank waited in step 6 for rank 2's 300 ms (their own timing says so), and on the one
    # timeline the others' collective spans end where rank 2's does: rank 2 arrived late and
    # waited little, the others arrived early and waited long.
    slow_wait = truth[SLOW_RANK][SLOW_STEP]
    for r in rows:
        if r == SLOW_RANK or (r, SLOW_STEP) not in steps:
            continue
        assert truth[r][SLOW_STEP] > slow_wait + 150  # the job's own clock: r waited for rank 2
        begin, end = collective(r, SLOW_STEP)
        slow_begin, slow_end = collective(SLOW_RANK, SLOW_STEP)
        assert end - begin > 150  # the timeline shows r's wait
        # Aligned on the shared end: each rank moved by the median over its steps, so one step's
        # ends differ by the processes' wake-up jitter (4 processes on 2 cores), far below 300 ms.
        assert abs(end - slow_end) < 25
        assert slow_begin - begin > 150  # and rank 2 arrived long after r did
    # Smaller than any one of the traces it was made from.
    assert os.path.getsize(out) < min(os.path.getsize(p) for p in traces.iterdir())


def test_the_merged_file_is_a_chrome_trace_perfetto_can_open(job, tmp_path, capsys):
    traces, _ = job
    doc, _, _, _, _ = read_merged(traces, tmp_path, capsys)
    named = {e["pid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    for e in doc["traceEvents"]:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["ph"] in ("X", "M")
        assert e["pid"] in named
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["ts"], (int, float)) and e["name"]
    assert doc["displayTimeUnit"] == "ms"


def test_saved_summaries_of_the_ranks_give_the_same_file_as_their_traces(job, tmp_path, capsys):
    """A job that saved each rank's summary (json_path on every rank) merges as its traces do: the
    summary keeps the timeline, the rank and the collectives."""
    import steptrace

    traces, _ = job
    saved = tmp_path / "summaries"
    saved.mkdir()
    for path in sorted(traces.iterdir()):
        steptrace.load(str(path)).to_json(str(saved / (path.name.split(".")[0] + ".json")))
    from_traces, _, _, _, _ = read_merged(traces, tmp_path, capsys)
    from_saved, _, _, _, _ = read_merged(saved, tmp_path, capsys)
    a, b = from_saved["otherData"], from_traces["otherData"]
    assert (a["median_rank"], a["steps"], a["median_rank_lacks"]) == (
        b["median_rank"],
        b["steps"],
        b["median_rank_lacks"],
    )
    assert len(a["ranks"]) == len(b["ranks"])
    for x, y in zip(a["ranks"], b["ranks"]):
        assert (x["rank"], x["steps"], x["aligned_on"]) == (y["rank"], y["steps"], y["aligned_on"])
        assert x["shift_ms"] == pytest.approx(y["shift_ms"], abs=1e-6)
    assert len(from_saved["traceEvents"]) == len(from_traces["traceEvents"])


def test_eight_ranks_of_a_real_nccl_trace_align_on_their_all_reduce_kernels(tmp_path, capsys):
    """Eight ranks made from a real A100 DDP trace with NCCL all-reduce kernels (HTA's, in
    tests/data): rank r's first step begins 2r ms earlier, so its own times run 2r ms later than
    rank 0's. Aligned on the all-reduce kernels' ends, rank r moves by 2(m - r) ms, m the median
    rank: exactly, as the kernels are the same."""
    import gzip

    with gzip.open(str(TRACES / "hta_nccl_data.json.gz")) as f:
        src = json.load(f)
    traces = tmp_path / "traces"
    traces.mkdir()
    first = min((e for e in src["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    for r in range(8):
        doc = dict(src, distributedInfo=dict(src["distributedInfo"], rank=r, world_size=8))
        doc["traceEvents"] = [
            dict(e, ts=e["ts"] - 2000 * r, dur=e["dur"] + 2000 * r) if e is first else e for e in src["traceEvents"]
        ]
        with gzip.open(traces / f"rank{r}.json.gz", "wt") as f:
            json.dump(doc, f)
    doc, steps, _, _, out = read_merged(traces, tmp_path, capsys)
    other = doc["otherData"]
    m = other["median_rank"]
    assert other["ranks_read"] == 8 and len(other["ranks"]) == 8
    for row in other["ranks"]:
        if row["rank"] != m:
            assert row["aligned_on"] == "collective kernels"
            assert row["shift_ms"] == pytest.approx(2.0 * (m - row["rank"]), abs=1e-3)
    # On the one timeline each rank's step 1 begins at the same instant (the copies are the same
    # after their first step), and step 0 on rank r began 2r ms before rank 0's.
    assert {round(steps[(r, 1)][0], 3) for r in range(8)} == {round(steps[(0, 1)][0], 3)}
    for r in range(8):
        assert steps[(0, 0)][0] - steps[(r, 0)][0] == pytest.approx(2.0 * r, abs=1e-3)
    collective = [e for e in doc["traceEvents"] if e["ph"] == "X" and "collective" in e["cat"]]
    assert {(e["pid"] - 2) // 2 for e in collective} == set(range(8))  # each rank's NCCL kernels are drawn
