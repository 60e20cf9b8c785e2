"""Capture on trouble, tried as an attacker and a careless user would: it writes only into a
folder of the user's own, through a private folder torch's own temporary files cannot leave;
signals that storm in are coalesced, and a `signal` trigger set where Python cannot install it
says so; a capture's steps and count keep their bounds; two runs sharing a folder keep both
captures, and one that cannot be written names its path and why and leaves nothing; a plan in the
store that is not one, or whose step never comes, blocks nothing."""

import json
import os
import signal
import sys

import pytest

import steptrace

from fake_store import Store

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")

# A loop of steps with torch imported (so a capture runs torch.profiler), or blocked (the core's own).
TORCH_LOOP = """
import os, sys, time
{block}
import steptrace
t = steptrace.Tracer(warmup_steps=0, print_at_exit="never", capture_dir={folder!r}, capture_steps=2{options})
{before}
for i in t.steps(range({steps})):
    {each}
    time.sleep(0.001)
{after}
"""


def program(folder, steps=20, torch=True, options="", before="", each="pass", after=""):
    block = "import torch" if torch else "sys.modules['torch'] = None  # no torch: the core's own capture"
    return TORCH_LOOP.format(
        block=block, folder=str(folder), steps=steps, options=options, before=before, each=each, after=after
    )


def files_in(folder):
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


# --- 1. a capture writes only where it should ---------------------------------------------------


@needs_root
def test_a_torch_capture_refuses_a_folder_another_user_made_and_follows_no_link_there(tmp_path, run_python):
    pytest.importorskip("torch")
    shared, home = tmp_path / "shared", tmp_path / "home"
    shared.mkdir()
    home.mkdir()
    os.chmod(shared, 0o1777)
    os.chown(shared, NOBODY, NOBODY)  # another user made the shared folder first
    secret = home / "secret"
    secret.write_text("secret\n")
    os.chmod(secret, 0o600)
    for name in ("snippet-rank0-step0.pt.trace.json.gz", "trace.json", "trace.json.gz"):
        os.symlink(secret, shared / name)
        os.lchown(shared / name, NOBODY, NOBODY)
    proc = run_python(program(shared, before="t.capture(steps=2)"))
    assert f"capture_dir {shared}: belongs to another user (uid 65534)" in proc.stderr, proc.stderr
    assert "captured steps" not in proc.stderr
    assert secret.read_text() == "secret\n" and (secret.stat().st_mode & 0o777) == 0o600
    assert files_in(shared) == sorted(["snippet-rank0-step0.pt.trace.json.gz", "trace.json", "trace.json.gz"])


@needs_root
def test_a_capture_dir_that_is_another_users_link_is_not_followed(tmp_path, run_python):
    pytest.importorskip("torch")
    mine = tmp_path / "mine"
    mine.mkdir()
    link = tmp_path / "caps"
    os.symlink(mine, link)
    os.lchown(link, NOBODY, NOBODY)
    proc = run_python(program(link, before="t.capture(steps=2)"))
    assert (
        f"capture_dir {link}: a symbolic link owned by another user (uid 65534): not written through" in proc.stderr
    ), proc.stderr
    assert files_in(mine) == []


def test_a_torch_capture_in_its_own_folder_leaves_the_trace_and_nothing_else(tmp_path, run_python):
    pytest.importorskip("torch")
    caps = tmp_path / "caps"
    proc = run_python(program(caps, before="t.capture(steps=2)"))
    assert "captured steps 0-1" in proc.stderr, proc.stderr
    names = files_in(caps)
    assert len(names) == 1 and names[0].startswith("snippet-rank0-step0-pid"), names  # no temporary left


# --- 2. SIGUSR2 storms and where the handler can be installed ----------------------------------


def test_a_storm_of_sigusr2_is_coalesced_and_the_run_lives(tmp_path, run_python):
    code = program(
        tmp_path / "caps",
        steps=300,
        torch=False,
        options=', capture="signal", capture_max=2',
        before=(
            "import signal, threading\n"
            "def storm():\n"
            "    for _ in range(5000):\n"
            "        os.kill(os.getpid(), signal.SIGUSR2)\n"
            "th = threading.Thread(target=storm)\nth.start()"
        ),
        after=(
            "th.join()\n"  # a capture armed late in the storm: its steps, then time to write it
            "for i in t.steps(range(10)): time.sleep(0.001)\n"
            "time.sleep(0.5)\n"
            "print('captures', len([c for c in t.summary().to_dict().get('captures') or [] "
            "if not c.get('retroactive')]))"
        ),
    )
    proc = run_python(code, check=False)
    assert proc.returncode == 0 and "RecursionError" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] in ("1", "2"), proc.stdout  # coalesced: never more than capture_max


def test_a_signal_trigger_set_off_the_main_thread_says_it_is_not_installed(capfd):
    import threading

    before = signal.getsignal(signal.SIGUSR2)
    t = steptrace.Tracer(warmup_steps=0, print_at_exit="never")
    th = threading.Thread(target=lambda: t.configure(capture="signal"))
    th.start()
    th.join()
    err = capfd.readouterr().err
    assert "the `signal` trigger is not installed" in err and "main thread" in err, err
    assert signal.getsignal(signal.SIGUSR2) is before  # nothing half-installed


# --- 3. bounds --------------------------------------------------------------------------------


def test_captures_without_torch_never_pass_capture_max(tmp_path, run_python):
    """Asked at every step, with capture_max=2: a capture being written counts (the next one armed
    meanwhile made a third)."""
    caps = tmp_path / "caps"
    proc = run_python(
        program(
            caps,
            steps=400,
            torch=False,
            options=", capture_max=2",
            each="t.capture(steps=1)",
            after="time.sleep(0.5)\nc = t.summary().to_dict()['captures']\n"
            "print(len([x for x in c if x.get('retroactive')]), len(c))",
        )
    )
    back, everything = map(int, proc.stdout.split()[-2:])
    forward = [f for f in files_in(caps) if "-back-" not in f]
    assert 1 <= everything - back <= 2 and 1 <= len(forward) <= 2, (proc.stdout, files_in(caps))
    assert back <= 2 and len(files_in(caps)) - len(forward) == back, (proc.stdout, files_in(caps))  # the same bound


def test_capture_steps_keep_the_options_bound(tracer):
    for bad in (0, 1001, 10**9, -3):
        with pytest.raises(ValueError, match="takes 1 to 1000 steps"):
            tracer.capture(steps=bad)


# --- 4. fork ------------------------------------------------------------------------------------


def test_a_child_forked_during_a_torch_capture_inherits_no_capture(tmp_path, run_python):
    """The child runs steps of its own and leaves with exit(): it neither finishes the parent's
    capture (no block, no file of its own) nor hangs; the parent's capture is written once."""
    pytest.importorskip("torch")
    caps = tmp_path / "caps"
    code = program(
        caps,
        steps=8,
        before="t.capture(steps=4)",
        each=(
            "if i == 1:\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            for j in t.steps(range(6)): time.sleep(0.001)\n"
            "            sys.stderr.write('child done\\n'); sys.stderr.flush()\n"
            "            sys.exit(0)\n"
            "        _, status = os.waitpid(pid, 0)\n"
            "        print('child status', status)"
        ),
    )
    proc = run_python(code)
    assert "child status 0" in proc.stdout and "child done" in proc.stderr, (proc.stdout, proc.stderr)
    assert proc.stderr.count("captured steps") == 1, proc.stderr  # the parent's block alone
    names = files_in(caps)
    assert len(names) == 1 and "-pid" in names[0], names


# --- 5. names and failures ----------------------------------------------------------------------


def test_two_runs_sharing_a_folder_keep_both_captures(tmp_path, run_python):
    caps = tmp_path / "caps"
    code = program(caps, torch=False, before="t.capture(steps=2)")
    run_python(code)
    run_python(code)
    names = files_in(caps)
    assert len(names) == 2 and all("-rank0-step0-pid" in n for n in names), names


@pytest.mark.parametrize("torch", [False, True])
def test_a_capture_that_cannot_be_written_names_its_path_and_why_and_leaves_nothing(tmp_path, run_python, torch):
    if torch:
        pytest.importorskip("torch")
    caps = tmp_path / "caps"
    caps.mkdir()
    # A file-size limit (root ignores a read-only folder): every write past 200 bytes fails.
    limit = (
        "import resource, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))\nt.capture(steps=2)"
    )
    proc = run_python(program(caps, torch=torch, before=limit), check=False)
    failed = [line for line in proc.stderr.splitlines() if "capture of steps 0-1" in line and "failed" in line]
    assert len(failed) == 1, proc.stderr
    assert f"could not write {caps}/" in failed[0] and "-rank0-step0-pid" in failed[0], failed[0]
    # the reason: the system's words where a write failed; torch's own writer says none, so its
    # trace is found cut short
    assert "File too large" in failed[0] or "cut short" in failed[0], failed[0]
    assert files_in(caps) == []  # nothing partial, nothing temporary


def test_a_dropped_tracer_with_capture_set_is_freed(run_python):
    proc = run_python("""
        import gc, time, weakref, steptrace
        t = steptrace.Tracer(warmup_steps=0, print_at_exit="never", capture="slow,signal", live=1)
        for i in t.steps(range(20)):
            time.sleep(0.001)
        gone = weakref.ref(t)
        del t
        gc.collect()
        print("freed" if gone() is None else "alive")
        """)
    assert proc.stdout.split()[-1] == "freed", proc.stdout + proc.stderr


# --- 6. the store's plan -----------------------------------------------------------------------


def _rank1_capturer(monkeypatch, store, folder="."):
    from steptrace._capture import capturer as _capture
    from steptrace._ranks import gather as _ranks

    class FakeCore:  # the retroactive capture's calls: nothing kept
        def set_fact(self, key, value):
            pass

        def capture_kept(self, reason, which, indices=()):
            return []

    class FakeTracer:
        _core = FakeCore()

        def options(self):
            return {"capture_max": 10, "capture_steps": 5, "capture_dir": str(folder)}

    job = type("Job", (), {"rank": 1, "world_size": 3, "store": store})()
    monkeypatch.setattr(_ranks, "notice", lambda core: job)
    fake = FakeTracer()
    c = _capture.Capturer(fake)
    c.fake = fake  # the test's own hold on it: a capturer holds its tracer weakly
    return _capture, c


def test_a_plan_that_is_not_one_is_ignored_by_name_and_the_next_one_is_taken(monkeypatch, capfd):
    store = Store()
    _capture, c = _rank1_capturer(monkeypatch, store)
    asked = []
    c.request = lambda reason, steps=None, at=None, back="recent": asked.append((reason, at)) or True
    for bad in ("not json {", json.dumps({"id": 1}), json.dumps([1, 2])):
        store.set(_capture.PLAN_KEY, bad)
        c._job_window({"step": 100, "steps": 10})
    err = capfd.readouterr().err
    assert err.count("is not one steptrace wrote") == 1 and "cannot be reached" not in err, err
    store.set(_capture.PLAN_KEY, json.dumps({"id": 2, "step": 120, "ranks": [1, 0], "reason": "straggler: rank 1"}))
    c._job_window({"step": 100, "steps": 10})
    assert asked == [("straggler: rank 1; rank 1 is the straggler", 120)]


def test_a_plan_for_a_step_never_reached_is_let_go_and_blocks_no_later_capture(monkeypatch, capfd, tmp_path):
    from steptrace._capture.plans import PLAN_WAIT
    from steptrace._profiler import annotate

    store = Store()
    _capture, c = _rank1_capturer(monkeypatch, store, tmp_path / "caps")
    monkeypatch.setattr(_capture, "_torch_absent", lambda: False)
    store.set(_capture.PLAN_KEY, json.dumps({"id": 1, "step": 10**12, "ranks": [1, 0], "reason": "straggler: rank 1"}))
    try:
        for _ in range(PLAN_WAIT + 2):
            c._job_window({"step": 100, "steps": 10})
        assert c._pending is None
        assert f"did not reach step {10**12} within {PLAN_WAIT} windows: let go" in capfd.readouterr().err
        assert c.request("on demand: capture()", steps=2)  # the next capture arms
    finally:
        c._pending = None
        annotate.disarm()


# --- 11. an option's bad value is cut when echoed --------------------------------------------------


def test_a_huge_bad_capture_value_is_cut_in_its_message(run_python):
    proc = run_python("import steptrace\n", env={"STEPTRACE_CAPTURE": "slow=" + "9" * 100_000})
    lines = [line for line in proc.stderr.splitlines() if "STEPTRACE_CAPTURE" in line]
    assert lines and max(len(line) for line in lines) < 1000, [len(line) for line in lines]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def test_a_second_capture_of_the_same_step_keeps_the_first_and_follows_no_link(tmp_path):
    from steptrace._capture import files

    folder, private = tmp_path / "caps", tmp_path / "caps" / ".private"
    private.mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere", folder / "run-rank0-step5-pid1-3.pt.trace.json.gz")  # planted at a later name
    made = []
    for text in (b"first", b"second", b"third"):
        (private / "trace.json.gz").write_bytes(text)
        inside, at = os.open(private, os.O_RDONLY), os.open(folder, os.O_RDONLY)
        try:
            made.append(files._link_new(inside, "run-rank0-step5-pid1.pt.trace.json.gz", at))
        finally:
            os.unlink(private / "trace.json.gz")
            os.close(inside)
            os.close(at)
    assert made == [
        "run-rank0-step5-pid1.pt.trace.json.gz",
        "run-rank0-step5-pid1-2.pt.trace.json.gz",
        "run-rank0-step5-pid1-4.pt.trace.json.gz",
    ]
    assert [(folder / m).read_bytes() for m in made] == [b"first", b"second", b"third"]
    assert not (tmp_path / "elsewhere").exists()
