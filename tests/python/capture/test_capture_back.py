"""The retroactive capture (capture_back): when a trigger fires, the kept steps that tripped it are
written at once, read back with the diagnosis they had live; a one-off stall, over before any
forward capture could start, is in it. Truth is the test's own clock around the stall; the steps
are the loop's own count."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
import steptrace  # noqa: E402
from conftest import HERE  # noqa: E402

FAST_S, STALL_S = 0.004, 0.4


def forward_and_back(captures):
    """A run's captures split: the forward ones, the retroactive ones."""
    return [c for c in captures if not c.get("retroactive")], [c for c in captures if c.get("retroactive")]


def longest_input_ms(path):
    """The longest `input` phase call in a timeline steptrace wrote, in ms."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return max(e["dur"] for e in events if e.get("cat") == "phase" and e["name"] == "input") / 1e3


def captures_of(t, n_back, n_forward, timeout_s=20):
    """The tracer's captures once it has written this many of each (the collector writes the kept
    steps a moment after the trigger)."""
    until = time.monotonic() + timeout_s
    while True:
        forward, back = forward_and_back(t.summary().to_dict().get("captures") or [])
        if (len(back) >= n_back and len(forward) >= n_forward) or time.monotonic() > until:
            return forward, back
        time.sleep(0.05)


def test_a_one_off_stall_is_written_from_the_kept_steps_and_the_steps_after_it_forward(tmp_path, capfd):
    t = steptrace.Tracer(
        warmup_steps=0,
        print_at_exit="never",
        capture_dir=str(tmp_path / "caps"),
        live=1,
        capture="stall=20",
        capture_steps=3,
    )
    stall_at = 1200  # about 5 s of steady steps first: the first window is warm-up, the next three the baseline
    stamped = {}

    def loader():
        for i in range(stall_at + 400):
            if i == stall_at:
                began = time.perf_counter()
                time.sleep(STALL_S)
                stamped["ms"] = 1e3 * (time.perf_counter() - began)
            else:
                time.sleep(FAST_S)
            yield i

    x = torch.zeros(16)
    for _ in t.steps(loader()):
        with t.phase("compute"):
            x.mul_(0.5).add_(1.0)
    forward, back = captures_of(t, 1, 1)
    t.configure(live=0)
    assert len(back) == 1 and len(forward) == 1, (forward, back)
    b, f = back[0], forward[0]
    # The stall tripped it and the retroactive capture holds that very step, with the stall in `input`.
    assert b["reason"].startswith("stall: a step of "), b["reason"]
    assert b["tripped"] == stall_at and stall_at in b["indices"], b
    assert b["tool"] == "steptrace" and b["label"] == "INPUT-BOUND", b
    assert f"-rank0-back-step{stall_at}-pid" in b["path"]
    # The phase holds the loader's call around the sleep: a few us more than the sleep the test timed.
    assert 1e3 * STALL_S <= longest_input_ms(b["path"]) <= stamped["ms"] + 5
    read = steptrace.load(b["path"]).to_dict()  # read back: the diagnosis it had live
    assert read["diagnosis"]["label"] == b["label"] and read["diagnosis"]["evidence"] == b["evidence"]
    assert read["steps"] + read["warmup_steps"] == len(b["indices"])
    # The forward capture (torch.profiler's) holds steps after it; the retroactive one came first.
    assert f["reason"] == b["reason"] and f["first_step"] > stall_at and f["tool"] == "torch.profiler"
    err = capfd.readouterr().err
    assert "── steptrace capture, retroactive (stall: " in err and f"(step {stall_at} tripped it)" in err
    assert err.index("capture, retroactive") < err.index("captured steps")


def test_capture_on_demand_writes_the_last_kept_steps_first(tmp_path):
    t = steptrace.Tracer(
        warmup_steps=0, print_at_exit="never", capture_dir=str(tmp_path / "caps"), capture_steps=2, capture_back=4
    )
    x = torch.zeros(16)
    for i in t.steps(range(20)):
        with t.phase("compute"):
            x.mul_(0.5).add_(1.0)
        if i == 10:
            assert t.capture()
    forward, back = captures_of(t, 1, 1)
    assert [(c["first_step"], c["last_step"]) for c in forward] == [(11, 12)]
    assert len(back) == 1 and back[0]["indices"] == [6, 7, 8, 9] and back[0]["tripped"] == 9, back
    assert back[0]["reason"] == "on demand: capture()"


def test_capture_back_0_keeps_nothing(tmp_path):
    t = steptrace.Tracer(
        warmup_steps=0, print_at_exit="never", capture_dir=str(tmp_path / "caps"), capture_steps=1, capture_back=0
    )
    for i in t.steps(range(8)):
        if i == 4:
            assert t.capture()
    forward, back = captures_of(t, 0, 1)
    assert len(forward) == 1 and back == []


def test_a_one_off_stall_on_one_rank_is_written_by_it_and_the_median_rank(tmp_path):
    """3 ranks (gloo), rank 1 stalls once, 400 ms in `input` at a known step: rank 1 writes its kept
    steps with the stalled one, the median rank the same step numbers, and rank 0 names both."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = str(HERE / "capture_job.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    stall_at = 600
    procs = [
        subprocess.Popen(
            [sys.executable, job, "1", "1500", str(tmp_path), str(stall_at)],
            cwd=tmp_path,
            env={
                **env,
                "OMP_NUM_THREADS": "1",
                "RANK": str(r),
                "WORLD_SIZE": "3",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    stall = json.loads((tmp_path / "stall-1.json").read_text())
    assert stall["step"] == stall_at
    back = {}
    for r in range(3):
        path = tmp_path / f"captures-{r}.json"
        assert path.exists(), outs[r][1][-3000:]
        back[r] = forward_and_back(json.loads(path.read_text()))[1]
    # On a loaded machine other ranks may be named too, in plans of their own: this one's is rank 1's.
    mine = [b for b in back[1] if "rank 1 is the straggler" in b["reason"]]
    assert len(mine) == 1, (back, outs[1][1][-3000:])
    slow = mine[0]
    assert slow["tripped"] == stall_at and stall_at in slow["indices"], slow
    assert 400 <= longest_input_ms(slow["path"]) <= stall["ms"] + 5
    plan = slow["reason"].split(";")[0]
    mids = [
        (r, b) for r in (0, 2) for b in back[r] if b["reason"].startswith(plan + ";") and "a median rank" in b["reason"]
    ]
    assert len(mids) == 1, (back, outs[0][1][-3000:], outs[2][1][-3000:])
    median, mid = mids[0]
    # The same step numbers, as many of them as the median rank kept (its own slowest): the stall's among them.
    assert stall_at in mid["indices"] and set(mid["indices"]) <= set(slow["indices"]), (mid, slow)
    # The median rank waited for rank 1 at the all-reduce: its stalled step is long in `wait`, not `input`.
    read = steptrace.load(mid["path"]).to_dict()
    assert read["phases"]["wait"]["max_ms"] >= 300, read["phases"]["wait"]
    said = [line for line in outs[0][1].splitlines() if "wrote its kept steps" in line]
    assert any("rank 1 (the straggler)" in line and str(stall_at) in line for line in said), outs[0][1][-3000:]
    assert any(f"rank {median} (the median rank)" in line for line in said), outs[0][1][-3000:]


def test_every_report_of_the_run_lists_its_captures(tmp_path):
    """The JSON written at exit, the exit table and the HTML report list each capture, torch.profiler's
    and the kept steps', with its steps, reason, reading and file."""
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import time, torch, steptrace\n"
        "t = steptrace.default_tracer()\n"
        f"t.configure(warmup_steps=0, capture_steps=2, capture_dir={str(tmp_path / 'caps')!r})\n"
        "for i in t.steps(range(20)):\n"
        "    if i == 8:\n"
        "        t.capture()\n"
        "    with t.phase('compute'):\n"
        "        time.sleep(0.002)\n"
        "time.sleep(0.3)  # the kept steps are written on the collector thread\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    env.update(
        STEPTRACE_JSON=str(tmp_path / "run.json"),
        STEPTRACE_HTML=str(tmp_path / "run.html"),
        STEPTRACE_PRINT_AT_EXIT="always",
    )
    done = subprocess.run(
        [sys.executable, str(prog)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    caps = json.loads((tmp_path / "run.json").read_text()).get("captures") or []
    forward, back = forward_and_back(caps)
    assert [c["tool"] for c in forward] == ["torch.profiler"] and (
        forward[0]["first_step"],
        forward[0]["last_step"],
    ) == (9, 10), caps
    assert len(back) == 1 and back[0]["indices"] == list(range(0, 8)), back
    table = done.stderr[done.stderr.index("── steptrace summary") :]
    assert "captures   kept steps 0-7 (8, step 7 tripped it) (on demand: capture()): " in table, table
    assert "           steps 9-10 (on demand: capture()): " in table, table
    assert forward[0]["path"] in table and back[0]["path"] in table, table
    page = (tmp_path / "run.html").read_text()
    assert "Captures on trouble" in page and forward[0]["path"] in page and back[0]["path"] in page


def test_a_captures_advice_is_the_live_tables_for_the_same_loader(tmp_path):
    """The capture is read back knowing what the trace cannot hold (this machine's cores, the
    DataLoader's settings): its fix is the one the run's own table names, not a generic one."""
    t = steptrace.Tracer(warmup_steps=0, print_at_exit="never", capture_dir=str(tmp_path / "caps"), capture_steps=3)

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 40

        def __getitem__(self, i):
            time.sleep(0.004)
            return torch.zeros(4)

    loader = torch.utils.data.DataLoader(Slow(), batch_size=2, num_workers=0)
    for i, _ in enumerate(t.steps(loader)):
        if i == 2:
            t.capture()
    forward, _ = captures_of(t, 0, 1)
    live = t.summary().to_dict()["diagnosis"]["advice"][0].split(" (up to")[0]
    assert forward and forward[0]["label"] == "INPUT-BOUND", forward
    assert forward[0]["advice"].split(" (up to")[0] == live, (forward[0]["advice"], live)
    assert "not above the machine's core count" not in forward[0]["advice"]
