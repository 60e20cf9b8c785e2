"""The rank that arrives last at the all-reduces, on a real 4-process DDP job on CPU (gloo) under
torchrun (tests/python/ranks_job.py slow_backward): rank 2 sleeps in its own `backward` phase
each step, and the sleeps as its own clock measured them are the truth."""

import json
import statistics
import subprocess
import sys

import pytest
from conftest import HERE  # noqa: E402
from rank_jobs import TORCH_EXIT_ABORT, combined, free_port, job_env  # noqa: E402

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

JOB = HERE / "ranks_job.py"


def arrivals_job(tmp_path, delay_ms, slow_rank):
    """torchrun, 4 ranks, `backward` a phase of its own, rank `slow_rank` (or none) sleeping
    delay_ms in it each step. Returns the combined summary and the sleeps (ms) as measured."""
    env = job_env(
        {
            "STEPTRACE_JSON": str(tmp_path / "run.json"),
            "NAMED_BACKWARD": "1",
            "SLOW_RANK": str(slow_rank if slow_rank is not None else 99),
        }
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=4",
            f"--master_port={free_port()}",
            str(JOB),
            "slow_backward",
            "40",
            str(delay_ms),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 or TORCH_EXIT_ABORT in proc.stderr, proc.stderr
    slept = json.loads((tmp_path / f"slept-{slow_rank}.json").read_text()) if slow_rank is not None else []
    return combined(tmp_path / "run.json"), slept


def check_arrival_verdict(doc, slept, rel):
    arrivals = doc["ranks"]["arrivals"]
    assert arrivals["compared"] >= 20, arrivals
    by_rank = {r["rank"]: r for r in arrivals["ranks"]}
    assert by_rank[2]["last"] >= 0.9 * arrivals["compared"], arrivals["ranks"]
    truth = statistics.median(slept)  # the delay as the slow rank's own clock measured it
    assert abs(by_rank[2]["late_ms"] - truth) < rel * truth, (by_rank[2], truth)
    s = doc["ranks"]["straggler"]
    assert s["rank"] == 2 and s["arrivals"]["before"] == "backward", s
    assert "arrived last at" in doc["diagnosis"]["evidence"]


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory):
    """The same job twice: rank 2 sleeping 40 ms in `backward` each step, and no rank delayed."""
    slow = arrivals_job(tmp_path_factory.mktemp("slow"), 40, 2)
    even = arrivals_job(tmp_path_factory.mktemp("even"), 40, None)
    return slow, even


def transfer_per_call(doc):
    """The median call's transfer (ms): the time each all-reduce lasts after its last arrival."""
    return statistics.median(c["transfer_ms"] for c in doc["ranks"]["arrivals"]["collectives"])


def test_a_rank_slow_in_backward_arrives_last_at_the_all_reduces_by_the_delay(two_jobs):
    """4 ranks under torchrun; rank 2 sleeps 40 ms in `backward` each step: it reaches 90% or
    more of the all-reduces last, by the delay within 20%, after `backward`. The others' wait
    for the last rank is the delay within 20%, and what is left of each call, the transfer, is
    the no-delay run's collective time within a factor of 2 and far from the delay (medians per
    call). Idle, this machine gave 8.09 ms against 7.95; under CI's load 5.94 against 7.75: with
    4 ranks on 2 cores, a call whose ranks all wait ready moves the data faster than one whose
    ranks still compete for the cores. A split that counted the wait as transfer would be 48 ms."""
    (doc, slept), (even, _) = two_jobs
    check_arrival_verdict(doc, slept, 0.2)
    truth = statistics.median(slept)
    split = {r["rank"]: r["wait_ms"] for r in doc["ranks"]["arrivals"]["split"]}
    others = statistics.median(w for rank, w in split.items() if rank != 2)
    assert abs(others - truth) < 0.2 * truth, (split, truth)
    assert split[2] < 0.1 * truth, split
    # the no-delay run's collective time: its transfer and the median rank's wait, a call
    even_split = even["ranks"]["arrivals"]["split"]
    no_delay = transfer_per_call(even) + statistics.median(r["wait_ms"] for r in even_split)
    transfer = transfer_per_call(doc)
    assert 0.5 * no_delay < transfer < 2 * no_delay, (transfer, no_delay)
    assert transfer < 0.5 * truth, (transfer, truth)


def test_no_delay_names_no_rank_by_arrival(two_jobs):
    _, (doc, _) = two_jobs
    arrivals = doc["ranks"]["arrivals"]
    assert all(r["last"] <= 0.5 * arrivals["compared"] for r in arrivals["ranks"]), arrivals["ranks"]
    assert doc["ranks"]["straggler"] is None, doc["ranks"]["straggler"]


def test_the_arrival_verdict_holds_under_ten_cpu_burners(tmp_path):
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(10)]
    try:
        doc, slept = arrivals_job(tmp_path, 40, 2)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    check_arrival_verdict(doc, slept, 0.5)
