"""Many ranks, end to end: real DDP jobs on CPU with gloo (tests/python/ranks_job.py), 2 to 4
processes, under torchrun or as plain processes. Delays are sleeps on one rank, so the bounds
separate the right rank and phase from the wrong ones whatever else the machine runs; the
collective wait is checked against ground truth stamped beside steptrace's records."""

import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import steptrace
from conftest import HERE  # noqa: E402
from rank_jobs import TORCH_EXIT_ABORT, combined, free_port, job_env, ok  # noqa: E402

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

JOB = HERE / "ranks_job.py"
DELAY_MS = 15


def run_ranks(tmp_path, scenario, world, steps=40, env=None, timeout=120):
    """Plain processes, rank 0 hosting the store. Returns [(returncode, stdout, stderr)] by rank
    and the seconds each took."""
    port = free_port()
    procs = []
    for rank in range(world):
        e = job_env(
            {
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                **(env or {}),
            }
        )
        procs.append(
            (
                time.monotonic(),
                subprocess.Popen(
                    [sys.executable, str(JOB), scenario, str(steps), str(DELAY_MS), str(tmp_path)],
                    cwd=tmp_path,
                    env=e,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        )
    out = []
    for started, p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout, stderr, time.monotonic() - started))
    return out


def test_torchrun_slow_input_one_file_one_table(tmp_path):
    """torchrun, 2 ranks, rank 1's loader 15 ms slow: STRAGGLER names rank 1 and `input`; only
    rank 0 prints, and it alone writes json_path (the combined summary)."""
    env = job_env({"STEPTRACE_JSON": str(tmp_path / "run.json")})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={free_port()}",
            str(JOB),
            "slow_input",
            "40",
            str(DELAY_MS),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0 or TORCH_EXIT_ABORT in proc.stderr, proc.stderr
    assert proc.stderr.count("── steptrace summary") == 1, proc.stderr
    assert "rank 0 of 2 on" in proc.stderr and "(local rank 0)" in proc.stderr
    assert "2 of 2 gathered" in proc.stderr
    doc = combined(tmp_path / "run.json")
    assert [p.name for p in tmp_path.glob("run.json*")] == ["run.json"]  # no second writer, no leftovers
    s = doc["ranks"]["straggler"]
    assert doc["diagnosis"]["label"] == "STRAGGLER"
    assert s["rank"] == 1 and s["phase"] == "input"
    # It spends about the delay more in `input`, and rank 0 waits about that long for it: far
    # from 0 and from twice the delay, whatever the machine's load.
    assert 0.5 * DELAY_MS < s["excess_ms"] < 1.5 * DELAY_MS
    assert 0.5 * DELAY_MS < s["others_wait_ms"] < 1.5 * DELAY_MS
    rows = {r["rank"]: r for r in doc["ranks"]["rows"]}
    assert rows[1]["slowest_steps"] > 0.8 * doc["ranks"]["steps_compared"]
    assert rows[0]["local_rank"] == 0 and rows[1]["local_rank"] == 1
    first = doc["diagnosis"]["advice"][0]  # it arrives last at the all-reduces: its extra time is in `input`
    assert "rank 1 arrives last" in first and "more in `input`" in first and "loader" in first, first


def test_slow_backward_is_found_in_compute(tmp_path):
    """3 ranks; the last spends 15 ms more inside backward, where the all-reduce evens out the
    step times: STRAGGLER still names it, in `compute` (which holds backward)."""
    results = run_ranks(tmp_path, "slow_backward", 3, env={"STEPTRACE_JSON": str(tmp_path / "run.json")})
    assert all(ok(r[0], r[2]) for r in results), [r[2] for r in results]
    doc = combined(tmp_path / "run.json")
    rows = {r["rank"]: r for r in doc["ranks"]["rows"]}
    steps = [rows[r]["step_ms"]["p50"] for r in range(3)]
    assert max(steps) - min(steps) < 0.3 * DELAY_MS  # step times alone would not show it
    s = doc["ranks"]["straggler"]
    assert (s["rank"], s["phase"]) == (2, "compute"), doc["diagnosis"]
    assert 0.5 * DELAY_MS < s["excess_ms"] < 1.5 * DELAY_MS


def test_balanced_ranks_no_straggler(tmp_path):
    results = run_ranks(tmp_path, "balanced", 2, env={"STEPTRACE_JSON": str(tmp_path / "run.json")})
    assert all(ok(r[0], r[2]) for r in results), [r[2] for r in results]
    doc = combined(tmp_path / "run.json")
    assert doc["ranks"]["straggler"] is None
    assert doc["diagnosis"]["label"] != "STRAGGLER"
    assert doc["ranks"]["missing"] == []


def test_collective_wait_matches_ground_truth_on_every_rank(tmp_path):
    """4 ranks take turns being slow, so every rank waits in most steps; each rank's `wait` is
    within 10% of the hand-timed wait (last gradient to backward's return) of the same step, in
    the median step; the mean it reports is those steps' mean."""
    results = run_ranks(tmp_path, "turns", 4, steps=45, env={"STEPTRACE_JSON": str(tmp_path / "run-{rank}.json")})
    assert all(ok(r[0], r[2]) for r in results), [r[2] for r in results]
    for rank in range(4):
        own = json.loads((tmp_path / f"run-{rank}.json").read_text())
        assert own["rank"]["rank"] == rank
        every = json.loads((tmp_path / f"truth-{rank}.json").read_text())
        truth = every[own["warmup_steps"] :]
        assert len(truth) == own["steps"]
        expected = statistics.mean(truth)
        assert expected > 0.5 * DELAY_MS  # the others were slow in 3 of 4 steps
        # Step by step (the timeline keeps all 45): the truth's gap between the last gradient and
        # steptrace opening `wait` is where a preempted rank (4 ranks on a busy 2-core machine)
        # loses milliseconds in one step, so the median step is compared, not the mean.
        kept = {s["index"]: s for s in own["timeline"]["steps"]}
        errors = []
        for index in range(own["warmup_steps"], len(every)):
            waits = [p["end_ms"] - p["begin_ms"] for p in kept[index]["phases"] if p["name"] == "wait"]
            assert len(waits) == 1, (rank, index, kept[index]["phases"])
            errors.append(abs(waits[0] - every[index]))
        assert statistics.median(errors) < 0.10 * expected, (rank, sorted(errors), expected)
        # And the mean: what steptrace reports is the same steps' sum, whatever outlier they hold.
        # `wait` holds the phase `collective` (the host blocked on the other ranks): the same span
        assert own["phases"]["collective"]["parent"] == "wait"
        assert own["phases"]["collective"]["calls"] == own["phases"]["wait"]["calls"]
        measured = own["phases"]["wait"]["inclusive_ms"]["mean"]
        timeline_mean = statistics.mean(
            sum(p["end_ms"] - p["begin_ms"] for p in kept[i]["phases"] if p["name"] == "wait")
            for i in range(own["warmup_steps"], len(every))
        )
        assert measured == pytest.approx(timeline_mean, rel=1e-6)


def test_crashed_rank_is_named_missing_and_costs_at_most_the_timeout(tmp_path):
    """3 ranks: the last dies (os._exit) at step 8, rank 1 raises there; rank 0's next all-reduce
    fails. Every exception reaches its program unchanged; rank 0 waits at most the timeout and
    names rank 2 missing; rank 1's summary, sent from its exit, is in; each rank wrote its own
    file."""
    timeout = 6
    results = run_ranks(
        tmp_path,
        "crash",
        3,
        env={"STEPTRACE_JSON": str(tmp_path / "run-{rank}.json"), "STEPTRACE_GATHER_TIMEOUT": str(timeout)},
    )
    (rc0, _, err0, took0), (rc1, _, err1, _), (rc2, _, _, _) = results
    assert rc2 == 3
    assert rc1 == 1 and "ValueError: rank 1 gives up" in err1
    assert rc0 == 1 and "Traceback" in err0  # the user's gloo error, unchanged
    assert took0 < 45  # the default timeout (60 s) would take longer
    assert "missing: rank 2: no summary arrived within 6 s" in err0.replace("6.000", "6")
    doc = combined(tmp_path / "run-0.json")
    assert doc["ranks"]["missing"] == [2]
    assert [r["rank"] for r in doc["ranks"]["rows"]] == [0, 1]
    assert json.loads((tmp_path / "run-1.json").read_text())["rank"]["rank"] == 1
    assert not (tmp_path / "run-2.json").exists()
    assert "── steptrace summary" not in err1  # only rank 0 prints


@pytest.mark.parametrize("scenario", ["idle_last", "disabled_last"])
def test_a_rank_with_nothing_to_report_says_so_at_once(tmp_path, scenario):
    """The last rank records no step (or runs with STEPTRACE_DISABLE=1): rank 0 hears at once
    that it has nothing (the default 60 s gather timeout is not waited out) and shows it as a rank
    with no steps, not a crashed one."""
    results = run_ranks(tmp_path, scenario, 2, env={"STEPTRACE_JSON": str(tmp_path / "run.json")})
    assert all(ok(r[0], r[2]) for r in results), [r[2] for r in results]
    assert results[0][3] < 40, results[0][2]  # the whole job, far below the 60 s timeout
    doc = combined(tmp_path / "run.json")
    assert doc["ranks"]["missing"] == []
    rows = {r["rank"]: r for r in doc["ranks"]["rows"]}
    assert rows[0]["steps"] == 35 and rows[1]["steps"] == 0
    assert "missing" not in results[0][2]
    assert "── steptrace summary" not in results[1][2]


def test_a_job_whose_rank_0_records_nothing_still_reports_the_others(tmp_path):
    results = run_ranks(tmp_path, "idle_first", 2, env={"STEPTRACE_JSON": str(tmp_path / "run.json")})
    assert all(ok(r[0], r[2]) for r in results), [r[2] for r in results]
    assert results[0][2].count("── steptrace summary") == 1
    doc = combined(tmp_path / "run.json")
    rows = {r["rank"]: r for r in doc["ranks"]["rows"]}
    assert rows[0]["steps"] == 0 and rows[1]["steps"] == 35 and rows[1]["label"]
    assert doc["diagnosis"]["evidence"] == "Rank 0 recorded no steps: each rank's figures are in the `ranks` table."
    assert doc["ranks"]["worst"]["rank"] == 1
    assert len(steptrace.load(tmp_path / "run.json").to_dict()["ranks"]["rows"]) == 2  # the job JSON loads


def test_a_rank_payload_is_a_few_kb_whatever_the_phases_and_timeline(tracer):
    from steptrace import _core
    from steptrace._ranks import gather as _ranks

    names = [f"layer.{i}" for i in range(256)]
    for _ in range(300):
        with tracer.step():
            with tracer.phase("compute"):
                for name in names:
                    with tracer.phase(name):
                        pass
    tracer._core.set_rank(1, 2, 1, "host", "2026-11-24T00:00:00Z")
    own = tracer._core.summary()
    full, sent = len(own.json()), _ranks.payload(own, [1.5] * 256, 300)
    assert full > 200_000  # the whole summary, with its timeline
    assert len(sent) < 12_000, len(sent)  # 8 of the 256 custom phases go (STRAGGLER's `within`), ~500 bytes each
    assert 8 <= sum(1 for name in json.loads(json.loads(sent)["summary"])["phases"] if name.startswith("layer.")) <= 16
    back = _core.rank_digest(_core.Summary.from_json(json.loads(sent)["summary"]))
    assert back.rank == 1 and back.steps == own.steps
    shares = json.loads(back.json())["phases"]
    assert shares["compute"]["share"] == pytest.approx(
        sum(p["share"] for name, p in json.loads(own.json())["phases"].items() if name not in ("other",)), abs=1e-9
    )


def test_rank_0_refuses_a_rank_summary_that_does_not_hold_together(tracer):
    from steptrace import _core

    with tracer.step():
        with tracer.phase("compute"):
            pass
    tracer._core.set_rank(1, 2, 1, "host", "2026-11-24T00:00:00Z")
    doc = json.loads(tracer._core.summary().json())
    doc["phases"]["compute"]["share"] = 0.9
    doc["phases"]["other"]["share"] = 0.9  # each in range, together 1.8
    with pytest.raises(ValueError, match="the phases. shares sum to 1.800, not 1"):
        _core.rank_digest(_core.Summary.from_json(json.dumps(doc)))


def test_a_refused_rank_is_named_as_refused_with_why_not_as_missing(tracer):
    """The gather's store holds a rank 1 payload that does not hold together: rank 0's table says
    it was refused and why, never that nothing arrived."""
    from steptrace import _core
    from steptrace._ranks import gather as _ranks

    with tracer.step():
        with tracer.phase("compute"):
            pass
    own = tracer._core.summary()
    tracer._core.set_rank(1, 2, 1, "host", "2026-11-24T00:00:00Z")
    doc = json.loads(tracer._core.summary().json())
    doc["phases"]["compute"]["share"] = 0.9
    doc["phases"]["other"]["share"] = 0.9

    class Store:  # torch.distributed's store, as the gather uses it
        def __init__(self):
            self.keys = {"p/1": json.dumps({"summary": json.dumps(doc), "waits": [], "collectives": 0})}

        def wait(self, keys, timeout):
            pass

        def check(self, keys):
            return all(k in self.keys for k in keys)

        def get(self, key):
            return self.keys[key]

        def delete_key(self, key):
            self.keys.pop(key)

    job = _ranks.Job(0, 2, Store())
    refused = []
    reports = [(own.with_rank(0, 2), [], 0)] + _ranks._collect(job, "p/", 1.0, refused)
    assert refused and refused[0][0] == 1 and "shares sum to 1.800" in refused[0][1]
    combined = _core.combine_ranks(reports, 2, 1.0, False, refused)
    table = combined.table()
    assert (
        "refused: rank 1: its summary arrived but did not hold together (ValueError: steptrace: malformed steptrace summary: the phases' shares sum to 1.800"
        in table
    )
    assert "missing" not in table
    assert json.loads(combined.json())["ranks"]["refused"][0]["rank"] == 1


def test_summary_on_every_rank_gathers_once(tmp_path, run_python):
    """summary() alone never waits for other ranks, even called by rank 0 alone mid-run;
    summary(gather=True) on every rank gives rank 0 the job's; at exit rank 0 says it was shown
    and no rank waits."""
    port = free_port()
    code = """
        import os, sys, json, time, torch, torch.distributed as dist
        import steptrace
        dist.init_process_group("gloo")
        for i in range(8):
            with steptrace.step():
                with steptrace.phase("compute"):
                    t = torch.ones(4); dist.all_reduce(t)
            if i == 3 and dist.get_rank() == 0:
                assert steptrace.summary().rank == 0  # its own, at once
        s = steptrace.summary(gather=True)
        print(json.dumps({"rank": s.rank, "rows": len(s.to_dict().get("ranks", {}).get("rows", []))}))
        if s.rank == 0:
            print(s, file=sys.stderr)  # the job's table, shown: the exit report says so
        dist.destroy_process_group()
    """
    script = tmp_path / "every.py"
    script.write_text(textwrap.dedent(code))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env=job_env(
                {
                    "RANK": str(r),
                    "WORLD_SIZE": "2",
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port),
                    "STEPTRACE_GATHER_TIMEOUT": "30",
                }
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    started = time.monotonic()
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(ok(p.returncode, o[1]) for p, o in zip(procs, outs)), outs
    assert time.monotonic() - started < 30  # nobody waited out the timeout at exit
    got = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert got == [{"rank": 0, "rows": 2}, {"rank": 1, "rows": 0}]
    assert "summary already shown" in outs[0][1] and outs[0][1].count("── steptrace summary") == 1
    assert "steptrace" not in outs[1][1]  # rank 1 prints nothing


def straggler_of(path: Path):
    doc = combined(path)
    s = doc["ranks"]["straggler"]
    return doc, (s["rank"], s["phase"]) if s else None


def test_lightning_ddp_needs_no_extra_code(tmp_path):
    """Lightning starts the second process itself; StepTraceCallback is all the program has."""
    pytest.importorskip("lightning")
    proc = subprocess.run(
        [sys.executable, str(JOB.with_name("ranks_lightning.py")), str(DELAY_MS)],
        cwd=tmp_path,
        env=job_env({"STEPTRACE_JSON": str(tmp_path / "run.json")}),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0 or TORCH_EXIT_ABORT in proc.stderr, proc.stderr
    doc, found = straggler_of(tmp_path / "run.json")
    assert found == (1, "input"), doc["diagnosis"]
    assert proc.stderr.count("── steptrace summary") == 1


def test_transformers_trainer_under_torchrun_needs_no_extra_code(tmp_path):
    pytest.importorskip("transformers")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={free_port()}",
            str(JOB.with_name("ranks_transformers.py")),
            str(DELAY_MS),
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        env=job_env({"STEPTRACE_JSON": str(tmp_path / "run.json")}),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0 or TORCH_EXIT_ABORT in proc.stderr, proc.stderr
    doc, found = straggler_of(tmp_path / "run.json")
    assert found == (1, "input"), doc["diagnosis"]
