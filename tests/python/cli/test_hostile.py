"""Hostile files, links and listeners, tried as an attacker and a careless user would: outputs
never follow a link or replace a file another user planted, never overwrite their own input;
what a file claims (its world, its size once inflated, its series) cannot size what steptrace
allocates; pipes are read as they come; names that are not UTF-8 are read and shown escaped;
gzip problems are named; a file's rank errors name the file; a listener cannot stop the window
thread, fork it into a spinning child, or keep its tracer alive. Each case gets exit status 2
and one line naming the input, never a traceback, or the behaviour the README lists."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import steptrace

from conftest import cli

NOBODY = 65534


def trace_of(steps: int = 3, **extra) -> dict:
    """A host-only torch.profiler trace: `steps` ProfilerSteps of 1 ms, each with an op."""
    events = []
    for i in range(steps):
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": i * 1000,
                "dur": 900,
            }
        )
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i * 1000 + 100, "dur": 500}
        )
    return {"schemaVersion": 1, **extra, "traceEvents": events}


def write_trace(path, steps: int = 3, **extra):
    path.write_text(json.dumps(trace_of(steps, **extra)))
    return path


def one_line_error(proc: subprocess.CompletedProcess, *said: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for words in said:
        assert words in err, err
    return err


def write_summary(tracer, path, phase: str = "decode"):
    """Three steps of `tracer`, each with `phase`, saved to `path`."""
    for _ in range(3):
        with tracer.step():
            with tracer.phase(phase):
                pass
    tracer.summary().to_json(path)
    return path


@pytest.fixture
def summary_file(tmp_path, tracer):
    return write_summary(tracer, tmp_path / "run.json")


# --- 1. writes never follow a link or replace a file another user may have planted ---------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a link to another user needs root")


@needs_root
def test_an_output_never_follows_a_link_another_user_planted(tmp_path, summary_file, run_python):
    shared, home = tmp_path / "shared", tmp_path / "home"
    shared.mkdir()
    home.mkdir()
    os.chmod(shared, 0o1777)
    secret = home / "secret"
    secret.write_text("secret\n")
    os.chmod(secret, 0o600)
    for name in ("run.trace.json", "run.json", "live.jsonl", "report.html"):
        os.symlink(secret, shared / name)
        os.lchown(shared / name, NOBODY, NOBODY)
    one_line_error(
        cli("trace", summary_file, "-o", shared / "run.trace.json"),
        f"cannot write {shared / 'run.trace.json'}: a symbolic link owned by another user (uid 65534)",
    )
    proc = run_python(
        """
        import time, steptrace
        end = time.time() + 1.5
        while time.time() < end:
            with steptrace.step():
                time.sleep(0.01)
        """,
        env={
            "STEPTRACE_JSON": str(shared / "run.json"),
            "STEPTRACE_HTML": str(shared / "report.html"),
            "STEPTRACE_JSONL": str(shared / "live.jsonl"),
            "STEPTRACE_LIVE": "1",
        },
    )
    refusals = [line for line in proc.stderr.splitlines() if "a symbolic link owned by another user" in line]
    assert len(refusals) == 3, proc.stderr  # the JSON, the page, the live windows: each said once
    assert secret.read_text() == "secret\n" and (secret.stat().st_mode & 0o777) == 0o600
    assert all(os.path.islink(shared / n) for n in ("run.json", "report.html", "live.jsonl"))
    assert not [n for n in os.listdir(shared) if n.startswith(".steptrace-")]


def test_a_replaced_file_keeps_its_mode_and_ones_own_link_is_followed(tmp_path, summary_file):
    out = tmp_path / "private.trace.json"
    out.write_text("old")
    os.chmod(out, 0o600)
    os.symlink(out, tmp_path / "latest.json")
    assert cli("trace", summary_file, "-o", tmp_path / "latest.json").returncode == 0
    assert out.read_text().startswith("{") and (out.stat().st_mode & 0o777) == 0o600
    assert os.path.islink(tmp_path / "latest.json")


# --- 2 and 14. an output never over its input; a job's default output beside its folder ----------


def test_an_output_over_its_own_input_is_refused(tmp_path, summary_file):
    before = summary_file.read_bytes()
    for command in ("report", "trace"):
        one_line_error(cli(command, summary_file, "-o", summary_file), "is the file being read", "name another -o")
    os.symlink(summary_file, tmp_path / "alias.json")
    one_line_error(cli("report", summary_file, "-o", tmp_path / "alias.json"), "is the file being read")
    assert summary_file.read_bytes() == before
    runs = tmp_path / "runs"
    runs.mkdir()
    write_trace(runs / "rank0.json", distributedInfo={"rank": 0, "world_size": 2})
    write_trace(runs / "rank1.json", distributedInfo={"rank": 1, "world_size": 2})
    one_line_error(cli("trace", runs, "-o", runs / "rank1.json"), "is a rank file being read", "rank1.json")
    # a glob that names no file, or a folder of no rank files, is named as the reader names it
    one_line_error(cli("report", tmp_path / "nothing*.json"), "nothing*.json: no file matches")
    (tmp_path / "empty").mkdir()
    one_line_error(cli("trace", tmp_path / "empty", "-o", summary_file), "holds no .json or .json.gz files")


def test_a_jobs_default_output_goes_beside_its_folder_never_into_it(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for rank in range(2):
        write_trace(runs / f"r{rank}.pt.trace.json", distributedInfo={"rank": rank, "world_size": 2})
    files = sorted(str(p) for p in runs.iterdir())
    assert cli("trace", *files).returncode == 0  # as the shell expands runs/*.json
    assert cli("trace", str(runs / "*.pt.trace.json")).returncode == 0  # a quoted glob
    assert sorted(os.listdir(runs)) == ["r0.pt.trace.json", "r1.pt.trace.json"]
    assert (tmp_path / "runs.trace.json").is_file()
    assert cli("show", runs).returncode == 0
    single = write_trace(tmp_path / "one.pt.trace.json")
    assert cli("trace", single).returncode == 0 and (tmp_path / "one.trace.json").is_file()


def test_errors_about_one_file_of_a_job_name_the_file(tmp_path, summary_file):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_trace(runs / "r0.json")
    os.symlink(runs / "r0.json", tmp_path / "alias.json")
    one_line_error(
        cli("show", runs / "r0.json", tmp_path / "alias.json"), "r0.json and", "alias.json are the same file"
    )
    forged = json.loads(summary_file.read_text())
    forged["rank"] = {"rank": 1, "world_size": 2, "local_rank": None, "host": "h", "started_at": ""}
    for p in forged["phases"].values():
        p["share"] = 0.01
    (runs / "r1.json").write_text(json.dumps(forged))
    one_line_error(cli("show", runs), "r1.json: ", "shares sum to")


# --- 3. a file's world is bounded ---------------------------------------------------------------


def test_a_claimed_world_is_bounded_and_missing_ranks_counted(tmp_path):
    huge = write_trace(tmp_path / "huge.json", distributedInfo={"rank": 0, "world_size": 30_000_000})
    one_line_error(
        cli("show", huge),
        "huge.json: its distributedInfo claims rank 0 of 30000000",
        "more ranks than steptrace reads (1048576 at most)",
    )
    job = tmp_path / "job"
    job.mkdir()
    write_trace(job / "r0.json", distributedInfo={"rank": 0, "world_size": 1 << 20})
    write_trace(job / "r1.json", distributedInfo={"rank": 1, "world_size": 1 << 20})
    proc = cli("show", job)
    assert proc.returncode == 0, proc.stderr
    missing = [line for line in proc.stdout.splitlines() if "missing:" in line]
    assert len(missing) == 1 and "(1048574 in all)" in missing[0] and len(missing[0]) < 400
    d = steptrace.load(job).to_dict()["ranks"]
    assert d["missing_count"] == (1 << 20) - 2 and len(d["missing"]) == 1000


# --- 5. pipes are read as they come --------------------------------------------------------------


def test_standard_input_is_read_as_it_comes_with_nothing_copied_aside(tmp_path, summary_file):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    trace = json.dumps(trace_of(4)).encode()
    for data in (trace, gzip.compress(trace), summary_file.read_bytes()):
        proc = subprocess.run(
            [sys.executable, "-m", "steptrace", "show", "-"], input=data, capture_output=True, env=env, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
    assert os.listdir(scratch) == []
    # a SIGTERM while reading a pipe that never ends leaves nothing behind either
    reader = subprocess.Popen(
        [sys.executable, "-m", "steptrace", "show", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    reader.stdin.write(trace[: len(trace) // 2])
    reader.stdin.flush()
    time.sleep(1.0)
    reader.send_signal(signal.SIGTERM)
    reader.communicate(timeout=60)
    assert os.listdir(scratch) == []


# --- 7. names that are not UTF-8 -----------------------------------------------------------------


def test_names_that_are_not_utf8_are_read_written_and_shown_escaped(tmp_path):
    folder = os.fsencode(tmp_path)
    name = os.path.join(folder, b"r\xe9sum\xe9.json")
    with open(name, "w") as f:
        json.dump(trace_of(3), f)
    shown_name = os.fsdecode(name)
    proc = cli("show", shown_name)
    assert proc.returncode == 0, proc.stderr
    out = os.fsdecode(os.path.join(folder, b"\xff.trace.json"))
    proc = cli("trace", shown_name, "-o", out)
    assert proc.returncode == 0 and "\\xff.trace.json" in proc.stdout, (proc.stdout, proc.stderr)
    assert os.path.isfile(os.fsencode(out))
    os.remove(os.fsencode(out))
    job = os.path.join(folder, b"job\xe9")
    os.mkdir(job)
    os.rename(name, os.path.join(job, b"r\xe90.json"))
    assert cli("show", os.fsdecode(job)).returncode == 0
    with open(os.path.join(job, b"r\xe91.json"), "w") as f:
        f.write("{not json")
    one_line_error(cli("show", os.fsdecode(job)), "r\\xe91.json")
    assert steptrace.load(os.fsdecode(job) + "/r\udce90.json").steps == 3


# --- 8 and 9. decided by the top-level keys; gzip problems named --------------------------------


def test_content_is_decided_by_the_top_level_keys_however_far(tmp_path, tracer):
    named = write_summary(tracer, tmp_path / "named.json", phase="traceEvents")
    assert steptrace.load(named).steps == 3
    far = trace_of(4)
    far = {"otherData": {"notes": "n" * 100_000}, **far}
    (tmp_path / "far.json").write_text(json.dumps(far))
    assert steptrace.load(tmp_path / "far.json").steps == 4


def test_gzip_problems_are_named_and_a_gzipped_summary_is_read(tmp_path, summary_file):
    z = gzip.compress(summary_file.read_bytes())
    (tmp_path / "run.json.gz").write_bytes(z)
    assert cli("show", tmp_path / "run.json.gz").returncode == 0
    cases = {
        "cut.json.gz": (z[: len(z) // 2], "the gzip stream ends early"),
        "crc.json.gz": (z[:-8] + bytes([z[-8] ^ 0x55]) + z[-7:], "checksum (CRC) does not match"),
        "length.json.gz": (z[:-4] + bytes([z[-4] ^ 1]) + z[-3:], "its length does not match"),
        "trailing.json.gz": (z + b"garbage", "bytes after the end of its gzip data"),
    }
    for name, (data, said) in cases.items():
        (tmp_path / name).write_bytes(data)
        one_line_error(cli("show", tmp_path / name), f"{name}: ", said)


# --- 6. a report draws what it shows --------------------------------------------------------------


def test_a_report_is_bounded_by_what_it_draws(tmp_path, summary_file):
    d = json.loads(summary_file.read_text())
    step = d["timeline"]["steps"][-1]
    step["phases"] = step["phases"] * 200
    steps = []
    for i in range(400):
        s = dict(step, index=i, slowest=True, step_ms=1 + i / 1000)
        steps.append(s)
    d["timeline"]["steps"] = steps
    big = tmp_path / "big.json"
    big.write_text(json.dumps(d))
    assert big.stat().st_size > 5_000_000
    proc = cli("report", big, "-o", tmp_path / "big.html")
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "big.html").read_text()
    assert len(page) < 400_000, len(page)
    assert page.count("thread 0, step ") == 8


# --- 15, 16, 17. listeners ------------------------------------------------------------------------


def test_system_exit_or_ctrl_c_in_a_listener_is_counted_and_windows_go_on(run_python):
    proc = run_python(
        """
        import signal, time, steptrace
        # Ctrl-C reaches this program as it reaches one started from a terminal: a background
        # launcher (`cmd &`, nohup) starts it with SIGINT ignored, and then Python has no handler
        # for interrupt_main to call, by design
        signal.signal(signal.SIGINT, signal.default_int_handler)
        t = steptrace.Tracer(print_at_exit="never", live=1)
        got = []
        def bad(w):
            got.append(w["step"])
            if len(got) == 1: raise SystemExit(3)
            if len(got) == 2: raise KeyboardInterrupt
        t.on_window(bad)
        interrupted = False
        end = time.time() + 4.5
        while time.time() < end and len(got) < 4:
            try:
                with t.step():
                    time.sleep(0.01)
            except KeyboardInterrupt:
                interrupted = True
        print("windows", len(got), "interrupted", interrupted, "failed",
              t.summary().to_dict()["errors"]["window_calls_failed"])
        """
    )
    words = proc.stdout.split()
    assert int(words[1]) >= 3 and words[3] == "True" and words[5] == "2", proc.stdout + proc.stderr


def test_a_listener_that_forks_leaves_a_child_that_ends_as_it_says(run_python):
    proc = run_python(
        """
        import os, sys, time, steptrace
        t = steptrace.Tracer(print_at_exit="never", live=1)
        children = []
        def forking(w):
            if children: return
            pid = os.fork()
            if pid == 0:
                t.on_window(lambda w: None)  # a child's own listener: no window loop there
                sys.exit(3)
            children.append(pid)
        t.on_window(forking)
        end = time.time() + 10
        while time.time() < end and not children:
            with t.step():
                time.sleep(0.01)
        _, status = os.waitpid(children[0], 0)
        print("child", os.waitstatus_to_exitcode(status))
        """
    )
    assert "child 3" in proc.stdout, proc.stdout + proc.stderr


def test_a_dropped_tracer_with_a_listener_is_freed_with_its_threads(run_python):
    proc = run_python(
        """
        import gc, os, threading, time, weakref, steptrace
        def tasks(): return len(os.listdir("/proc/self/task"))
        base = tasks()
        refs = []
        for i in range(5):
            t = steptrace.Tracer(print_at_exit="never")
            t.on_window(lambda w: None)
            with t.step():
                pass
            refs.append(weakref.ref(t._core))
            del t
        gc.collect()
        time.sleep(1.5)
        print("alive", sum(r() is not None for r in refs), "threads", tasks() - base,
              sum(th.name == "steptrace-windows" for th in threading.enumerate()))
        """
    )
    assert proc.stdout.split() == ["alive", "0", "threads", "0", "0"], proc.stdout + proc.stderr


def test_seeded_random_byte_names_and_links_are_read_and_written(tmp_path):
    """Names of any bytes but '/' and NUL, as inputs, outputs and links to outputs: each read and
    written, never a crash; an output through one's own link lands on its target."""
    import random

    rng = random.Random(38)
    folder = os.fsencode(tmp_path)
    trace = json.dumps(trace_of(3))
    for i in range(40):

        def name() -> bytes:
            return bytes(rng.choice([b for b in range(1, 256) if b != ord("/")]) for _ in range(rng.randint(1, 24)))

        src = os.path.join(folder, b"in%d-" % i + name() + b".json")
        with open(src, "w") as f:
            f.write(trace)
        s = steptrace.load(os.fsdecode(src))
        assert s.steps == 3
        target = os.path.join(folder, b"out%d-" % i + name())
        link = os.path.join(folder, b"link%d-" % i + name())
        os.symlink(target, link)
        s.to_trace(os.fsdecode(link))
        with open(target) as written:
            assert os.path.islink(link) and json.load(written)["traceEvents"]
    assert not [n for n in os.listdir(folder) if n.startswith(b".steptrace-")]
