"""A program's environment and name, tried as a hostile or careless user would: path variables of
bytes outside UTF-8, a program run as ``python -c``, a hang report whose folder another user made
first. Each gets a defined behaviour and the program its own exit status."""

import os
import subprocess
import sys
import time

import pytest

STEPS = r"""
import sys, steptrace
for i in steptrace.steps(range(30)):
    with steptrace.phase("compute"):
        pass
"""


def clean_env(**more):
    env = {k: v for k, v in os.environb.items() if not k.startswith(b"STEPTRACE_")}
    env.update({k.encode(): v if isinstance(v, bytes) else v.encode() for k, v in more.items()})
    return env


def test_path_variables_of_bytes_outside_utf8_are_the_files_the_os_names(tmp_path):
    """``STEPTRACE_JSON=$'/tmp/x/run-\\xff.json'`` once raised UnicodeDecodeError at import and the
    program exited 1: the path is the bytes it names, as every other program on Linux reads it."""
    folder = os.fsencode(tmp_path)
    env = clean_env(
        STEPTRACE_JSON=folder + b"/run-\xff.json",
        STEPTRACE_CAPTURE_DIR=folder + b"/caps-\xfe",
        STEPTRACE_HTML=folder + b"/report-\xfd.html",
        STEPTRACE_JSONL=folder + b"/live-\xfc.jsonl",
        STEPTRACE_PRINT_AT_EXIT="0",
        STEPTRACE_WARMUP_STEPS="0",
    )
    proc = subprocess.run([sys.executable, "-c", STEPS], env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"UnicodeDecodeError" not in proc.stderr
    names = os.listdir(folder)
    assert b"run-\xff.json" in names and b"report-\xfd.html" in names, names
    import steptrace

    assert steptrace.load(os.fsdecode(folder + b"/run-\xff.json")).to_dict()["steps"] == 30


def test_a_program_run_as_python_c_names_no_file_with_a_leading_dash(tmp_path):
    from steptrace._capture import files

    for argv0, name in (("-c", "c"), ("--weird", "weird"), ("-", "run"), ("-.-", "run"), ("train.py", "train")):
        saved = sys.argv[:]
        sys.argv[0] = argv0
        try:
            assert files.run_name() == name, argv0
        finally:
            sys.argv[:] = saved


HANG = r"""
import sys, steptrace
steptrace.configure(warmup_steps=0, hang_after=1.0, capture_dir=sys.argv[1])
for i in steptrace.steps(range(20)):
    with steptrace.phase("compute"):
        if i == 3:
            import time
            time.sleep(3600)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to give a folder to another user")
def test_a_hang_report_is_not_written_into_a_folder_another_user_made_first(tmp_path):
    """A shared working folder whose ``steptrace-captures`` another user made first: root's report
    once landed there (and with the folder swapped for a link, anywhere). Now it is not written,
    said once; the hang itself is still said on stderr."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    theirs = shared / "steptrace-captures"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    proc = subprocess.Popen(
        [sys.executable, "-c", HANG, str(theirs)], env=clean_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    err = b""
    try:
        deadline = time.monotonic() + 60
        os.set_blocking(proc.stderr.fileno(), False)
        while time.monotonic() < deadline and b"hang suspected" not in err:
            err += proc.stderr.read() or b""
            time.sleep(0.2)
    finally:
        proc.kill()
        err += proc.communicate(timeout=30)[1] or b""
    text = err.decode(errors="replace")
    assert "hang suspected: step 3 has been open" in text, text
    assert f"the hang report is not written: {theirs}: belongs to another user (uid 65534)" in text, text
    assert list(theirs.iterdir()) == []
