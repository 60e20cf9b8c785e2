"""Untrusted files and the files steptrace writes: every reader bounded and total (exit status 2
naming the file, never a traceback, never 1, which means "regression"), names from files made
printable, every written file whole or absent, bad option values shown printable and short."""

import errno
import gzip
import json
import os
import subprocess
import sys

import pytest

import steptrace

STEPTRACE = [sys.executable, "-m", "steptrace"]


def cli(*args):
    return subprocess.run(STEPTRACE + [str(a) for a in args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def summary_text(tracer):
    for _ in range(3):
        with tracer.step():
            with tracer.phase("decode"):
                pass
    return tracer.summary().to_json()


def _unreadable_cases(tmp_path, summary_text):
    cases = {
        "huge number under a known key": summary_text.replace('"steps": 3', '"steps": 1e400', 1),
        "huge number under an unknown key": summary_text.replace('"schema"', '"x": 1e400, "schema"', 1),
        "100,000-deep nesting": "[" * 100_000 + "]" * 100_000,
        "10,000-deep nesting": '{"a":' * 10_000 + "1" + "}" * 10_000,
    }
    paths = {}
    for name, text in cases.items():
        paths[name] = tmp_path / (name.replace(" ", "_").replace(",", "") + ".json")
        paths[name].write_text(text)
    paths["not UTF-8"] = tmp_path / "latin1.json"
    paths["not UTF-8"].write_bytes(summary_text.replace("decode", "d\xe9code").encode("latin-1"))
    paths["gzip-compressed summary"] = tmp_path / "run.json.gz"
    paths["gzip-compressed summary"].write_bytes(gzip.compress(b"\xff\xfe" + summary_text.encode()))
    paths["a symlink to /dev/zero"] = tmp_path / "zero.json"
    os.symlink("/dev/zero", paths["a symlink to /dev/zero"])
    paths["a directory"] = tmp_path
    return paths


def test_every_unreadable_file_exits_2_with_one_line_naming_it(tmp_path, summary_text):
    good = tmp_path / "good.json"
    good.write_text(summary_text)
    for case, path in _unreadable_cases(tmp_path, summary_text).items():
        for args in (
            ("show", path),
            ("compare", good, path),
            ("compare", path, good, "--max-regression", 5),
            ("trace", path, "-o", tmp_path / "t.json"),
            ("report", path, "-o", tmp_path / "r.html"),
        ):
            out = cli(*args)
            assert out.returncode == 2, (case, args, out.stderr)
            lines = out.stderr.strip().splitlines()
            assert len(lines) == 1 and len(lines[0]) < 300, (case, out.stderr[:500])
            assert "Traceback" not in out.stderr and str(path) in lines[0], (case, lines)


def test_load_raises_value_error_naming_the_file(tmp_path, summary_text):
    for case, path in _unreadable_cases(tmp_path, summary_text).items():
        with pytest.raises(ValueError, match=str(path).replace("(", r"\(").replace(")", r"\)")):
            steptrace.load(path)


def test_names_from_a_file_reach_the_terminal_printable(tmp_path, summary_text):
    crafted = summary_text.replace('"decode"', '"x\\u001b]0;owned\\u0007\\u001b[2J\\u001b]52;c;aGk=\\u0007"')
    path = tmp_path / "crafted.json"
    path.write_text(crafted)
    for args in (("show", path), ("show", path, "--json"), ("compare", path, path)):
        out = cli(*args)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout, args
        assert "x\\x1B]0;owned\\x07" in out.stdout.replace("\\\\", "\\"), args


def test_a_nan_gate_is_refused(tmp_path, summary_text):
    path = tmp_path / "run.json"
    path.write_text(summary_text)
    for value in ("nan", "inf", "-1"):
        out = cli("compare", path, path, "--max-regression", value)
        assert out.returncode == 2 and "--max-regression" in out.stderr, value


def test_a_full_device_is_named(tmp_path, summary_text):
    path = tmp_path / "run.json"
    path.write_text(summary_text)
    out = cli("report", path, "-o", "/dev/full")
    assert out.returncode == 2
    assert "/dev/full: No space left on device" in out.stderr and "None" not in out.stderr


def test_written_files_are_whole_with_short_temporaries(tracer, tmp_path):
    with tracer.step():
        pass
    s = tracer.summary()
    name = tmp_path / ("r" * 250 + ".json")  # 255 bytes: a temporary named after it would not fit
    s.to_json(name)
    s.to_trace(tmp_path / ("t" * 249 + ".trace"))
    s.to_html(tmp_path / ("h" * 250 + ".html"))
    assert json.loads(name.read_text())["steps"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".steptrace-")]
    with pytest.raises(FileNotFoundError):
        s.to_json(tmp_path / "missing" / "run.json")
    with pytest.raises(OSError) as refused:
        s.to_json(str(tmp_path / "run.json") + "\0.txt")  # never cut short at the NUL: another file
    assert refused.value.errno == errno.EINVAL


def test_a_nul_byte_in_a_path_option_is_refused(tracer):
    for option in ("json_path", "trace_path", "html_path", "jsonl_path"):
        with pytest.raises(ValueError, match="NUL byte"):
            tracer.configure(**{option: "run.json\0.evil"})


def test_a_killed_writer_leaves_a_temporary_that_the_next_run_removes(run_python, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".steptrace-{dead.stdout.strip()}-0.tmp"  # as a SIGKILL mid-write leaves it
    stale.write_text("{half")
    run_python(
        """
        import steptrace
        for _ in steptrace.steps(range(8)):
            pass
        """,
        env={"STEPTRACE_JSON": str(tmp_path / "run.json"), "STEPTRACE_PRINT_AT_EXIT": "never"},
    )
    assert json.loads((tmp_path / "run.json").read_text())["steps"] == 3
    assert not stale.exists()


def test_bad_environment_values_are_shown_printable_and_short(run_python):
    proc = run_python(
        """
        import steptrace
        for _ in steptrace.steps(range(8)):
            pass
        """,
        env={"STEPTRACE_WARMUP_STEPS": "\x1b]0;owned\x07" + "9" * 100_000, "STEPTRACE_PRINT_AT_EXIT": "never"},
    )
    lines = [line for line in proc.stderr.splitlines() if "STEPTRACE_WARMUP_STEPS" in line]
    assert len(lines) == 1 and len(lines[0]) < 300, proc.stderr[:400]
    assert "\x1b" not in proc.stderr and "\\x1B]0;owned\\x07" in lines[0]


def test_every_path_value_is_echoed_printable(run_python, tmp_path):
    """A bad STEPTRACE_JSON / _HTML / _TRACE (a path holding ESC) is escaped like every other
    value steptrace echoes; so is a bad path given to the command."""
    proc = run_python(
        """
        import steptrace
        for _ in steptrace.steps(range(8)):
            pass
        """,
        env={
            "STEPTRACE_JSON": "/nonexistent/\x1b[31mred.json",
            "STEPTRACE_HTML": "/nonexistent/\x1b]0;x\x07.html",
            "STEPTRACE_TRACE": "/nonexistent/\x1bt.json",
        },
    )
    for words in (
        "summary JSON: /nonexistent/\\x1B[31mred.json",
        "HTML report: /nonexistent/\\x1B]0;x\\x07.html",
        "trace: /nonexistent/\\x1Bt.json",
    ):
        assert words in proc.stderr, proc.stderr[:600]
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    out = cli("show", tmp_path / "no\x1b[2Jsuch.json")
    assert out.returncode == 2 and "\x1b" not in out.stderr and "\\x1B[2J" in out.stderr


def test_jsonl_lines_stay_whole_when_the_disk_fills(run_python, tmp_path):
    path = tmp_path / "live.jsonl"
    proc = run_python(
        f"""
        import resource, signal, time, steptrace
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        steptrace.configure(live=1, jsonl_path={str(path)!r}, print_at_exit=False)
        end = time.time() + 2.5
        while time.time() < end:
            with steptrace.step():
                time.sleep(0.001)
        size = {str(path)!r}
        import os
        first = os.path.getsize(size) if os.path.exists(size) else 0
        resource.setrlimit(resource.RLIMIT_FSIZE, (first + 200, resource.RLIM_INFINITY))  # "disk full"
        end = time.time() + 3.5
        while time.time() < end:
            with steptrace.step():
                time.sleep(0.001)
        """
    )
    lines = path.read_text().splitlines()
    assert lines, proc.stderr
    for line in lines:
        json.loads(line)  # every line whole
    said = [line for line in proc.stderr.splitlines() if "could not append a live window" in line]
    assert len(said) == 1, proc.stderr


def test_mutated_real_summaries_raise_nothing_but_a_named_value_error(tmp_path):
    """A seeded fuzz test: 400 mutations of a real summary (with a timeline, set-aside time and a
    phase tree) go through everything a user runs on a file; each either reads and renders, or
    raises ValueError naming the file."""
    import random

    t = steptrace.Tracer(warmup_steps=0, print_at_exit=False)
    for i in range(20):
        with t.step():
            with t.phase("input"):
                pass
            with t.phase("compute"):
                with t.phase("forward"):
                    pass
            if i == 10:
                with t.exclude("validation"):
                    pass
    base = t.summary().to_json().encode()
    rng = random.Random(20261124)
    pieces = [
        b"1e400",
        b"-1",
        b"NaN",
        b"[",
        b"]",
        b"{",
        b"}",
        b'"',
        b"null",
        b"\\u001b",
        b"\xff",
        b"[[[[[[[[",
        b"18446744073709551616",
        b'"parent": "forward"',
        b"0.5",
        b"true",
    ]
    path = tmp_path / "fuzz.json"
    readable = 0
    for _ in range(400):
        data = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            kind = rng.randrange(3)
            if kind == 0:
                data[at:at] = rng.choice(pieces)
            elif kind == 1:
                del data[at : at + rng.randint(1, 8)]
            else:
                data[at] = rng.randrange(256)
        path.write_bytes(bytes(data))
        try:
            s = steptrace.load(path)
        except ValueError as e:
            assert str(path) in str(e) and len(str(e)) < 400, str(e)[:500]
            continue
        readable += 1
        str(s), s.to_dict(), s.to_trace(), s.to_html()  # what it accepted renders
    assert 0 < readable < 400


def test_empty_files_and_broken_json_are_said_in_steptraces_own_words(tmp_path):
    cases = {
        "empty.json": (b"", "the file is empty"),
        "nothing.json.gz": (gzip.compress(b""), "a gzip file of nothing"),
        "blank.json": (b"  \n", "only white space"),
        # a summary cut short is said as a trace cut short is
        "cut.json": (b'{"schema": "steptrace.summary/1", "steps": ', "the text ends early (a truncated file?) at byte"),
        "cut-trace.json": (b'{"traceEvents": [{"ph": "X", "name": "a", ', "the text ends early (a truncated file?)"),
        "bad.json": (b'{"schema": "steptrace.summary/1", "steps": x}', "not valid JSON (at byte"),
        "fields.json": (b'{"schema": "steptrace.summary/1"}', 'malformed steptrace summary: no "'),
    }
    for name, (data, said) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ValueError) as raised:
            steptrace.load(path)
        message = str(raised.value)
        assert message.startswith(f"{path}: ") and said in message, message
        assert "json.exception" not in message and "parse error" not in message and "steptrace: " not in message


def test_a_stray_json_in_a_job_folder_is_left_out_and_named_by_show_and_trace_alike(tmp_path):
    """Another program's JSON beside the rank traces (a run's notes, a config) once stopped `steptrace
    trace DIR` ("not a steptrace summary") where it should be left out, as `show DIR` leaves out an
    execution trace; alone, it is still refused by name."""
    import shutil

    from conftest import ROOT

    for name in ("rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"):
        shutil.copy(ROOT / "tests" / "data" / "gloo_straggler" / name, tmp_path / name)
    (tmp_path / "notes.json").write_text('{"lr": 0.1, "note": "the run\'s settings"}\n')
    (tmp_path / "list.json").write_text("[1, 2]\n")
    show = cli("show", tmp_path)
    assert show.returncode == 0, show.stderr
    trace = cli("trace", tmp_path, "-o", tmp_path / "job.trace.json")
    assert trace.returncode == 0, trace.stderr
    for proc in (show, trace):
        assert "left out of the job: " in proc.stderr and "notes.json: a JSON object with neither" in proc.stderr, (
            proc.stderr
        )
    alone = cli("show", tmp_path / "notes.json")
    assert alone.returncode == 2 and "neither a steptrace summary nor a torch.profiler trace" in alone.stderr
