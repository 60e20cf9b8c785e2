"""The ranks' arrival at each collective, read from real rank traces and held to an independent
reading written here in plain JSON: each collective's calls matched across the ranks (by the
kernels' sequence, else by their common end), each aligned on its own end, the rank that started
last and by how much after the median of the others."""

import copy
import gzip
import json
import statistics
from pathlib import Path

import pytest

import steptrace
from conftest import TRACES  # noqa: E402


def events(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def collective_kernels(trace: dict) -> list:
    """The trace's collective kernels (NCCL), by start: (group, start_us, end_us)."""
    out = []
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("ph") == "X" and "nccl" in e.get("name", "").lower():
            args = e.get("args", {})
            group = args.get("Process Group Name", f"stream {args.get('stream')}")
            out.append((group, float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    return sorted(out, key=lambda k: k[1])


def independent_arrivals(ranks: list) -> list:
    """Each collective of rank 0 matched to the call of each other rank of the same group that
    ends with it: that rank's clock offset is the end difference most pairs of calls share (to
    0.1 ms), and two calls are one collective when each is the other's nearest by end, on one
    clock, and they end closer than half the way to rank 0's neighbouring calls (or within 50 us).
    Then who started last, and by how much (ms) after the median of the others' starts, each call
    aligned on its own end."""
    kernels = [collective_kernels(t) for t in ranks]
    offsets = []
    for mine in kernels[1:]:
        diffs = [e2 - e1 for _, _, e1 in kernels[0] for _, _, e2 in mine]
        buckets = {}
        for d in diffs:
            buckets.setdefault(round(d / 100), []).append(d)
        most = max(buckets.values(), key=lambda b: (len(b), -abs(statistics.median(b))))
        offsets.append(statistics.median(most))
    rows = []
    for group, start0, end0 in kernels[0]:
        calls = [(start0, end0)]
        same0 = [e for g, _, e in kernels[0] if g == group]
        for offset, mine in zip(offsets, kernels[1:]):
            same = [(s, e) for g, s, e in mine if g == group]
            s, e = min(same, key=lambda c: abs(c[1] - offset - end0))
            back = min(same0, key=lambda e0: abs(e - offset - e0))  # its nearest is this call, too
            gaps = [abs(end0 - e0) / 2 for e0 in same0 if e0 != end0]
            if back != end0 or abs(e - offset - end0) > max(50.0, min(gaps, default=float("inf"))):
                break
            calls.append((s, e))
        if len(calls) != len(ranks):
            continue
        arrive = [s - e for s, e in calls]
        last = max(range(len(arrive)), key=lambda r: arrive[r])
        others = [a for r, a in enumerate(arrive) if r != last]
        rows.append((group, last, max(0.0, arrive[last] - statistics.median(others)) / 1e3))
    return rows


def read_back(ranks: list, tmp_path: Path) -> dict:
    for r, trace in enumerate(ranks):
        (tmp_path / f"rank{r}.pt.trace.json").write_text(json.dumps(trace))
    return steptrace.load(tmp_path).to_dict()


def test_sampled_ranks_of_a_128_rank_job_match_an_independent_reading(tmp_path):
    # HTA's two sampled ranks of one job: no sequence numbers, and of each rank's all-to-all
    # exchanges only some end with the other rank's.
    ranks = [events(TRACES / f"hta_sampled_rank{r}.json.gz") for r in (0, 1)]
    want = independent_arrivals(ranks)
    assert len(want) >= 4
    got = read_back(ranks, tmp_path)["ranks"]["arrivals"]
    assert got["matched_by"] == "end"
    rows = [(c["group"], c["last_rank"], c["late_ms"]) for c in got["collectives"]]
    assert [(g, r) for g, r, _ in rows] == [(g, r) for g, r, _ in want]
    for (_, _, late), (_, _, truth) in zip(rows, want):
        assert late == pytest.approx(truth, abs=0.002)


def test_a_late_rank_with_a_shifted_clock_is_found_at_every_collective(tmp_path):
    # hta_nccl_data (rank 0 of 2) and a rank 1 made from it: its clock 123.456789 s ahead, and at
    # each collective it starts a known share of the kernel later (the data leaves together).
    rank0 = events(TRACES / "hta_nccl_data.json.gz")
    rank1 = copy.deepcopy(rank0)
    rank1["distributedInfo"]["rank"] = 1
    shift = 123_456_789.0
    for e in rank1["traceEvents"]:
        if "ts" not in e:
            continue
        late = 0.0
        if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower():
            late = 0.4 * float(e["dur"])
            e["dur"] = float(e["dur"]) - late
        e["ts"] = float(e["ts"]) + shift + late
    ranks = [rank0, rank1]
    want = independent_arrivals(ranks)
    assert len(want) == len(collective_kernels(rank0)) == 21
    got = read_back(ranks, tmp_path)["ranks"]["arrivals"]
    rows = [(c["group"], c["last_rank"], c["late_ms"]) for c in got["collectives"]]
    assert [(g, r) for g, r, _ in rows] == [(g, r) for g, r, _ in want]
    assert all(r == 1 for _, r, _ in rows)
    for (_, _, late), (_, _, truth) in zip(rows, want):
        assert late == pytest.approx(truth, abs=0.002)
    assert [{k: r[k] for k in ("rank", "last", "late_ms")} for r in got["ranks"]] == [
        {"rank": 1, "last": 21, "late_ms": pytest.approx(statistics.median(t for *_, t in want), abs=0.002)}
    ]
    # The split: rank 0 waits the 40% rank 1 starts late, and the 60% left is the transfer both
    # pay, as the kernels written here say (a mean per call).
    durs = [e - s for _, s, e in collective_kernels(rank0)]
    split = {r["rank"]: r["wait_ms"] for r in got["split"]}
    assert split[0] == pytest.approx(statistics.mean(0.4 * d for d in durs) / 1e3, rel=1e-3)
    assert split[1] == pytest.approx(0.0, abs=1e-3)
    assert got["transfer_ms"] == pytest.approx(statistics.mean(0.6 * d for d in durs) / 1e3, rel=1e-3)


def test_a_gloo_job_read_from_its_traces_names_the_rank_that_arrived_last():
    # Two CPU ranks (gloo, DDP); rank 1 sleeps 30 ms in its `data` range each step (job.py): it
    # reaches every all-reduce last, about 30 ms after rank 0.
    d = steptrace.load(TRACES.parent / "gloo_straggler").to_dict()
    arrivals = d["ranks"]["arrivals"]
    assert arrivals["compared"] >= 10
    last = max(arrivals["ranks"], key=lambda r: r["last"])
    assert last["rank"] == 1 and last["last"] >= 0.9 * arrivals["compared"]
    assert 25 < last["late_ms"] < 36
    straggler = d["ranks"]["straggler"]
    assert straggler["rank"] == 1 and straggler["arrivals"]["last"] == last["last"]
